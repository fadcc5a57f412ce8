"""The language grid of issue 27: slots, seeds, multiply-adds, the runner, the grid's stages.

Fast and bounded: the models are tiny (``TINY``) except in the multiply-add check, which runs
one forward pass of a sequence at the grid's shape; Dask runs on a ``LocalCluster`` on
127.0.0.1 only.
"""

from __future__ import annotations

import functools
import math
import os

import pytest
import torch
from _timeouts import hang_guard
from torch.utils.flop_counter import FlopCounterMode

from attnlab.lm.model import CharTransformer, LMConfig
from attnlab.study import language_cli
from attnlab.study.engine import run_grid
from attnlab.study.language import (
    LANGUAGE_LAYOUT,
    LMRunConfig,
    format_curve,
    macs_per_token,
    parse_curve,
    run_lm,
)
from attnlab.study.language_grid import (
    DROP_ORDER,
    DROPPED,
    FAMILIES,
    MAIN_SLOTS,
    PILOT_LRS,
    REPRESENTATIVES,
    TINY,
    choose_rates,
    edge_grid,
    family_of,
    main_grid,
    pilot_grid,
)
from attnlab.study.language_report import (
    language_table_markdown,
    mean_curves,
    paired_differences,
    plot_language_curves,
    slot_summary,
)
from attnlab.study.lm_slots import GAM_PATH, LM_SLOTS, MATCHED_D, build_lm, slot_path

#: Columns that measure the machine, not the model (they differ between two identical runs).
TIMING = ("seconds", "cpu_seconds", "ms_per_step", "load")


@pytest.fixture
def bounded_in_time():
    with hang_guard(300):
        yield


def _tiny_model(slot: str, seed: int = 0, path: str = GAM_PATH, context: int = 12):
    return build_lm(slot, vocab_size=20, seed=seed, d=16, layers=2, h=2, context=context,
                    path=path)  # fmt: skip


# ---- the slots -----------------------------------------------------------------------------
@pytest.mark.parametrize("slot", list(LM_SLOTS))
def test_every_slot_is_causal(slot):
    """Changing the token at t changes no output before t (and does change t's)."""
    paths = ("fused", "explicit") if slot_path(slot) != "-" else ("fused",)
    models = {path: _tiny_model(slot, path=path).eval() for path in paths}
    x = torch.randint(0, 20, (3, 12), generator=torch.Generator().manual_seed(1))
    for t in (0, 5, 11):
        y = x.clone()
        y[:, t] = (y[:, t] + 1) % 20
        for path, model in models.items():
            with torch.no_grad():
                a, b = model(x), model(y)
            assert torch.equal(a[:, :t], b[:, :t]), (slot, path, t)
            assert (a[:, t] - b[:, t]).abs().max() > 0, "the changed token must matter at t"


def test_a_seed_gives_the_same_shared_parts_in_every_slot():
    models = {slot: _tiny_model(slot, seed=3) for slot in LM_SLOTS if LM_SLOTS[slot].d is None}
    reference = dict(models["sdpa-learned"].named_parameters())
    shared = [name for name in reference if ".attn." not in name]
    assert "embed.weight" in shared and "blocks.1.mlp.down.weight" in shared
    for slot, model in models.items():
        params = dict(model.named_parameters())
        for name in shared:
            if name == "positions" and LM_SLOTS[slot].positions != "learned":
                assert name not in params, f"{slot} must have no learned absolute positions"
                continue
            assert torch.equal(params[name], reference[name]), (slot, name)
    other = dict(_tiny_model("sdpa-learned", seed=4).named_parameters())
    assert not torch.equal(other["embed.weight"], reference["embed.weight"])
    # the whole model, attention included, is a function of the seed alone
    torch.manual_seed(123)
    again = dict(_tiny_model("gam-p2-b2", seed=3).named_parameters())
    for name, p in models["gam-p2-b2"].named_parameters():
        assert torch.equal(p, again[name]), name


def test_a_seed_gives_the_same_batches_in_every_configuration(monkeypatch):
    import attnlab.lm.training as training

    seen: dict[str, list[torch.Tensor]] = {}
    original = training.random_windows

    def recording(ids, context, batch, generator):
        x, y = original(ids, context, batch, generator)
        seen.setdefault(current, []).append(x.clone())
        return x, y

    monkeypatch.setattr(training, "random_windows", recording)
    for current in ("sdpa-learned", "gamrel-c1"):
        run_lm(LMRunConfig(current, 2, steps=4, **TINY))
    assert len(seen["sdpa-learned"]) == 4
    assert all(
        torch.equal(a, b) for a, b in zip(seen["sdpa-learned"], seen["gamrel-c1"], strict=True)
    )


def test_learned_c1_starts_as_the_fixed_one_and_learns():
    fixed, learned = _tiny_model("gamrel", seed=5), _tiny_model("gamrel-c1", seed=5)
    x = torch.randint(0, 20, (2, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.allclose(fixed(x), learned(x), atol=1e-6)
    inner = learned.blocks[0].attn.inner
    assert inner.c1.item() == pytest.approx(0.5)
    learned(x).sum().backward()
    assert inner.c1_logit.grad is not None and inner.c1_logit.grad != 0


def test_gam_relative_on_contiguous_windows_has_one_theta():
    """Exercise 09.5: on contiguous windows r^α is the same, so Θ is too (whatever the text)."""
    model = _tiny_model("gamrel", seed=1)
    inner = model.blocks[0].attn.inner
    g = torch.Generator().manual_seed(2)
    y1, y2 = torch.randn(2, 12, 16, generator=g), torch.randn(2, 12, 16, generator=g)
    with torch.no_grad():
        _, (phi1, theta1) = inner(y1, torch.arange(12), need_weights=True)
        _, (phi2, theta2) = inner(y2, torch.arange(100, 112), need_weights=True)
        _, (_, gapped) = inner(y1, torch.tensor([0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14]),
                               need_weights=True)  # fmt: skip
    assert torch.equal(theta1, theta2), "every contiguous window has the same Θ"
    assert not torch.allclose(phi1, phi2), "while the content weights Φ differ"
    assert not torch.allclose(theta1, gapped), "a gapped window has another Θ"


def test_matched_width_is_the_closest_to_two_brains():
    def count(slot, d=64):
        return build_lm(slot, vocab_size=85, seed=0, d=d).num_parameters()

    target = count("gam-p2-b2")
    sdpa = {d: count("sdpa-learned", d) for d in range(64, 97, 4)}
    assert min(sdpa, key=lambda d: abs(sdpa[d] - target)) == MATCHED_D
    assert count("sdpa-matched") == sdpa[MATCHED_D]


def _counted_macs(model: torch.nn.Module, context: int) -> float:
    with FlopCounterMode(display=False) as counter:
        model(torch.zeros(1, context, dtype=torch.long))
    return counter.get_total_flops() / 2 / context


@pytest.mark.parametrize("slot", list(LM_SLOTS))
def test_macs_per_token_against_torch_flop_counter(slot):
    """The closed form against PyTorch's FlopCounterMode (2 flops per multiply-add).

    The counter does not see the CPU's fused attention kernel, so ``sdpa`` slots are counted
    on chapter 11's ``"book"`` attention (plain matrix products) and GAM on its explicit path.
    GAM-relative computes its value projection twice (once per branch): ``d²`` per block more
    than the model's function needs.
    """
    v, n = 85, 128
    spec = LM_SLOTS[slot]
    if spec.kind == "sdpa":
        config = LMConfig(vocab_size=v, d=spec.d or 64, layers=2, heads=4, context=n,
                          positions=spec.positions, attention="book")  # fmt: skip
        model = CharTransformer(config)
    else:
        model = build_lm(slot, vocab_size=v, seed=0, path="explicit")
    expected = macs_per_token(slot, vocab_size=v)
    duplicate = 2 * 64 * 64 if spec.kind == "gamrel" else 0
    assert _counted_macs(model, n) == expected + duplicate


def test_macs_of_sdpa_by_hand():
    d, n, v = 64, 128, 85
    per_block = (3 * d * d + d * d) + (n * d + n * d) + (d * 4 * d + 4 * d * d)
    assert macs_per_token("sdpa-learned", vocab_size=v) == 2 * per_block + d * v == 136_512


# ---- configurations and errors ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"slot": "nope"}, "unknown slot 'nope'"),
        ({"steps": 0}, "steps"),
        ({"lr": -1.0}, "lr must be"),
        ({"steps": 10, "curve_points": 3}, "curve_points=3 must divide steps=10"),
        ({"path": "fused"}, "has no GAM path"),
        ({"slot": "gam-p2", "path": "magic"}, "path must be"),
    ],
)
def test_bad_configurations_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LMRunConfig(**({"slot": "sdpa-learned", "seed": 0} | kwargs))


def test_the_path_is_pinned_and_recorded():
    assert LMRunConfig("gam-p2", 0).path == GAM_PATH
    assert LMRunConfig("gamrel-c1", 0).path == GAM_PATH
    assert LMRunConfig("shaw", 0).path == "-"
    assert LMRunConfig("gam-p2", 0, path="explicit").key() != LMRunConfig("gam-p2", 0).key()
    with pytest.raises(ValueError, match="unknown slot"):
        build_lm("nope", vocab_size=10, seed=0)
    with pytest.raises(ValueError, match="path must be"):
        build_lm("gam-p2", vocab_size=10, seed=0, path="magic")
    with pytest.raises(ValueError, match="unknown slot"):
        macs_per_token("nope", vocab_size=10)


# ---- the grid's stages ------------------------------------------------------------------------
def test_every_slot_has_one_family_and_the_plan_names_real_slots():
    assert sorted(s for slots in FAMILIES.values() for s in slots) == sorted(LM_SLOTS)
    assert all(family_of(REPRESENTATIVES[f]) == f for f in FAMILIES)
    assert set(DROP_ORDER) <= set(LM_SLOTS) and DROPPED == DROP_ORDER[: len(DROPPED)]
    assert set(MAIN_SLOTS) == set(LM_SLOTS) - set(DROPPED), "nothing dropped but by the plan"
    with pytest.raises(ValueError, match="unknown slot"):
        family_of("nope")


def _rows(scores: dict[tuple[str, float], float]) -> list[dict[str, str]]:
    return [{"slot": s, "lr": str(lr), "val_bpc": str(v)} for (s, lr), v in scores.items()]


def test_rates_by_the_stated_rule_with_one_rate_beyond_a_winning_end():
    scores = {}
    for slot, best in zip(REPRESENTATIVES.values(), (1e-3, 3e-3, 1e-2, 3e-3), strict=True):
        for lr in PILOT_LRS:
            scores[(slot, lr)] = 2.0 + abs(math.log10(lr / best))
    rows = _rows(scores)
    edges = edge_grid(rows)
    assert [(c.slot, c.lr) for c in edges] == [("sdpa-learned", 3e-4), ("gam-p2-b2", 3e-2)]
    assert choose_rates(rows) == {"gam-1": 3e-3, "gamrel": 3e-3}, "ends wait for their edge"
    scores[("sdpa-learned", 3e-4)] = 1.9  # beyond the end is better still: it is chosen
    scores[("gam-p2-b2", 3e-2)] = 2.5  # worse than the end: the end is chosen
    assert choose_rates(_rows(scores)) == {
        "sdpa": 3e-4, "gam-1": 3e-3, "gam-2": 1e-2, "gamrel": 3e-3,
    }  # fmt: skip
    tie = _rows({("gam-p2", lr): 2.0 for lr in PILOT_LRS})
    assert choose_rates(tie) == {}, "a tie at 1e-3 is an end: it waits for 3e-4"


def test_main_grid_is_seed_major_at_the_family_rates():
    grid = main_grid({"sdpa": 1e-3, "gamrel": 1e-2}, steps=10, seeds=(0, 1, 2))
    slots = [s for s in MAIN_SLOTS if family_of(s) in ("sdpa", "gamrel")]
    assert [(c.seed, c.slot) for c in grid] == [(seed, s) for seed in (0, 1, 2) for s in slots]
    assert all(c.lr == (1e-3 if family_of(c.slot) == "sdpa" else 1e-2) for c in grid)
    assert len(pilot_grid()) == 12 and {c.steps for c in pilot_grid()} == {1000}


def _fake_run(config: LMRunConfig, device: str = "cpu") -> dict[str, str]:
    """Rows without training: validation bpc lowest at 1e-2 for every slot."""
    row = {k: str(getattr(config, k)) for k in LANGUAGE_LAYOUT.config_columns}
    bpc = 2.0 + abs(math.log10(config.lr / 1e-2)) + 0.01 * config.seed
    row.update({c: "1" for c in LANGUAGE_LAYOUT.columns if c not in row})
    row.update(val_bpc=f"{bpc:.4f}", test_bpc=f"{bpc + 0.1:.4f}", curve="2:3.0 4:2.5")
    return row


def test_the_stages_run_resume_and_choose(tmp_path, monkeypatch):
    calls = []

    def counting(config, device="cpu"):
        calls.append(config)
        return _fake_run(config)

    monkeypatch.setattr(language_cli, "run_lm", counting)
    pilot, main, rates = language_cli.run_language(tmp_path, tiny=True, progress=False)
    assert len(pilot) == 12 + 4, "the pilot and one edge rate (3e-2) per family"
    assert rates == {f: 1e-2 for f in FAMILIES}
    pilot_order = [(c.slot, c.lr) for c in calls[:16]]
    assert pilot_order == [(s, lr) for s in REPRESENTATIVES.values() for lr in (*PILOT_LRS, 3e-2)]
    assert [(c.seed, c.slot) for c in calls[16:]] == [(s, x) for s in (0, 1) for x in MAIN_SLOTS]
    assert len(main) == 2 * len(MAIN_SLOTS)
    calls.clear()
    again = language_cli.run_language(tmp_path, tiny=True, progress=False)
    assert calls == [], "a rerun skips every finished row"
    assert again == (pilot, main, rates)
    assert LANGUAGE_LAYOUT.read(tmp_path / "results.csv") == main


def test_the_command_writes_the_summary_and_the_curves(tmp_path, monkeypatch, capsys):
    from attnlab.study.__main__ import main as command

    monkeypatch.setattr(language_cli, "run_lm", _fake_run)
    command(["--grid", "language-tiny", "--workers", "0", "--out", str(tmp_path)])
    summary = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert "Rates chosen (lowest validation bpc): sdpa 0.01" in summary
    assert (tmp_path / "curves.png").stat().st_size > 1000
    assert f"16 pilot rows, {2 * len(MAIN_SLOTS)} main rows" in capsys.readouterr().out
    (tmp_path / "results.csv").unlink()  # a pilot alone can be reported on
    command(["--grid", "language-tiny", "--report-only", "--out", str(tmp_path)])
    assert "No main-grid row yet" in (tmp_path / "summary.md").read_text(encoding="utf-8")


def test_tiny_grid_in_process_and_on_dask_give_the_same_rows(
    tmp_path, bounded_in_time, monkeypatch
):
    pytest.importorskip("distributed")
    from attnlab.study.engine import dask_executor

    configs = [LMRunConfig(slot, seed, steps=4, **TINY)
               for slot in ("sdpa-learned", "gamrel-c1") for seed in (0, 1)]  # fmt: skip
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in a worker
    try:
        here = run_grid(configs, tmp_path / "here" / "results.csv", progress=False,
                        runner=run_lm, layout=LANGUAGE_LAYOUT)  # fmt: skip
    finally:
        torch.set_num_threads(threads)
    # as an earlier cluster of Dask's default settings leaves it in this process (engine.py)
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")
    with dask_executor(workers=2) as executor:
        # Dask's default MALLOC_TRIM_THRESHOLD_ made each step ~70 % dearer (engine.py)
        assert executor.submit(os.getenv, "MALLOC_TRIM_THRESHOLD_").result() is None
        assert executor.submit(os.getenv, "OMP_NUM_THREADS").result() == "1"
        there = run_grid(
            configs, tmp_path / "dask" / "results.csv", progress=False, executor=executor,
            runner=functools.partial(run_lm, device="cpu"), in_flight=4, layout=LANGUAGE_LAYOUT,
        )  # fmt: skip
    assert os.environ["MALLOC_TRIM_THRESHOLD_"] == "65536", "restored after the cluster"
    assert len(here) == len(there) == 4
    for a, b in zip(here, there, strict=True):
        assert {k: v for k, v in a.items() if k not in TIMING} == {
            k: v for k, v in b.items() if k not in TIMING
        }
    row = here[0]
    assert row["path"] == "-" and here[2]["path"] == GAM_PATH
    assert int(row["chars"]) == 4 * TINY["batch_size"] * TINY["context"]
    assert [s for s, _ in parse_curve(row["curve"])] == [2, 4]
    assert 0 < float(row["test_bpc"]) < 8 and row["threads"] == "1"


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--grid", "language", "--workers", "-1"], "--workers must be"),
        (["--grid", "languages"], "invalid choice"),
        (["--grid", "language", "--report-only"], "--report-only needs"),
    ],
)
def test_bad_arguments_are_one_line_errors(tmp_path, capsys, argv, match):
    from attnlab.study.__main__ import main

    with pytest.raises(SystemExit) as stop:
        main([*argv, "--out", str(tmp_path / "out")])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert match in err and "\n" not in err and "Traceback" not in err


def test_a_foreign_csv_is_refused_and_left_untouched(tmp_path, capsys):
    from attnlab.study.__main__ import main

    (tmp_path / "results.csv").write_text("a,b\n1,2\n", encoding="utf-8")
    with pytest.raises(SystemExit):
        main(["--grid", "language", "--workers", "0", "--out", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert "not a results CSV" in err and "\n" not in err
    assert (tmp_path / "results.csv").read_text(encoding="utf-8") == "a,b\n1,2\n"


# ---- the report --------------------------------------------------------------------------------
# (the t table itself is checked against the integrated density in tests/test_study_stats.py)


def _row(slot: str, seed: int, bpc: float, **extra) -> dict[str, str]:
    row = {"slot": slot, "seed": str(seed), "lr": "0.003", "steps": "2000", "test_bpc": str(bpc),
           "parameters": "100", "macs_per_token": "200", "ms_per_step": "90",
           "batch_size": "32", "context": "128", "curve": "1000:2.5 2000:2.2"}  # fmt: skip
    return row | {k: str(v) for k, v in extra.items()}


def test_paired_difference_by_hand_with_closed_form_quantiles():
    base = [2.10, 2.20, 2.05]
    other = [2.00, 2.15, 2.02]
    rows = [_row("sdpa-learned", s, b) for s, b in enumerate(base)]
    rows += [_row("gam-p2", s, b) for s, b in enumerate(other)]
    rows += [_row("shaw", s, b) for s, b in ((0, 2.3), (2, 2.1))]  # seed 1 missing
    diffs = paired_differences(rows)
    d = [o - b for o, b in zip(other, base, strict=True)]
    mean = sum(d) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / 2)
    t2 = math.sqrt(2 * 0.95**2 / (1 - 0.95**2))  # df = 2: F(t) = 1/2 + t / (2 sqrt(t² + 2))
    half = t2 * sd / math.sqrt(3)
    got = diffs["gam-p2"]
    assert got["seeds"] == [0, 1, 2] and got["differences"] == pytest.approx(d, abs=1e-12)
    assert got["mean"] == pytest.approx(-0.06, abs=1e-12)
    rounding = 0.0005 * sd / math.sqrt(3)  # the table's quantiles have three decimals
    assert (got["low"], got["high"]) == pytest.approx((mean - half, mean + half), abs=rounding)
    assert (mean - half) < 0 < (mean + half), "the hand numbers: an interval across zero"
    shaw = diffs["shaw"]
    t1 = math.tan(math.pi * (0.975 - 0.5))  # df = 1: the Cauchy quantile
    pair = [2.3 - 2.10, 2.1 - 2.05]
    half1 = t1 * abs(pair[0] - pair[1]) / math.sqrt(2) / math.sqrt(2)
    assert shaw["seeds"] == [0, 2]
    assert (shaw["low"], shaw["high"]) == pytest.approx(
        (sum(pair) / 2 - half1, sum(pair) / 2 + half1), abs=0.0005 * half1 / t1
    )
    assert "sdpa-learned" not in diffs
    table = language_table_markdown(rows)
    assert "| gam-p2 | 0.003 | 3 | 100 | 200 | 90 |" in table and "-0.060 [" in table
    summary = slot_summary(rows)
    assert [s["slot"] for s in summary] == ["sdpa-learned", "gam-p2", "shaw"]
    assert summary[1]["mean"] == pytest.approx(sum(other) / 3)


def test_report_refuses_mixed_rows_and_plots_curves():
    rows = [_row("gam-p2", 0, 2.0), _row("gam-p2", 0, 2.1)]
    with pytest.raises(ValueError, match="two rows for seed 0"):
        slot_summary(rows)
    with pytest.raises(ValueError, match="differ in lr"):
        slot_summary([_row("gam-p2", 0, 2.0), _row("gam-p2", 1, 2.1, lr=0.01)])
    rows = [_row("gam-p2", 0, 2.0, curve="1000:2.6 2000:2.2"),
            _row("gam-p2", 1, 2.0, curve="1000:2.4 2000:2.0")]  # fmt: skip
    chars, bpc = mean_curves(rows)["gam-p2"]
    assert chars == [1000 * 4096, 2000 * 4096] and bpc == pytest.approx([2.5, 2.1])
    with pytest.raises(ValueError, match="different checkpoints"):
        mean_curves([_row("gam-p2", 0, 2.0), _row("gam-p2", 1, 2.0, curve="500:3")])
    import matplotlib

    matplotlib.use("Agg")
    figure = plot_language_curves(rows)
    assert figure.axes[0].get_lines()[0].get_ydata().tolist() == pytest.approx([2.5, 2.1])
    with pytest.raises(ValueError, match="no rows"):
        plot_language_curves([])


def test_format_curve_writes_what_parse_curve_reads_and_skips_unscored_steps():
    log = [{"step": 1, "valid_bpc": float("nan")}, {"step": 2, "valid_bpc": 3.14159},
           {"step": 4, "valid_bpc": 2.5}]  # fmt: skip
    text = format_curve(log)
    assert text == "2:3.1416 4:2.5000"
    assert parse_curve(text) == [(2, 3.1416), (4, 2.5)]
    assert format_curve([]) == "" and parse_curve("") == []
