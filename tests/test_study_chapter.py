"""Chapter 10 quotes only numbers that the packaged results.csv (or timing.md) gives.

Every number in the chapter's results prose is a myst-nb ``glue`` reference. This test reads
the values glued into the stored notebook and recomputes each one from the committed CSV with
plain Python (its own grouping, its own choice of the learning rate on validation accuracy, its
own t-interval), so a quoted number that no longer matches the CSV fails here. It also checks
that every glue reference in the markdown has a value, and that the results sections type no
decimal number by hand.
"""

from __future__ import annotations

import csv
import functools
import json
import math
import re
import statistics
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "10_gam_study.ipynb"
# The package data chapter 10 reads (attnlab.study.packaged_results); read here by path.
CSV = ROOT / "src" / "attnlab" / "study" / "results" / "results.csv"
TIMING = ROOT / "src" / "attnlab" / "study" / "results" / "timing.md"
#: t_{0.975, df} from a printed table (Student's t), for df = 1 … 9.
T = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}
GLUE_ROLE = re.compile(r"\{glue:md\}`([^`]+)`")


def _cells(notebook: Path = NOTEBOOK):
    return json.loads(notebook.read_text(encoding="utf-8"))["cells"]


def glued(notebook: Path = NOTEBOOK) -> dict[str, str]:
    """name → the markdown text glued into the stored ``notebook`` (default: chapter 10)."""
    values = {}
    for cell in _cells(notebook):
        for out in cell.get("outputs", []):
            scrapbook = out.get("metadata", {}).get("scrapbook", {})
            if "name" in scrapbook:
                prefix = scrapbook.get("mime_prefix", "")
                values[scrapbook["name"]] = out["data"][f"{prefix}text/markdown"]
    return values


def _rows() -> list[dict[str, str]]:
    return list(_read_csv(CSV.stat().st_mtime_ns))


@functools.cache
def _read_csv(stamp: int) -> tuple[dict[str, str], ...]:
    """The CSV's rows, read once per version of the file (``expected`` asks for them in loops
    over the groups: reading the file each time made this module take over a minute)."""
    with CSV.open(newline="", encoding="utf-8") as handle:
        return tuple(csv.DictReader(handle))


def _group(key: str) -> list[dict[str, str]]:
    """The runs of one group at the rate with the best mean validation accuracy."""
    task, attention, positions, embedding, *extra = key.split(".")
    layers, d, shaw_k, steps = "1", "32", "8", "4000" if task == "recall" else "800"
    for token in extra:
        layers = token[:-1] if token.endswith("L") else layers
        d = token[1:] if token.startswith("d") else d
        shaw_k = token[1:] if token.startswith("k") else shaw_k
        steps = token[1:] if token.startswith("s") else steps
    runs = [
        r for r in _rows()
        if (r["task"], r["attention"], r["positions"], r["embedding"], r["layers"], r["d"],
            r["shaw_k"], r["steps"])
        == (task, attention, positions, embedding, layers, d, shaw_k, steps)
    ]  # fmt: skip
    assert runs, f"no rows for {key}"
    rates = {r["lr"] for r in runs}

    def val(rate):
        return statistics.fmean(float(r["val_accuracy"]) for r in runs if r["lr"] == rate)

    best = max(sorted(rates, key=float), key=val)  # ties: the smallest rate
    return [r for r in runs if r["lr"] == best]


def _key(row: dict[str, str]) -> str:
    """The group name of a row, as the chapter's glue names spell it."""
    text = ".".join(row[c] for c in ("task", "attention", "positions", "embedding"))
    text += f".{row['layers']}L" if row["layers"] != "1" else ""
    text += f".d{row['d']}" if row["d"] != "32" else ""
    text += f".k{row['shaw_k']}" if row["shaw_k"] != "8" else ""
    return text + (f".s{row['steps']}" if row["steps"] not in ("800", "4000") else "")


def _flat(row: dict[str, str]) -> bool:
    """Solved (test accuracy >= 0.99), or the loss fell < 10 % over the last quarter."""
    curve = [float(v) for v in row["curve"].split()]
    start = curve[len(curve) - len(curve) // 4]  # 20 points: the 16th, a quarter from the end
    return float(row["test_accuracy"]) >= 0.99 or curve[-1] > 0.9 * start


def _interval(values: list[float]) -> str:
    mean = sum(values) / len(values)
    if len(values) == 1:
        return f"{mean:.3f}"
    half = T[len(values) - 1] * statistics.stdev(values) / math.sqrt(len(values))
    return f"{mean:.3f} [{mean - half:.3f}, {mean + half:.3f}]"


def expected(name: str) -> str | None:
    """The text a glue name must hold, recomputed from the CSV (None: not a CSV number)."""
    stat, _, key = name.partition(".")
    if stat in ("acc", "long"):
        column = "test_accuracy" if stat == "acc" else "long_accuracy"
        return _interval([float(r[column]) for r in _group(key)])
    if stat == "params":
        if "." not in key:
            return None  # counted by the notebook from the models, not read from the CSV
        return f"{int(_group(key)[0]['parameters']):,}"
    if stat == "lr":
        return _group(key)[0]["lr"]
    if stat == "seeds":
        return str(len(_group(key)))
    if stat == "steps":  # steps.recall / .other / .long: the one training length of those rows
        lengths = {r["steps"] for r in _rows() if (r["task"] == "recall") == (key == "recall")}
        lengths = {s for s in lengths if (s == "2000") == (key == "long")}
        assert len(lengths) == 1, f"{name}: several training lengths {lengths}"
        return lengths.pop()
    if stat == "chosen":  # chosen.RATE: configurations whose best validation rate is RATE
        keys = {_key(r) for r in _rows()}
        best = [_group(k)[0]["lr"] for k in keys]
        return str(len(best) if key == "all" else best.count(key))
    if stat in ("flat", "flatcount") and key != "recall":  # seeds flat by the rule: "k of n"
        suffix = key.removeprefix("gapped.gam-rel")  # "" or ".s2000" (the block gapped-long)
        parts = [key] if not key.startswith("gapped.gam-rel") else [
            f"gapped.{f}.rel.{e}{suffix}" for f in ("gam-p1", "gam-p2", "gam-poly")
            for e in ("none", "layernorm", "scaled")
        ]  # fmt: skip
        runs = [r for part in parts for r in _group(part)]
        return f"{sum(map(_flat, runs))} of {len(runs)}"
    if name == "sweep.edge":  # configurations whose chosen rate is an end of the rates tried
        count = 0
        for k in {_key(r) for r in _rows()}:
            tried = sorted({r["lr"] for r in _rows() if _key(r) == k}, key=float)
            count += _group(k)[0]["lr"] in (tried[0], tried[-1])
        return str(count)
    if name == "sweep.edge.long":  # of the block gapped-long (never extended): "k of n"
        keys = {k for k in {_key(r) for r in _rows()} if k.endswith(".s2000")}
        ends = 0
        for k in keys:
            tried = sorted({r["lr"] for r in _rows() if _key(r) == k}, key=float)
            ends += _group(k)[0]["lr"] in (tried[0], tried[-1])
        return f"{ends} of {len(keys)}"
    if name == "sweep.edge.solved":  # of those, perfect mean validation accuracy at that rate
        count = 0
        for k in {_key(r) for r in _rows()}:
            tried = sorted({r["lr"] for r in _rows() if _key(r) == k}, key=float)
            best = _group(k)
            if best[0]["lr"] in (tried[0], tried[-1]):
                count += all(float(r["val_accuracy"]) == 1.0 for r in best)
        return str(count)
    if name == "flat.recall":  # share of recall runs (at the chosen rates) solved or flat
        runs = [r for k in {_key(r) for r in _rows() if r["task"] == "recall"} for r in _group(k)]
        return f"{sum(map(_flat, runs)) / len(runs):.0%}"
    if name == "csv.rows":
        return str(len(_rows()))
    if name == "csv.train_minutes":
        return f"{sum(float(r['seconds']) for r in _rows()) / 60:.0f}"
    if name == "timing.wall_minutes":
        return re.search(r"took ([\d.]+) min of wall time", TIMING.read_text()).group(1)
    return None


def test_the_chapter_glues_numbers_from_the_csv():
    values = glued()
    checked = [name for name in values if expected(name) is not None]
    assert len(checked) >= 20, f"only {len(checked)} glued CSV numbers: the check sees nothing"
    wrong = {n: (values[n], expected(n)) for n in checked if values[n] != expected(n)}
    assert not wrong, f"glued value != value recomputed from the CSV: {wrong}"


def test_every_glue_reference_has_a_value():
    values = glued()
    names = {m for c in _cells() if c["cell_type"] == "markdown"
             for m in GLUE_ROLE.findall("".join(c["source"]))}  # fmt: skip
    assert names, "the chapter quotes no glued number"
    assert names <= set(values), f"referenced but never glued: {sorted(names - set(values))}"


def test_results_prose_types_no_decimal_numbers():
    """Sections 10.5 to 10.7 quote results only through glue: no typed 0.97 or 1.000."""
    text, inside = [], False
    for cell in _cells():
        source = "".join(cell["source"])
        if cell["cell_type"] != "markdown":
            continue
        if "## 10.5" in source:
            inside = True
        if inside:
            text.append(GLUE_ROLE.sub("GLUED", source))
        if "## 10.8" in source:
            break
    typed = re.findall(r"(?<![\w.])\d+\.\d{2,}", re.sub(r"`[^`]*`", "", "\n".join(text)))
    assert text and not typed, f"numbers typed into the results prose: {typed}"


def test_the_recomputation_by_hand():
    """The test's own interval, on numbers worked by hand: s = sqrt(0.005), half = 0.0878."""
    assert _interval([0.5, 0.7, 0.6, 0.6, 0.6]) == "0.600 [0.512, 0.688]"
    assert _interval([1.0, 1.0]) == "1.000 [1.000, 1.000]"
    with pytest.raises(AssertionError, match="no rows"):
        expected("acc.gapped.no-such-attention.rel.-")


def test_a_quote_that_disagrees_with_the_csv_fails(monkeypatch):
    """The main check can fail: one glued number changed by hand is reported."""
    values = glued()
    name = next(n for n in values if n.startswith("acc.") and expected(n) is not None)
    monkeypatch.setitem(globals(), "glued", lambda: values | {name: "0.123 [0.100, 0.146]"})
    with pytest.raises(AssertionError, match=name.replace(".", r"\.")):
        test_the_chapter_glues_numbers_from_the_csv()


#: Quoted values printed once, where they are first computed (section 10.5), not by each item.
SHARED_QUOTES = ("steps.",)


def _items_and_their_printouts(cells):
    """(item number, its markdown, what the code cell just before it printed) for section 10.6."""
    found, inside = [], False
    for i, cell in enumerate(cells):
        source = "".join(cell["source"])
        inside = inside or (cell["cell_type"] == "markdown" and "## 10.6" in source)
        if not inside or cell["cell_type"] != "markdown":
            continue
        if "## 10.7" in source:
            break
        match = re.match(r"(\d+)\. \*", source)
        if match:
            before = cells[i - 1]
            printed = "".join("".join(o.get("text", "")) for o in before.get("outputs", [])
                              if o.get("output_type") == "stream")  # fmt: skip
            found.append((int(match.group(1)), source, printed))
    return found


def test_each_result_item_follows_a_cell_that_prints_its_numbers(cells=None):
    """In Jupyter or Colab a glue role shows nothing: the cell before each item of section 10.6
    prints every number the item quotes (the readers' point 1), so the items stand one to a
    cell, each after its own code cell."""
    items = _items_and_their_printouts(cells if cells is not None else _cells())
    assert [n for n, _, _ in items] == list(range(1, 11)), [n for n, _, _ in items]
    values = glued()
    for number, text, printed in items:
        assert len(re.findall(r"^\d+\. \*", text, flags=re.M)) == 1, f"item {number}: one a cell"
        for name in GLUE_ROLE.findall(text):
            if name.startswith(SHARED_QUOTES):
                continue
            assert values[name] in printed, (number, name, values[name])


def test_the_printout_check_fails_on_the_old_layout():
    """Items 1 to 5 in one markdown cell after a figure (the old layout), or one item's cell
    printing nothing: the check above fails on each."""
    cells = _cells()
    start = next(i for i, c in enumerate(cells) if "## 10.6" in "".join(c["source"]))
    first_five = [i for i, c in enumerate(cells) if c["cell_type"] == "markdown"
                  and re.match(r"[1-5]\. \*", "".join(c["source"]))]  # fmt: skip
    merged = {"cell_type": "markdown",
              "source": ["\n".join("".join(cells[i]["source"]) for i in first_five)]}
    figure = {"cell_type": "code", "source": [], "outputs": []}
    old = cells[: start + 1] + [figure, merged] + cells[first_five[-1] + 1 :]
    with pytest.raises(AssertionError):
        test_each_result_item_follows_a_cell_that_prints_its_numbers(old)
    silent = [dict(c) for c in cells]
    item_3 = next(i for i, c in enumerate(cells) if "".join(c["source"]).startswith("3. *"))
    silent[item_3 - 1] = figure  # item 3's numbers printed nowhere before it
    with pytest.raises(AssertionError, match="3, "):
        test_each_result_item_follows_a_cell_that_prints_its_numbers(silent)
