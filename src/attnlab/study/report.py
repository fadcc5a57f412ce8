"""Tables, figures and step times for chapter 10's study, all computed from the results CSV.

- :func:`summary_markdown`: every group at its chosen learning rate, with parameter counts,
  mean test accuracy and 95 % t-interval, length-generalisation accuracy, flatness;
- :func:`accuracy_markdown`: one compact table per task;
- :func:`plot_accuracy`, :func:`plot_embedding_ablation`, :func:`plot_curves`: the figures;
- :func:`time_attentions`, :func:`timing_markdown`: step times measured side by side;
- :func:`write_report`: ``summary.md`` and the PNG figures into a folder;
- :func:`group_key`, :class:`StudyResults`, :class:`Paired`, :class:`Quotes`: the
  bookkeeping of chapter 10's results section (configurations by name, paired differences,
  the numbers its prose quotes, glued for the book and printed for a plain notebook).
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from attnlab.study.grids import LONG_STEPS
from attnlab.study.models import StudyModel
from attnlab.study.runner import task_loss
from attnlab.study.slots import ATTENTIONS, EMBEDDINGS, POSITIONS
from attnlab.study.stats import excludes_zero, paired_interval, summarize


def label(group: dict[str, object]) -> str:
    """A short name for a group: ``gam-p2 rel/layernorm``, plus ``2L``, ``d36``, ``k12`` (Shaw's
    clipping distance) and ``2000 steps`` (the block ``gapped-long``) where not default.

    Examples
    --------
    >>> from attnlab.study.report import label
    >>> label(dict(attention="sdpa", positions="rel", embedding="-", layers="2", d="36"))
    'sdpa rel 2L d36'
    >>> label(dict(attention="sdpa", positions="rel", embedding="-", layers="1", d="32",
    ...            shaw_k="12", steps="2000"))
    'sdpa rel k12 2000 steps'
    """
    text = f"{group['attention']} {group['positions']}"
    if group["embedding"] != "-":
        text += f"/{group['embedding']}"
    if str(group["layers"]) != "1":
        text += f" {group['layers']}L"
    if str(group["d"]) != "32":
        text += f" d{group['d']}"
    if str(group.get("shaw_k", 8)) != "8":
        text += f" k{group['shaw_k']}"
    if _long(group):
        text += f" {group['steps']} steps"
    return text


def _long(group: dict[str, object]) -> bool:
    """Whether a group or row belongs to the block ``gapped-long`` (``LONG_STEPS`` steps)."""
    return str(group.get("steps", "")) == str(LONG_STEPS)


def _interval(mean: object, low: object, high: object) -> str:
    if math.isnan(float(mean)):  # type: ignore[arg-type]
        return "—"
    if math.isnan(float(low)):  # type: ignore[arg-type]
        return f"{float(mean):.3f}"  # type: ignore[arg-type]
    return f"{float(mean):.3f} [{float(low):.3f}, {float(high):.3f}]"  # type: ignore[arg-type]


def summary_markdown(rows: Iterable[dict[str, str]]) -> str:
    """Every group as one markdown table row (test accuracy: mean [95 % t-interval])."""
    lines = [
        "| task | model | lr (tried) | seeds | parameters | test accuracy [95 % CI] "
        "| accuracy at n = 32 [95 % CI] | flat | ms / step |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in summarize(rows):
        lines.append(
            f"| {s['task']} | {label(s)} | {s['lr']} ({s['lrs']}) | {s['seeds']} "
            f"| {s['parameters']:,} | {_interval(s['acc_mean'], s['acc_low'], s['acc_high'])} "
            f"| {_interval(s['long_mean'], s['long_low'], s['long_high'])} "
            f"| {float(s['flat']):.0%} | {float(s['ms_per_step']):.1f} |"  # type: ignore[arg-type]
        )
    return "\n".join(lines) + "\n"


def accuracy_markdown(rows: Iterable[dict[str, str]]) -> str:
    """One compact table per task: model, parameters, seeds, test accuracy [95 % CI].

    Examples
    --------
    >>> rows = [
    ...     {"task": "shift", "attention": "sdpa", "positions": "abs", "embedding": "-",
    ...      "steps": "10", "batch_size": "8", "d": "32", "h": "2", "layers": "1",
    ...      "long_n": "0", "lr": "0.003", "val_accuracy": a, "test_accuracy": a,
    ...      "long_accuracy": "nan", "test_loss": "0.1", "parameters": "10",
    ...      "ms_per_step": "1", "curve": "1 0.5"}
    ...     for a in ("0.5", "0.7")
    ... ]
    >>> print(accuracy_markdown(rows))
    **shift** (test accuracy, mean [95 % t-interval] over seeds)
    <BLANKLINE>
    | model | parameters | seeds | lr | test accuracy |
    |---|---|---|---|---|
    | sdpa abs | 10 | 2 | 0.003 | 0.600 [-0.671, 1.871] |
    <BLANKLINE>
    """
    summary = summarize(rows)
    blocks = []
    for task in dict.fromkeys(str(s["task"]) for s in summary):
        lines = [
            f"**{task}** (test accuracy, mean [95 % t-interval] over seeds)",
            "",
            "| model | parameters | seeds | lr | test accuracy |",
            "|---|---|---|---|---|",
        ]
        for s in (s for s in summary if s["task"] == task):
            lines.append(
                f"| {label(s)} | {s['parameters']:,} | {s['seeds']} | {s['lr']} "
                f"| {_interval(s['acc_mean'], s['acc_low'], s['acc_high'])} |"
            )
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)


def _bars(ax, groups: Sequence[dict[str, object]], rows: Sequence[dict[str, str]]) -> None:
    """Mean test accuracy with its 95 % interval, and one dot per seed."""
    for i, g in enumerate(groups):
        low, high = float(g["acc_low"]), float(g["acc_high"])  # type: ignore[arg-type]
        mean = float(g["acc_mean"])  # type: ignore[arg-type]
        ax.bar(i, mean, 0.7, color="C0" if g["positions"] == "rel" else "C1", alpha=0.6)
        if not math.isnan(low):
            ax.errorbar(i, mean, yerr=[[mean - low], [high - mean]], color="k", capsize=3)
        accs = [
            float(r["test_accuracy"]) for r in rows
            if all(str(r.get(k)) == str(g.get(k)) for k in ("task", "attention", "positions",
                                                            "embedding", "layers", "d", "lr",
                                                            "steps", "shaw_k"))
        ]  # fmt: skip
        ax.plot([i] * len(accs), accs, "k.", markersize=3)
    ax.set_xticks(range(len(groups)), [label(g) for g in groups], rotation=60, fontsize=7,
                  ha="right")  # fmt: skip
    ax.set_ylim(0, 1.02)


def plot_accuracy(rows: Iterable[dict[str, str]], task: str = "gapped"):
    """Test accuracy of every one-block, width-32 model on ``task``: bars, intervals, seeds.

    The block ``gapped-long`` (``LONG_STEPS`` steps) is left out: ``summary.md`` lists it.

    Returns the matplotlib figure (matplotlib is imported here, not at module import).
    """
    import matplotlib.pyplot as plt

    rows = list(rows)
    groups = [
        s for s in summarize(rows)
        if s["task"] == task and str(s["layers"]) == "1" and str(s["d"]) == "32"
        and not _long(s)
    ]  # fmt: skip
    fig, ax = plt.subplots(figsize=(max(4.0, 0.42 * len(groups) + 1.5), 3.6))
    _bars(ax, groups, rows)
    ax.set_title(f"{task}: test accuracy (bars: mean, whiskers: 95 % t-interval)", fontsize=9)
    ax.set_ylabel("test accuracy")
    fig.tight_layout()
    return fig


def plot_embedding_ablation(rows: Iterable[dict[str, str]], task: str = "gapped"):
    """GAM-relative on ``task`` for each embedding of ``r``: mean, 95 % interval, seeds.

    At ``FULL_STEPS`` steps: the block ``gapped-long`` is left out.
    """
    import matplotlib.pyplot as plt

    rows = list(rows)
    summary = [
        s for s in summarize(rows)
        if s["task"] == task and s["embedding"] in EMBEDDINGS and str(s["layers"]) == "1"
        and str(s["d"]) == "32" and not _long(s)
    ]  # fmt: skip
    attentions = list(dict.fromkeys(str(s["attention"]) for s in summary))
    fig, ax = plt.subplots(figsize=(max(4.0, 1.3 * len(attentions) + 1.5), 3.4))
    width = 0.26
    for j, embedding in enumerate(EMBEDDINGS):
        for i, attention in enumerate(attentions):
            match = [
                s for s in summary if (s["attention"], s["embedding"]) == (attention, embedding)
            ]
            if not match:
                continue
            g, x = match[0], i + (j - 1) * width
            mean, low, high = (float(g[k]) for k in ("acc_mean", "acc_low", "acc_high"))  # type: ignore[arg-type]
            ax.bar(x, mean, width, color=f"C{j}", alpha=0.7, label=embedding if i == 0 else None)
            if not math.isnan(low):
                ax.errorbar(x, mean, yerr=[[mean - low], [high - mean]], color="k", capsize=2)
            accs = [
                float(r["test_accuracy"]) for r in rows
                if (r["task"], r["attention"], r["positions"], r["embedding"], r["layers"],
                    r["d"], r["lr"]) == (task, attention, "rel", embedding, "1", "32",
                                         str(g["lr"])) and not _long(r)
            ]  # fmt: skip
            ax.plot([x] * len(accs), accs, "k.", markersize=3)
    ax.set_xticks(range(len(attentions)), attentions)
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("test accuracy")
    ax.set_title(f"GAM-relative on {task}: embedding of r", fontsize=9)
    ax.legend(fontsize=7, frameon=True, loc="center right")
    fig.tight_layout()
    return fig


def plot_curves(rows: Iterable[dict[str, str]], task: str = "gapped", lr: str | None = "0.003"):
    """Mean training-loss curve (over seeds) of every one-block, width-32 model on ``task``.

    The block ``gapped-long`` (``LONG_STEPS`` steps) is left out.
    """
    import matplotlib.pyplot as plt

    rows = [
        r for r in rows
        if r["task"] == task and r["layers"] == "1" and r["d"] == "32"
        and (lr is None or r["lr"] == lr) and not _long(r)
    ]  # fmt: skip
    fig, ax = plt.subplots(figsize=(8.0, 3.8))
    for name in dict.fromkeys(label(r) for r in rows):
        members = [r for r in rows if label(r) == name]
        curves = np.array([[float(v) for v in r["curve"].split()] for r in members])
        steps = int(members[0]["steps"])
        x = (np.arange(curves.shape[1]) + 0.5) * steps / curves.shape[1]
        ax.plot(x, curves.mean(axis=0), "--" if "abs" in name else "-", label=name)
    ax.set_yscale("log")
    ax.set_xlabel("training step")
    ax.set_ylabel("training loss (mean over seeds)")
    ax.set_title(f"{task}: learning curves", fontsize=9)
    # 15 curves: the legend goes beside the axes, where it hides none of them
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig


def time_attentions(
    names: Sequence[str] | None = None,
    positions: str = "abs",
    *,
    n: int = 16,
    d: int = 32,
    h: int = 2,
    batch_size: int = 32,
    rounds: int = 30,
    seed: int = 0,
) -> dict[str, float]:
    """Median milliseconds of one training step of :class:`StudyModel` per attention.

    The models are timed *side by side*: each round runs one Adam step (forward, backward,
    update) of every model, in a fresh random order, on the same random batch, so a machine
    that is busy with other work slows all of them alike and the ratios stay meaningful.
    GAM-relative uses the layer-normalised embedding (the embedding does not change the cost).

    Examples
    --------
    >>> from attnlab.study import time_attentions
    >>> ms = time_attentions(["sdpa", "gam-p1"], rounds=2, n=4, d=8)
    >>> sorted(ms), all(v > 0 for v in ms.values())
    (['gam-p1', 'sdpa'], True)
    """
    names = list(ATTENTIONS) if names is None else list(names)
    torch.manual_seed(seed)
    models = {
        name: StudyModel(
            10, 10, n, name, positions, d=d, h=h,
            embedding="layernorm" if positions == "rel" and name.startswith("gam") else "none",
        )
        for name in names
    }  # fmt: skip
    optimisers = {name: torch.optim.Adam(m.parameters(), lr=1e-3) for name, m in models.items()}
    inputs = torch.randint(0, 10, (batch_size, n))
    targets = torch.randint(0, 10, (batch_size, n))
    order = np.random.default_rng(seed)
    times: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(rounds + 1):  # round 0 warms up and is not recorded
        for i in order.permutation(len(names)):
            name = names[i]
            start = time.perf_counter()
            loss = task_loss(models[name], (inputs, targets))
            optimisers[name].zero_grad()
            loss.backward()
            optimisers[name].step()
            times[name].append(time.perf_counter() - start)
    return {name: 1000 * statistics.median(t[1:]) for name, t in times.items()}


def timing_markdown(rounds: int = 30) -> str:
    """Side-by-side step times of every attention, both position modes, relative to ``sdpa``."""
    lines = [
        "| attention | ms / step (abs) | ratio to sdpa (abs) | ms / step (rel) | "
        "ratio to sdpa (rel) |",
        "|---|---|---|---|---|",
    ]
    ms = {positions: time_attentions(positions=positions, rounds=rounds) for positions in POSITIONS}
    for name in ATTENTIONS:
        cells = []
        for positions in POSITIONS:
            cells += [
                f"{ms[positions][name]:.2f}",
                f"{ms[positions][name] / ms[positions]['sdpa']:.2f}",
            ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_report(rows: Sequence[dict[str, str]], out: str | os.PathLike) -> list[Path]:
    """Write ``summary.md`` and the figures (``accuracy.png``, ``ablation.png``, curves)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from attnlab.plot import use_book_style

    use_book_style()
    out = Path(out)
    written = [out / "summary.md"]
    written[0].write_text(
        accuracy_markdown(rows) + "\n**Every configuration**\n\n" + summary_markdown(rows),
        encoding="utf-8",
    )
    tasks = {r["task"] for r in rows}
    figures = {}
    if "gapped" in tasks:
        figures["accuracy.png"] = plot_accuracy(rows, "gapped")
        figures["ablation.png"] = plot_embedding_ablation(rows, "gapped")
        figures["curves_gapped.png"] = plot_curves(rows, "gapped")
    for name, fig in figures.items():
        fig.savefig(out / name)
        plt.close(fig)
        written.append(out / name)
    return written


# ---------------------------------------------------------------------------------------------
# Chapter 10's results section: configurations by name, paired differences, quoted numbers.


def group_key(group: dict[str, object]) -> str:
    """The name of a configuration (a summary group or a CSV row), as chapter 10 spells it.

    ``task.attention.positions.embedding``, then, only where it differs from the default,
    ``.2L`` (blocks), ``.d36`` (width ``d``), ``.k12`` (Shaw's clipping distance ``k_max``)
    and ``.s2000`` (the ``LONG_STEPS`` steps of the block ``gapped-long``).

    Parameters
    ----------
    group : dict
        Holds ``task``, ``attention``, ``positions``, ``embedding``, ``layers``, ``d`` and
        ``steps``; ``shaw_k`` (default 8) where the row has it. Values may be text or numbers.

    Returns
    -------
    str
        The name, for example ``"gapped.gam-p2.rel.layernorm.s2000"``.

    Examples
    --------
    >>> from attnlab.study.report import group_key
    >>> group_key(dict(task="gapped", attention="sdpa", positions="rel", embedding="-",
    ...                layers="2", d="36", shaw_k="12", steps="800"))
    'gapped.sdpa.rel.-.2L.d36.k12'
    >>> group_key(dict(task="gapped", attention="gam-p2", positions="rel",
    ...                embedding="layernorm", layers=1, d=32, steps=2000))
    'gapped.gam-p2.rel.layernorm.s2000'
    """
    text = f"{group['task']}.{group['attention']}.{group['positions']}.{group['embedding']}"
    text += f".{group['layers']}L" if str(group["layers"]) != "1" else ""
    text += f".d{group['d']}" if str(group["d"]) != "32" else ""
    text += f".k{group['shaw_k']}" if str(group.get("shaw_k", 8)) != "8" else ""
    return text + (f".s{group['steps']}" if _long(group) else "")


def interval_text(group: dict[str, object], stat: str = "acc") -> str:
    """``"mean [low, high]"`` of a summary group's ``stat`` (``acc`` or ``long``), 3 decimals.

    Examples
    --------
    >>> from attnlab.study.report import interval_text
    >>> interval_text({"acc_mean": 0.6, "acc_low": 0.512, "acc_high": 0.688})
    '0.600 [0.512, 0.688]'
    """
    mean, low, high = (float(group[f"{stat}_{part}"]) for part in ("mean", "low", "high"))  # type: ignore[arg-type]
    return f"{mean:.3f} [{low:.3f}, {high:.3f}]"


class Paired(NamedTuple):
    """A paired difference ``A - B`` over seeds: mean, 95 % t-interval, and the verdict of
    chapter 10's rule (*separated*: the interval excludes 0)."""

    mean: float
    low: float
    high: float
    separated: bool

    def text(self) -> str:
        """``"+0.0123 [-0.0040, +0.0286]"``: signed, four decimals."""
        return f"{self.mean:+.4f} [{self.low:+.4f}, {self.high:+.4f}]"


def paired(a: dict[int, float], b: dict[int, float]) -> Paired:
    """The rule of chapter 10 on two ``{seed: result}`` maps (:func:`paired_interval`).

    Examples
    --------
    >>> from attnlab.study.report import paired
    >>> p = paired({0: 0.90, 1: 0.80, 2: 0.85}, {0: 0.88, 1: 0.77, 2: 0.84})
    >>> p.text(), p.separated
    ('+0.0200 [-0.0048, +0.0448]', False)
    """
    mean, low, high = paired_interval(a, b)
    return Paired(mean, low, high, excludes_zero((low, high)))


class StudyResults:
    """The rows of a study's CSV, and each configuration at its chosen rate, by name.

    Parameters
    ----------
    rows : iterable of dict
        CSV rows (:func:`attnlab.study.read_results`), one per run: ``n_runs`` rows.

    Attributes
    ----------
    rows : list of dict
        The rows, ``n_runs`` of them.
    groups : dict
        :func:`group_key` name -> summary group (:func:`attnlab.study.stats.summarize`): the
        ``n_configs`` configurations, each at its rate chosen on validation.

    Raises
    ------
    ValueError
        If two configurations share a name.

    Examples
    --------
    >>> from attnlab.study.report import StudyResults
    >>> def row(seed, lr, val, test):
    ...     return {"task": "shift", "attention": "sdpa", "positions": "rel", "embedding": "-",
    ...             "steps": "800", "batch_size": "32", "d": "32", "h": "2", "layers": "1",
    ...             "long_n": "0", "shaw_k": "8", "seed": str(seed), "lr": lr,
    ...             "val_accuracy": val, "test_accuracy": test, "long_accuracy": "nan",
    ...             "test_loss": "0.1", "parameters": "10", "ms_per_step": "1",
    ...             "curve": "1 0.5"}
    >>> results = StudyResults([row(0, "0.01", "0.9", "0.8"), row(1, "0.01", "0.7", "0.6"),
    ...                         row(0, "0.001", "0.5", "0.5"), row(1, "0.001", "0.5", "0.4")])
    >>> list(results.groups), results.by_seed("shift.sdpa.rel.-")
    (['shift.sdpa.rel.-'], {0: 0.8, 1: 0.6})
    >>> results.val_by_rate("shift.sdpa.rel.-")
    (['0.001', '0.01'], [0.5, 0.8])
    """

    def __init__(self, rows: Iterable[dict[str, str]]) -> None:
        self.rows = list(rows)
        summary = summarize(self.rows)
        self.groups = {group_key(g): g for g in summary}
        if len(self.groups) != len(summary):
            raise ValueError("two configurations share a name")

    def __getitem__(self, name: str) -> dict[str, object]:
        return self.groups[name]

    def __contains__(self, name: object) -> bool:
        return name in self.groups

    def runs(self, name: str, rate: str | None = None) -> list[dict[str, str]]:
        """The rows of configuration ``name``: at ``rate``, or at every rate when ``None``."""
        return [r for r in self.rows
                if group_key(r) == name and (rate is None or r["lr"] == rate)]  # fmt: skip

    def by_seed(self, name: str) -> dict[int, float]:
        """``{seed: test accuracy}`` of ``name`` at its chosen rate (one entry per seed)."""
        rate = str(self.groups[name]["lr"])
        return {int(r["seed"]): float(r["test_accuracy"]) for r in self.runs(name, rate)}

    def seeds(self, name: str) -> list[float]:
        """The test accuracies of ``name``'s seeds at its chosen rate, by seed."""
        return [v for _, v in sorted(self.by_seed(name).items())]

    def at_rate(self, name: str, rate: str) -> list[float]:
        """The test accuracies of ``name``'s seeds at ``rate`` (chosen or not)."""
        return [float(r["test_accuracy"]) for r in self.runs(name, rate)]

    def val_by_rate(self, name: str) -> tuple[list[str], list[float]]:
        """The rates tried for ``name``, smallest first, and the mean validation accuracy over
        the seeds at each: two lists of ``n_rates`` entries."""
        rates = sorted({r["lr"] for r in self.runs(name)}, key=float)
        means = [statistics.fmean(float(r["val_accuracy"]) for r in self.runs(name, rate))
                 for rate in rates]  # fmt: skip
        return rates, means

    def flat_seeds(self, name: str) -> int:
        """How many of ``name``'s seeds at its chosen rate are flat (solved or no longer
        improving, :func:`attnlab.study.stats.summarize`)."""
        g = self.groups[name]
        return round(float(g["flat"]) * int(g["seeds"]))  # type: ignore[arg-type]

    def curve_point(self, name: str, rate: str, point: int) -> float:
        """The mean over the seeds of point ``point`` (0-based) of the training-loss curves of
        ``name`` at ``rate`` (the CSV keeps 20 points, each the mean of a twentieth of the
        steps)."""
        return statistics.fmean(float(r["curve"].split()[point]) for r in self.runs(name, rate))

    def paired(self, a: str, b: str) -> Paired:
        """The paired difference ``a - b`` of two configurations at their chosen rates."""
        return paired(self.by_seed(a), self.by_seed(b))

    def values_table(self, names: Iterable[str]) -> str:
        """The per-configuration values a text quotes, one line each (fields joined by
        ``" | "``): name, mean test accuracy [95 % t-interval], the same at ``n = 32`` (``-``
        where not tested), chosen rate, parameters, seeds.

        Examples
        --------
        >>> from attnlab.study.report import StudyResults
        >>> results = StudyResults([])
        >>> results.groups["x"] = dict(acc_mean=0.5, acc_low=0.4, acc_high=0.6,
        ...                            long_mean=float("nan"), lr="0.01", parameters=1234,
        ...                            seeds=5)
        >>> header, line = results.values_table(["x"]).splitlines()
        >>> [field.strip() for field in line.split(" | ")]
        ['x', '0.500 [0.400, 0.600]', '-', '0.01', '1,234', '5']
        """
        lines = [f"{'configuration':36s} | {'accuracy':21s} | {'at n = 32':21s} | lr     | "
                 "params | seeds"]  # fmt: skip
        for name in names:
            g = self.groups[name]
            tested = not math.isnan(float(g["long_mean"]))  # type: ignore[arg-type]
            at_32 = interval_text(g, "long") if tested else "-"
            lines.append(f"{name:36s} | {interval_text(g):21s} | {at_32:21s} | "
                         f"{g['lr']!s:6s} | {g['parameters']:6,} | {g['seeds']}")  # fmt: skip
        return "\n".join(lines)


class Quotes:
    r"""The numbers a text quotes: each glued once for the book, and kept to be printed.

    A glue role (``{glue:md}`name```) renders only in the built book; in Jupyter or Colab it
    shows nothing, so every quoted number is also printed by the cell that glues it
    (:meth:`show`).

    Parameters
    ----------
    glue : callable
        ``glue(name, text)``: hands one value to the book (myst-nb), called once per name.
    results : StudyResults, optional
        The configurations :meth:`paired` and :meth:`show` read.

    Attributes
    ----------
    values : dict
        name -> the text glued under it.
    verdicts : dict
        ``diff.A~B`` -> whether the rule separated ``A - B``.

    Examples
    --------
    >>> from attnlab.study.report import Paired, Quotes
    >>> book = {}
    >>> quote = Quotes(book.__setitem__)
    >>> quote("steps.long", "2000")
    >>> quote.difference("a", "b", Paired(0.02, 0.01, 0.03, True))
    >>> print("\n".join(quote.lines()))
    steps.long: 2000
    a minus b: +0.0200 [+0.0100, +0.0300] separated
    >>> quote.lines(), book["diff.a~b"]
    ([], '+0.0200 [+0.0100, +0.0300]')
    """

    #: Kinds printed in a :meth:`StudyResults.values_table` (or the settings table of
    #: section 10.5), not one line each.
    TABLED = ("acc", "params", "lr", "seeds", "hp")

    def __init__(self, glue: Callable[[str, str], object],
                 results: StudyResults | None = None) -> None:  # fmt: skip
        self._glue = glue
        self.results = results
        self.values: dict[str, str] = {}
        self.verdicts: dict[str, bool] = {}
        self._shown: set[str] = set()

    def __call__(self, name: str, text: str) -> None:
        """Glue ``text`` under ``name``; a name is glued once (the book refuses twice)."""
        if name in self.values:
            raise ValueError(f"{name!r} is glued already")
        self.values[name] = text
        self._glue(name, text)

    def difference(self, a: str, b: str, result: Paired) -> None:
        """Glue ``result`` as ``diff.a~b`` with its verdict (again: the same value, skipped)."""
        name = f"diff.{a}~{b}"
        if name in self.values:
            if self.values[name] != result.text():
                raise ValueError(f"{name} was glued as {self.values[name]}")
            return
        self.verdicts[name] = result.separated
        self(name, result.text())

    def paired(self, a: str, b: str) -> Paired:
        """``results.paired(a, b)``, glued as ``diff.a~b``."""
        if self.results is None:
            raise ValueError("Quotes needs results to pair configurations")
        result = self.results.paired(a, b)
        self.difference(a, b, result)
        return result

    def lines(self) -> list[str]:
        """What was glued since the last call, one line each, but the tabled kinds:
        ``"A minus B: value separated"`` (or ``not separated``), else ``"name: value"``."""
        lines = []
        for name in [n for n in self.values if n not in self._shown]:
            self._shown.add(name)
            if name.split(".")[0] in self.TABLED:
                continue
            if name in self.verdicts:
                a, b = name[len("diff.") :].split("~")
                verdict = "separated" if self.verdicts[name] else "not separated"
                lines.append(f"{a} minus {b}: {self.values[name]} {verdict}")
            else:
                lines.append(f"{name}: {self.values[name]}")
        return lines

    def show(self, names: Sequence[str] = ()) -> None:
        """Print the values table of ``names`` (if any), then :meth:`lines`."""
        if names:
            if self.results is None:
                raise ValueError("Quotes needs results to print a values table")
            print(self.results.values_table(names))
        for line in self.lines():
            print(line)
