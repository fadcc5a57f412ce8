"""Tables, figures and step times for chapter 10's study, all computed from the results CSV.

- :func:`summary_markdown`: every group at its chosen learning rate, with parameter counts,
  mean test accuracy and 95 % t-interval, length-generalisation accuracy, flatness;
- :func:`accuracy_markdown`: one compact table per task;
- :func:`plot_accuracy`, :func:`plot_embedding_ablation`, :func:`plot_curves`: the figures;
- :func:`time_attentions`, :func:`timing_markdown`: step times measured side by side;
- :func:`write_report`: ``summary.md`` and the PNG figures into a folder.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import torch

from attnlab.study.grids import LONG_STEPS
from attnlab.study.models import StudyModel
from attnlab.study.runner import task_loss
from attnlab.study.slots import ATTENTIONS, EMBEDDINGS, POSITIONS
from attnlab.study.stats import summarize


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
