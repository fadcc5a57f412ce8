"""The bookkeeping of chapter 10's results section (attnlab.study.report): names, the paired
rule, the configurations at their chosen rates, and the quoted numbers (glued and printed).

Expected values are worked by hand or by a float formula written here, never read from the
functions under test.
"""

from __future__ import annotations

import math

import pytest

from attnlab.study.report import Paired, Quotes, StudyResults, group_key, paired

#: t_{0.975, df} from a printed table of Student's t.
T = {1: 12.706, 2: 4.303, 4: 2.776}


def _row(seed, lr, val, test, **config):
    base = {"task": "gapped", "attention": "gam-p1", "positions": "rel", "embedding": "layernorm",
            "steps": "800", "batch_size": "32", "d": "32", "h": "2", "layers": "1",
            "long_n": "0", "shaw_k": "8", "seed": str(seed), "lr": lr, "val_accuracy": str(val),
            "test_accuracy": str(test), "long_accuracy": "nan", "test_loss": "0.1",
            "parameters": "9000", "ms_per_step": "1",
            "curve": " ".join(str(v) for v in (2.0, 1.0, 0.5, 0.4))}  # fmt: skip
    return base | {k: str(v) for k, v in config.items()}


def test_group_key_spells_every_non_default_part():
    assert group_key(_row(0, "0.01", 1, 1)) == "gapped.gam-p1.rel.layernorm"
    assert group_key(_row(0, "0.01", 1, 1, layers=2, d=36)) == "gapped.gam-p1.rel.layernorm.2L.d36"
    assert group_key(_row(0, "0.01", 1, 1, shaw_k=12)) == "gapped.gam-p1.rel.layernorm.k12"
    assert group_key(_row(0, "0.01", 1, 1, steps=2000)) == "gapped.gam-p1.rel.layernorm.s2000"
    row = _row(0, "0.01", 1, 1, attention="sdpa", embedding="-")
    del row["shaw_k"]  # rows written before the column existed: k_max = 8
    assert group_key(row) == "gapped.sdpa.rel.-"


def test_paired_is_the_t_interval_of_the_differences():
    """D = (0.02, 0.03, 0.01): mean 0.02, s_D = 0.01, half-width 4.303 * 0.01 / sqrt(3) = 0.0248."""
    result = paired({0: 0.90, 1: 0.80, 2: 0.85}, {0: 0.88, 1: 0.77, 2: 0.84})
    half = T[2] * 0.01 / math.sqrt(3)
    assert math.isclose(result.mean, 0.02, abs_tol=1e-12)
    assert math.isclose(result.high - result.mean, half, rel_tol=1e-3)
    assert not result.separated and result.text() == "+0.0200 [-0.0048, +0.0448]"  # 0.0248
    assert not paired({0: 0.9, 1: 0.8}, {0: 0.8, 1: 0.9}).separated  # D = +-0.1: holds 0


@pytest.fixture
def results():
    rows = [  # two rates, two seeds; 0.01 has the better validation accuracy
        _row(0, "0.01", 0.9, 0.80), _row(1, "0.01", 0.8, 0.70),
        _row(0, "0.001", 0.5, 0.95), _row(1, "0.001", 0.5, 0.95),
        _row(0, "0.01", 1.0, 1.00, attention="sdpa", embedding="-"),
        _row(1, "0.01", 1.0, 1.00, attention="sdpa", embedding="-"),
        _row(0, "0.003", 1.0, 0.99, attention="sdpa", embedding="-"),  # a tie: the smaller
        _row(1, "0.003", 1.0, 0.99, attention="sdpa", embedding="-"),
    ]  # fmt: skip
    return StudyResults(rows)


def test_the_chosen_rate_is_validation_s_and_ties_go_to_the_smaller(results):
    gam, shaw = "gapped.gam-p1.rel.layernorm", "gapped.sdpa.rel.-"
    assert list(results.groups) == [gam, shaw]
    assert results[gam]["lr"] == "0.01" and results.by_seed(gam) == {0: 0.80, 1: 0.70}
    assert results[shaw]["lr"] == "0.003" and results.seeds(shaw) == [0.99, 0.99]
    assert results.at_rate(gam, "0.001") == [0.95, 0.95]
    assert results.val_by_rate(gam) == (["0.001", "0.01"], [0.5, pytest.approx(0.85)])
    assert results.curve_point(gam, "0.01", 2) == 0.5
    assert results.flat_seeds(gam) == 0  # the loss fell 20 % over the last quarter (0.5 to 0.4)
    assert results.flat_seeds(shaw) == 2  # solved: test accuracy 0.99
    diff = results.paired(gam, shaw)  # D = (-0.19, -0.29): mean -0.24, s_D = 0.1 / sqrt 2
    assert math.isclose(diff.mean, -0.24)
    assert math.isclose(diff.high - diff.mean, T[1] * 0.1 / math.sqrt(2) / math.sqrt(2),
                        rel_tol=1e-3)  # fmt: skip
    assert not diff.separated


def test_two_configurations_cannot_share_a_name():
    rows = [_row(0, "0.01", 1, 1), _row(0, "0.01", 1, 1, batch_size=16)]  # batch not in names
    with pytest.raises(ValueError, match="share a name"):
        StudyResults(rows)


def test_the_values_table_prints_the_quoted_fields(results):
    header, gam, shaw = results.values_table(["gapped.gam-p1.rel.layernorm",
                                              "gapped.sdpa.rel.-"]).splitlines()  # fmt: skip
    assert header.split(" | ")[0].strip() == "configuration"
    half = T[1] * math.sqrt(0.005) / math.sqrt(2)  # seeds 0.80, 0.70: s = sqrt(0.005)
    fields = [f.strip() for f in gam.split(" | ")]
    assert fields == ["gapped.gam-p1.rel.layernorm",
                      f"0.750 [{0.75 - half:.3f}, {0.75 + half:.3f}]", "-", "0.01", "9,000", "2"]
    assert [f.strip() for f in shaw.split(" | ")][1] == "0.990 [0.990, 0.990]"


def test_quotes_glue_once_and_print_what_the_table_does_not(results):
    book = {}
    quote = Quotes(lambda name, text: book.setdefault(name, []).append(text), results)
    quote("acc.x", "0.5")  # a tabled kind: glued, not printed as a line
    quote("flat.x", "3 of 5")
    diff = quote.paired("gapped.gam-p1.rel.layernorm", "gapped.sdpa.rel.-")
    quote.paired("gapped.gam-p1.rel.layernorm", "gapped.sdpa.rel.-")  # again: skipped
    assert quote.lines() == [
        "flat.x: 3 of 5",
        f"gapped.gam-p1.rel.layernorm minus gapped.sdpa.rel.-: {diff.text()} not separated",
    ]
    assert quote.lines() == []  # each line once
    assert book["diff.gapped.gam-p1.rel.layernorm~gapped.sdpa.rel.-"] == [diff.text()]
    with pytest.raises(ValueError, match="glued already"):
        quote("flat.x", "4 of 5")
    with pytest.raises(ValueError, match="was glued as"):
        quote.difference("gapped.gam-p1.rel.layernorm", "gapped.sdpa.rel.-",
                         Paired(0.0, -1.0, 1.0, False))  # fmt: skip


def test_show_prints_the_table_then_the_lines(results, capsys):
    quote = Quotes(lambda name, text: None, results)
    quote("steps.long", "2000")
    quote.show(["gapped.sdpa.rel.-"])
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("configuration") and out[1].startswith("gapped.sdpa.rel.-")
    assert out[2] == "steps.long: 2000"
