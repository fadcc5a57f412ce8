"""Chapter 12's numbers, recomputed from the language grid's CSV without the code under test.

Chapter 12 (``notebooks/12_gam_on_language.ipynb``) fills its results table and its
comparisons with ``attnlab.study.language_report.grid_table`` and ``paired_differences``.
Here the same numbers are recomputed from the CSV read with the standard library: a float64
paired t-interval written out below, with Student quantiles from a printed table
(t_{0.975,2} = 4.302652730), not ``attnlab.study.stats``. The helpers' tests pass whatever the
number of finished rows (a slot with fewer than three seeds must be *pending*); the chapter's
need the whole grid.

The chapter's stored outputs are read, never executed (strict nbval re-runs it): its glue roles
must all have a glued value, its code may take its statistics only from the helpers tested
here, and every glued number must equal the recomputation from the CSV as it is now.
"""

from __future__ import annotations

import ast
import csv
import importlib.resources
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from test_notebook_claims import parse
from test_study_chapter import glued as stored_glue

from attnlab.lm.baselines import KneserNey
from attnlab.lm.corpus import load_corpus
from attnlab.study.language_grid import MAIN_SLOTS, SEEDS
from attnlab.study.language_report import BASELINE, grid_table, grid_table_markdown

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "notebooks" / "12_gam_on_language.ipynb"
#: Two-sided 95 % Student t quantiles by degrees of freedom, from a printed table.
T_975 = {1: 12.706204736, 2: 4.302652730, 3: 3.182446305, 4: 2.776445105}
#: What the chapter may import from ``language_report``: the helpers tested in this file (or,
#: for ``mean_curves`` and ``plot_language_curves``, in ``tests/test_study_language.py``).
TESTED_HELPERS = {"BASELINE", "grid_table", "grid_table_markdown", "mean_curves",
                  "paired_differences", "plot_language_curves"}  # fmt: skip


def _csv_rows() -> list[dict[str, str]]:
    """The packaged main grid, read with the csv module alone."""
    results = importlib.resources.files("attnlab.study") / "language_results" / "results.csv"
    with importlib.resources.as_file(results) as path, open(path, newline="") as f:
        return list(csv.DictReader(f))


def _by_slot(rows) -> dict[str, dict[int, float]]:
    out: dict[str, dict[int, float]] = {}
    for r in rows:
        seeds = out.setdefault(r["slot"], {})
        assert int(r["seed"]) not in seeds, "two rows for one slot and seed"
        seeds[int(r["seed"])] = float(r["test_bpc"])
    return out


def _close(got, expected) -> bool:
    """``got (mean, low, high)`` equals ``expected`` up to the library's printed quantile.

    ``attnlab.study.stats`` keeps its t quantiles to three decimals (4.303 for two degrees of
    freedom), so its bounds may differ from the exact quantile's by the half-width times
    ``0.0005 / t``: about 8e-5 of the half-width here, far below the three decimals printed.
    """
    mean, low, high = expected
    slack = (high - mean) * 0.0005 / T_975[2] + 1e-12
    return bool(np.allclose(got, expected, rtol=0, atol=slack))


def _same_number(text: str, value: float, half: float = 0.0) -> bool:
    """A number printed to three decimals is ``value`` rounded, up to the quantile's slack."""
    return abs(float(text) - value) <= 0.0005 + half * 0.0005 / T_975[2] + 1e-9


def _t_interval(values: list[float]) -> tuple[float, float, float]:
    """Mean and 95 % t-interval in float64, written out: sum, squared deviations, k - 1."""
    x = np.asarray(values, dtype=np.float64)
    k = x.size
    mean = x.sum() / k
    variance = ((x - mean) ** 2).sum() / (k - 1)
    half = T_975[k - 1] * math.sqrt(variance / k)
    return float(mean), float(mean - half), float(mean + half)


def _paired(a: dict[int, float], b: dict[int, float]) -> tuple[float, float, float]:
    assert sorted(a) == sorted(b) == list(SEEDS)
    return _t_interval([a[s] - b[s] for s in SEEDS])


def _printed_interval(text: str, expected, signed: bool = False) -> bool:
    """``"m [l, h]"`` (signs on every number if ``signed``) prints ``expected`` to 3 decimals."""
    number = r"[+-]\d+\.\d{3}" if signed else r"-?\d+\.\d{3}"
    match = re.fullmatch(rf"({number}) \[({number}), ({number})\]", text)
    if match is None:
        return False
    half = expected[2] - expected[0]
    return all(_same_number(t, v, half) for t, v in zip(match.groups(), expected, strict=True))


def _check_table(rows, slots=MAIN_SLOTS, seeds=SEEDS):
    """``grid_table`` against the recomputation, for any number of finished rows."""
    bpc = _by_slot(rows)
    full = {s for s in slots if sorted(bpc.get(s, {})) == list(seeds)}
    entries = grid_table(rows, slots, seeds)
    assert [e["slot"] for e in entries] == list(slots)  # every planned slot, none dropped
    for e in entries:
        have = bpc.get(e["slot"], {})
        assert e["bpc"] == {s: have.get(s) for s in seeds}
        assert e["done"] == len(have) and e["complete"] == (e["slot"] in full)
        if e["slot"] in full:
            expected = _t_interval([have[s] for s in seeds])
            assert _close((e["mean"], e["low"], e["high"]), expected)
        else:
            assert e["mean"] is e["low"] is e["high"] is None
        if e["slot"] != BASELINE and e["slot"] in full and BASELINE in full:
            expected = _paired(have, bpc[BASELINE])
            assert _close(e["difference"], expected)
        else:
            assert e["difference"] is None
    return entries, bpc, full


def _fake_rows(seed: int, drop: int = 0) -> list[dict[str, str]]:
    """A made-up grid: every planned slot and seed, a shared luck per seed; ``drop`` rows off
    the end (the grid runs seed-major, so the last rows are seed 2's)."""
    rng = np.random.default_rng(seed)
    luck = rng.normal(0, 0.05, size=len(SEEDS))
    level = {s: 2.3 + 0.5 * rng.random() for s in MAIN_SLOTS}
    rows = [
        {"slot": slot, "seed": str(s), "lr": "0.001", "steps": "2000", "parameters": "1000",
         "macs_per_token": "2000", "ms_per_step": "100",
         "test_bpc": f"{level[slot] + luck[s] + rng.normal(0, 0.01):.4f}"}
        for s in SEEDS for slot in MAIN_SLOTS
    ]  # fmt: skip
    return rows[: len(rows) - drop]


def test_the_table_of_the_packaged_csv_matches_the_recomputation():
    rows = _csv_rows()
    assert len(rows) <= len(MAIN_SLOTS) * len(SEEDS)
    entries, bpc, full = _check_table(rows)
    for e in entries:  # the sizes in the CSV are the slots' own, for every finished row
        for r in rows:
            if r["slot"] == e["slot"]:
                assert (e["parameters"], e["macs_per_token"]) == (
                    int(r["parameters"]),
                    int(r["macs_per_token"]),
                )


@pytest.mark.parametrize("drop", [0, 1, 12, 30, 36])
def test_the_table_of_a_made_up_grid_at_any_stage(drop):
    _check_table(_fake_rows(seed=drop, drop=drop))


def test_paired_interval_written_out_on_three_seeds():
    # D = (0.10, 0.13, 0.08): mean 0.10333, s_D = 0.025166, half = 4.302653 * s_D / sqrt(3)
    rows = [{"slot": s, "seed": str(i), "lr": "1", "steps": "1", "parameters": "1",
             "macs_per_token": "1", "ms_per_step": "1", "test_bpc": str(v)}
            for s, values in ((BASELINE, (2.30, 2.33, 2.27)), ("gam-p2", (2.40, 2.46, 2.35)))
            for i, v in enumerate(values)]  # fmt: skip
    entry = grid_table(rows, (BASELINE, "gam-p2"))[1]
    s_d = math.sqrt(((0.10 - 0.31 / 3) ** 2 + (0.13 - 0.31 / 3) ** 2 + (0.08 - 0.31 / 3) ** 2) / 2)
    half = 4.302652730 * s_d / math.sqrt(3)
    assert _close(entry["difference"], (0.31 / 3, 0.31 / 3 - half, 0.31 / 3 + half))
    assert not _close(
        entry["difference"],
        (0.31 / 3, 0.31 / 3 - 1.96 * s_d / math.sqrt(3), 0.31 / 3 + 1.96 * s_d / math.sqrt(3)),
    )  # not z


def test_unplanned_rows_are_refused():
    rows = _fake_rows(0)
    with pytest.raises(ValueError, match="not among the planned slots"):
        grid_table(rows + [{**rows[0], "slot": "gam-poly-b2"}], MAIN_SLOTS)
    with pytest.raises(ValueError, match="not planned"):
        grid_table(rows + [{**rows[0], "seed": "7"}], MAIN_SLOTS)
    with pytest.raises(ValueError, match="two rows"):
        grid_table(rows + [rows[0]], MAIN_SLOTS)


@pytest.mark.parametrize("drop", [0, 20])
def test_the_markdown_table_shows_every_slot_and_marks_what_is_pending(drop):
    rows = _fake_rows(seed=3, drop=drop)
    entries, bpc, full = _check_table(rows)
    sizes = {s: (1000, 2000) for s in MAIN_SLOTS}
    lines = grid_table_markdown(entries, sizes).strip().splitlines()[2:]
    assert len(lines) == len(MAIN_SLOTS)
    for slot, line in zip(MAIN_SLOTS, lines, strict=True):
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[0] == f"`{slot}`" and cells[1:3] == ["1,000", "2,000"]
        have = bpc.get(slot, {})
        assert cells[3:6] == [f"{have[s]:.3f}" if s in have else "pending" for s in SEEDS]
        if slot in full:
            expected = _t_interval([have[s] for s in SEEDS])
            assert _printed_interval(cells[6], expected), (cells[6], expected)
        else:
            assert cells[6] == f"pending ({len(have)} of 3 seeds)"
        if slot == BASELINE:
            assert cells[7] == "(baseline)"
        elif slot in full and BASELINE in full:
            expected = _paired(have, bpc[BASELINE])
            assert _printed_interval(cells[7], expected, signed=True), (cells[7], expected)
        else:
            assert cells[7] == "pending"
    with pytest.raises(ValueError, match="rows say"):
        grid_table_markdown(entries, {**sizes, MAIN_SLOTS[0]: (1, 2)})


# ---- the chapter, read and never executed ----------------------------------------------------
def _chapter():
    return json.loads(CHAPTER.read_text(encoding="utf-8"))


def test_the_chapter_takes_its_statistics_from_the_tested_helpers_only():
    imported, modules = set(), set()
    for cell in _chapter()["cells"]:
        if cell["cell_type"] != "code":
            continue
        for node in ast.walk(parse("".join(cell["source"]))):  # %pip lines as pass
            if isinstance(node, ast.ImportFrom):
                modules.add(node.module)
                if node.module == "attnlab.study.language_report":
                    imported |= {alias.name for alias in node.names}
            elif isinstance(node, ast.Import):
                modules |= {alias.name for alias in node.names}
    assert imported and imported <= TESTED_HELPERS, imported - TESTED_HELPERS
    assert not modules & {"attnlab.study.stats", "scipy", "scipy.stats", "statistics"}, modules


def test_every_glue_role_of_the_chapter_has_a_stored_value():
    nb = _chapter()
    glued = stored_glue(CHAPTER)
    text = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    roles = set(re.findall(r"\{glue:md\}`([^`]+)`", text))
    roles |= set(re.findall(r"```\{glue:md\} (\S+)", text))
    assert roles, "the chapter cites no glued value"
    assert roles <= set(glued), sorted(roles - set(glued))
    assert all(c.get("execution_count") is not None for c in nb["cells"]
               if c["cell_type"] == "code"), "the chapter is not fully executed"  # fmt: skip


def test_the_chapters_glued_numbers_are_the_csvs():
    rows = _csv_rows()
    glued = stored_glue(CHAPTER)
    assert glued["grid.rows"] == str(len(rows)), "re-execute chapter 12 against the CSV"
    bpc = _by_slot(rows)
    full = {s for s in MAIN_SLOTS if sorted(bpc.get(s, {})) == list(SEEDS)}
    assert len(rows) == len(MAIN_SLOTS) * len(SEEDS) and len(full) == len(MAIN_SLOTS)
    assert glued["grid.status"].startswith("The grid is complete")
    comparisons = {k[len("cmp."):]: v for k, v in glued.items()
                   if k.startswith("cmp.") and "~" in k}  # fmt: skip
    ready = separated = 0
    for pair, text in comparisons.items():
        a, b = pair.split("~")
        if a in full and b in full:
            mean, low, high = _paired(bpc[a], bpc[b])
            ready += 1
            apart = low > 0 or high < 0
            separated += apart
            printed, _, _ = text.rpartition(", ")  # "m [l, h], verdict"
            assert _printed_interval(printed, (mean, low, high), signed=True), (pair, text)
            assert text.endswith("not separated") != apart, (pair, text)
            if apart:
                assert ("fewer" in text) == (mean < 0), (pair, text)
        else:
            assert text == (f"pending (`{a}` {len(bpc.get(a, {}))} of 3 seeds, "
                            f"`{b}` {len(bpc.get(b, {}))} of 3)"), (pair, text)  # fmt: skip
    assert glued["cmp.total"] == str(len(comparisons)) and len(comparisons) >= 10
    assert (glued["cmp.ready"], glued["cmp.separated"]) == (str(ready), str(separated))
    drops = []
    for r in rows:  # the last two checkpoints of each run's curve, "step:bpc" pairs
        *_, before, last = (float(p.split(":")[1]) for p in r["curve"].split())
        drops.append(before - last)
    assert glued["curves.last_drop"] == f"{min(drops):.3f} to {max(drops):.3f}"
    assert glued["t.separable"] == f"{T_975[2] / math.sqrt(3):.2f}" == "2.48"
    base = np.array([bpc[BASELINE][s] for s in SEEDS])
    shared = [slot for slot in MAIN_SLOTS if slot != BASELINE
              and np.cov([bpc[slot][s] for s in SEEDS], base)[0, 1] > 0]  # pairing narrows
    assert glued["pair.helped"] == f"{len(shared)} of the {len(MAIN_SLOTS) - 1}"
    table = glued["grid_table"].strip().splitlines()[2:]  # the table as glued: seed columns
    for slot, line in zip(MAIN_SLOTS, table, strict=True):
        cells = [c.strip() for c in line.strip("|").split("|")]
        have = bpc.get(slot, {})
        assert cells[3:6] == [f"{have[s]:.3f}" if s in have else "pending" for s in SEEDS]


def test_the_ablations_glued_numbers_are_its_csvs():
    """Section 12.4's ablation of ``sdpa-sinusoidal``: its glued bits per character are the
    ablation CSV's and, at rate 0.03 with the table unscaled, the grid's own seed-0 row."""
    ablation = importlib.resources.files("attnlab.study") / "language_results"
    with importlib.resources.as_file(ablation / "sinusoidal_ablation.csv") as path:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    assert {r["seed"] for r in rows} == {"0"} and {r["steps"] for r in rows} == {"2000"}
    sin = {(r["table_scale"], r["lr"]): float(r["test_bpc"]) for r in rows
           if r["slot"] == "sdpa-sinusoidal"}  # fmt: skip
    grid0 = {r["slot"]: float(r["test_bpc"]) for r in _csv_rows() if r["seed"] == "0"}
    sin["1", "0.03"] = grid0["sdpa-sinusoidal"]
    (learned,) = [float(r["test_bpc"]) for r in rows if r["slot"] == BASELINE]
    glued = stored_glue(CHAPTER)
    assert len(sin) == 4
    for (scale, lr), value in sin.items():
        assert glued[f"abl.sin-{scale}-{lr}"] == f"{value:.3f}", (scale, lr)
    assert glued["abl.learned-1-0.01"] == f"{learned:.3f}"
    gap = min(sin["1", "0.01"], sin["0.02", "0.01"]) - learned
    assert glued["abl.gap"] == f"{gap:.3f}"
    corpus = load_corpus()
    bigram = KneserNey(corpus.train, corpus.vocab.size, order=2).bits_per_char(corpus.test)
    assert glued["abl.bigram"] == f"{bigram:.3f}"


def test_the_brain_rate_ablations_glued_numbers_are_its_csvs():
    """Section 12.4's brain-rate ablation: each glued mean and paired interval (against its
    own grid row and against ``sdpa-learned``) recomputed from the two CSVs."""
    ablation = importlib.resources.files("attnlab.study") / "language_results"
    with importlib.resources.as_file(ablation / "brain_rate_ablation.csv") as path:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    split: dict[str, dict[int, float]] = {}
    for r in rows:
        runs = split.setdefault(f"{r['slot']}.{r['slow'].replace('+', '-')}", {})
        assert int(r["seed"]) not in runs
        runs[int(r["seed"])] = float(r["test_bpc"])
    assert set(split) == {"gam-p2.brains", "gamrel.brains", "gamrel.brains-r"}
    grid = _by_slot(_csv_rows())
    glued = stored_glue(CHAPTER)
    for name, by_seed in split.items():
        slot = name.split(".")[0]
        mean = sum(by_seed.values()) / len(by_seed)
        assert _same_number(glued[f"brain.{name}"], mean), name
        for other in (slot, BASELINE):
            expected = _paired(by_seed, grid[other])
            assert _printed_interval(glued[f"brain.{name}~{other}"], expected, signed=True), (
                name, other)  # fmt: skip


def test_relative_against_absolute_at_the_ablations_rates_and_holms_count():
    """The glued ``gamrel.brains-r`` − ``gam-p2.brains`` interval, and the number of the
    fifteen comparisons that survive Holm's correction, recomputed here: p-values from the
    float64 t statistic (exact two-sided form for two degrees of freedom), step-down by hand."""
    ablation = importlib.resources.files("attnlab.study") / "language_results"
    with importlib.resources.as_file(ablation / "brain_rate_ablation.csv") as path:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    by = {(r["slot"], r["slow"], int(r["seed"])): float(r["test_bpc"]) for r in rows}
    relative = {s: by["gamrel", "brains+r", s] for s in SEEDS}
    absolute = {s: by["gam-p2", "brains", s] for s in SEEDS}
    glued = stored_glue(CHAPTER)
    expected = _paired(relative, absolute)
    assert _printed_interval(glued["brain.gamrel-vs-gam-p2"], expected, signed=True)
    assert expected[1] < 0 < expected[2]  # "not separated", as the chapter says

    bpc = _by_slot(_csv_rows())
    pairs = re.findall(r"\(\"([\w-]+)\", (BASELINE|\"[\w-]+\")\)", _questions_source())
    assert len(pairs) == 15
    p_values = []
    for a, b in pairs:
        b = BASELINE if b == "BASELINE" else b.strip('"')
        d = np.array([bpc[a][s] - bpc[b][s] for s in SEEDS])
        t = d.mean() / (d.std(ddof=1) / math.sqrt(len(d)))
        p_values.append(1 - abs(t) / math.sqrt(t * t + 2))  # Student t, 2 degrees of freedom
    kept = 0
    for i, p in enumerate(sorted(p_values)):
        if p > 0.05 / (len(p_values) - i):
            break
        kept += 1
    assert glued["holm.kept"] == str(kept) == "5"


def _questions_source() -> str:
    """The source of the chapter's cell that lists its comparisons."""
    (cell,) = [c for c in _chapter()["cells"] if "".join(c["source"]).startswith("questions = [")]
    return "".join(cell["source"]).split("]\n", 1)[0]
