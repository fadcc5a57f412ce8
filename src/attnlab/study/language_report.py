"""Tables of the language grid for chapter 12: seed means, paired differences, the pilot.

- :func:`slot_summary`: per slot, the seeds, the mean test bits per character with its 95 %
  Student t-interval, parameters and multiply-adds per token;
- :func:`paired_differences`: per slot, ``test_bpc(slot, seed) - test_bpc(baseline, seed)``
  over the seeds both have (the same batches and the same shared initialisation, so the
  pairs share their luck), with the mean difference and its 95 % t-interval
  (``attnlab.study.stats.t_interval``, whose quantiles are tested against an
  integration of the t density);
- :func:`language_table_markdown`, :func:`pilot_markdown`, :func:`language_summary`: the
  Markdown of ``summary.md``;
- :func:`plot_language_curves`: validation bits per character against training characters,
  one line per slot (the mean over its seeds), to show whether runs were still falling;
- ``grid_table``, ``grid_table_markdown``: every *planned* slot, one row each, with
  its test bpc seed by seed, and the mean and the paired difference only where every planned
  seed has finished (a slot with missing seeds is marked pending, never left out): the
  table of chapter 12 while the grid is still running, and once it is done.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from attnlab.study.stats import t_interval

__all__ = [
    "BASELINE", "grid_table", "grid_table_markdown", "language_summary", "language_table_markdown",
    "mean_curves", "paired_differences", "pilot_markdown", "plot_language_curves", "slot_summary",
]  # fmt: skip

#: The slot every difference is taken from: chapter 11's model as it is.
BASELINE = "sdpa-learned"


def _by_slot(rows: Iterable[Mapping[str, str]]) -> dict[str, dict[int, Mapping[str, str]]]:
    """``{slot: {seed: row}}`` in the order the slots first appear; a repeated seed raises."""
    out: dict[str, dict[int, Mapping[str, str]]] = {}
    for row in rows:
        seeds = out.setdefault(row["slot"], {})
        seed = int(row["seed"])
        if seed in seeds:
            raise ValueError(
                f"slot {row['slot']!r} has two rows for seed {seed}: one configuration per slot"
            )
        seeds[seed] = row
    return out


def slot_summary(rows: Iterable[Mapping[str, str]]) -> list[dict]:
    """Per slot: ``slot``, ``lr``, ``seeds``, ``mean``, ``low``, ``high`` (test bpc),
    ``parameters``, ``macs_per_token``, ``ms_per_step`` (median over its runs).

    Raises
    ------
    ValueError
        If a slot has two rows for one seed (two configurations mixed), or rows of one slot
        disagree on the rate or the steps.
    """
    out = []
    for slot, seeds in _by_slot(rows).items():
        runs = [seeds[s] for s in sorted(seeds)]
        for column in ("lr", "steps", "parameters"):
            if len({r[column] for r in runs}) != 1:
                raise ValueError(f"the rows of slot {slot!r} differ in {column}")
        mean, low, high = t_interval([float(r["test_bpc"]) for r in runs])
        times = sorted(float(r["ms_per_step"]) for r in runs)
        out.append({
            "slot": slot, "lr": float(runs[0]["lr"]), "seeds": sorted(seeds), "mean": mean,
            "low": low, "high": high, "parameters": int(runs[0]["parameters"]),
            "macs_per_token": int(runs[0]["macs_per_token"]),
            "ms_per_step": times[len(times) // 2],
        })  # fmt: skip
    return out


def paired_differences(
    rows: Iterable[Mapping[str, str]], baseline: str = BASELINE
) -> dict[str, dict]:
    """Per slot but ``baseline``: the seeds paired, the differences, their mean and 95 % interval.

    Returns
    -------
    dict
        ``{slot: {"seeds", "differences", "mean", "low", "high"}}``: ``differences[i]`` is
        ``test_bpc(slot, seeds[i]) - test_bpc(baseline, seeds[i])`` (negative: fewer bits
        than the baseline); a slot sharing no seed with the baseline is left out; one pair
        gives ``nan`` bounds.
    """
    table = _by_slot(rows)
    base = table.get(baseline, {})
    out = {}
    for slot, seeds in table.items():
        if slot == baseline:
            continue
        common = sorted(set(seeds) & set(base))
        if not common:
            continue
        diffs = [float(seeds[s]["test_bpc"]) - float(base[s]["test_bpc"]) for s in common]
        mean, low, high = t_interval(diffs)
        out[slot] = {"seeds": common, "differences": diffs, "mean": mean, "low": low, "high": high}
    return out


def _interval(low: float, high: float) -> str:
    return "–" if math.isnan(low) else f"[{low:+.3f}, {high:+.3f}]"


def language_table_markdown(rows: Sequence[Mapping[str, str]], baseline: str = BASELINE) -> str:
    """The main table: slot, rate, seeds, parameters, multiply-adds per token, ms per step,
    mean test bpc [95 % interval], paired difference from ``baseline`` [95 % interval]."""
    diffs = paired_differences(rows, baseline)
    lines = [
        "| slot | lr | seeds | parameters | MACs/token | ms/step | test bpc [95 %] | "
        f"− {baseline} [95 %] |",
        "|---|---:|---:|---:|---:|---:|---|---|",
    ]
    for s in slot_summary(rows):
        bpc = f"{s['mean']:.3f} " + _interval(s["low"], s["high"]).replace("+", "")
        d = diffs.get(s["slot"])
        diff = "—" if d is None else f"{d['mean']:+.3f} " + _interval(d["low"], d["high"])
        lines.append(
            f"| {s['slot']} | {s['lr']:g} | {len(s['seeds'])} | {s['parameters']:,} | "
            f"{s['macs_per_token']:,} | {s['ms_per_step']:.0f} | {bpc} | {diff} |"
        )
    return "\n".join(lines) + "\n"


def pilot_markdown(rows: Sequence[Mapping[str, str]]) -> str:
    """The pilot: slot, rate, steps, validation and test bpc, ms per step, load."""
    lines = [
        "| slot | lr | steps | val bpc | test bpc | ms/step | load |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in sorted(rows, key=lambda r: (r["slot"], float(r["lr"]))):
        lines.append(
            f"| {r['slot']} | {float(r['lr']):g} | {r['steps']} | {float(r['val_bpc']):.4f} | "
            f"{float(r['test_bpc']):.4f} | {float(r['ms_per_step']):.0f} | {r['load']} |"
        )
    return "\n".join(lines) + "\n"


def language_summary(
    pilot: Sequence[Mapping[str, str]],
    main: Sequence[Mapping[str, str]],
    rates: Mapping[str, float],
) -> str:
    """``summary.md`` of the language grid: the pilot, the chosen rates, the main table."""
    text = "# The language grid\n\n## Learning-rate pilot\n\n"
    text += pilot_markdown(pilot) if pilot else "No pilot row yet.\n"
    chosen = ", ".join(f"{family} {lr:g}" for family, lr in rates.items()) or "none yet"
    text += f"\nRates chosen (lowest validation bpc): {chosen}.\n\n## Main grid\n\n"
    text += language_table_markdown(main) if main else "No main-grid row yet.\n"
    return text


def mean_curves(rows: Iterable[Mapping[str, str]]) -> dict[str, tuple[list[int], list[float]]]:
    """Per slot: the checkpoints' training characters and the mean validation bpc over seeds.

    Raises
    ------
    ValueError
        If the rows of a slot have different checkpoints, or a slot has two rows for a seed.
    """
    from attnlab.study.language import parse_curve

    out = {}
    for slot, seeds in _by_slot(rows).items():
        curves = [parse_curve(seeds[s]["curve"]) for s in sorted(seeds)]
        steps = [step for step, _ in curves[0]]
        if any([step for step, _ in c] != steps for c in curves):
            raise ValueError(f"the rows of slot {slot!r} have different checkpoints")
        row = next(iter(seeds.values()))
        per_step = int(row["batch_size"]) * int(row["context"])
        means = [sum(c[i][1] for c in curves) / len(curves) for i in range(len(steps))]
        out[slot] = ([step * per_step for step in steps], means)
    return out


def plot_language_curves(rows: Sequence[Mapping[str, str]], ax=None):
    """Validation bpc (first 32,768 validation characters) against training characters.

    Returns the matplotlib figure. Raises ``ValueError`` on no rows.
    """
    import matplotlib.pyplot as plt

    if not rows:
        raise ValueError("no rows to plot")
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.2))
    for slot, (chars, bpc) in mean_curves(rows).items():
        ax.plot([c / 1e6 for c in chars], bpc, marker="o", markersize=3, label=slot)
    ax.set_xlabel("training characters (millions)")
    ax.set_ylabel("validation bits per character")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    return ax.figure


def grid_table(
    rows: Iterable[Mapping[str, str]],
    slots: Sequence[str],
    seeds: Sequence[int] = (0, 1, 2),
    baseline: str = BASELINE,
) -> list[dict]:
    """One entry per planned slot (in the order of ``slots``), finished or not.

    Parameters
    ----------
    rows : iterable of mappings
        Rows of the main grid's ``results.csv`` (one per slot and seed).
    slots : sequence of str
        The planned slots, ``k`` of them; a slot of ``rows`` outside ``slots`` raises.
    seeds : sequence of int
        The planned seeds, ``m`` of them; a seed outside them raises.
    baseline : str
        The slot the differences are taken from.

    Returns
    -------
    list of dict
        ``k`` entries: ``slot``; ``bpc`` (``{seed: test bpc or None}``, ``m`` entries);
        ``done`` (how many planned seeds finished); ``complete`` (all ``m``); ``parameters``,
        ``macs_per_token`` (``None`` without a row); ``mean``, ``low``, ``high`` (the test bpc
        and its 95 % t-interval, ``None`` unless complete); ``difference`` (``None``, or
        ``(mean, low, high)`` of ``bpc(slot, s) - bpc(baseline, s)`` over the ``m`` seeds, from
        :func:`paired_differences`, when both the slot and the baseline are complete; the
        baseline's own entry has ``None``).

    Raises
    ------
    ValueError
        On a row of a slot or seed that is not planned, or two rows for one slot and seed.

    Examples
    --------
    >>> bpc = {"sdpa-learned": (2.30, 2.33, 2.27), "gam-p2": (2.40, 2.46, 2.35)}
    >>> rows = [{"slot": slot, "seed": str(seed), "test_bpc": str(v), "lr": "0.001",
    ...          "steps": "2000", "parameters": "100", "macs_per_token": "200",
    ...          "ms_per_step": "9"} for slot, values in bpc.items()
    ...         for seed, v in enumerate(values)]
    >>> base, gam, rel = grid_table(rows, ["sdpa-learned", "gam-p2", "gamrel"])
    >>> [round(v, 4) for v in gam["difference"]]  # D = (0.10, 0.13, 0.08), t = 4.303
    [0.1033, 0.0408, 0.1659]
    >>> rel["done"], rel["complete"], rel["bpc"], rel["difference"]
    (0, False, {0: None, 1: None, 2: None}, None)
    """
    rows = list(rows)
    table = _by_slot(rows)
    for slot, by_seed in table.items():
        if slot not in slots:
            raise ValueError(f"a row of slot {slot!r}, which is not among the planned slots")
        extra = sorted(set(by_seed) - set(seeds))
        if extra:
            raise ValueError(f"slot {slot!r} has rows for seeds {extra}, not planned")
    complete = {s for s in slots if set(table.get(s, {})) == set(seeds)}
    kept = [r for r in rows if r["slot"] in complete]
    summary = {s["slot"]: s for s in slot_summary(kept)}
    diffs = paired_differences(kept, baseline) if baseline in complete else {}
    out = []
    for slot in slots:
        by_seed = table.get(slot, {})
        first = next(iter(by_seed.values()), None)
        entry = {
            "slot": slot,
            "bpc": {s: float(by_seed[s]["test_bpc"]) if s in by_seed else None for s in seeds},
            "done": len(by_seed), "complete": slot in complete,
            "parameters": None if first is None else int(first["parameters"]),
            "macs_per_token": None if first is None else int(first["macs_per_token"]),
            "mean": None, "low": None, "high": None, "difference": None,
        }  # fmt: skip
        if slot in summary:
            entry.update({k: summary[slot][k] for k in ("mean", "low", "high")})
        if slot in diffs:
            d = diffs[slot]
            entry["difference"] = (d["mean"], d["low"], d["high"])
        out.append(entry)
    return out


def grid_table_markdown(
    entries: Sequence[Mapping],
    sizes: Mapping[str, tuple[int, int]] | None = None,
    baseline: str = BASELINE,
) -> str:
    """``grid_table``'s entries as a Markdown table: slot, parameters, MACs/token, test bpc
    per seed (``pending`` where missing), mean [95 %], difference from ``baseline`` [95 %].

    ``sizes`` maps a slot to ``(parameters, macs_per_token)`` for slots without a row yet
    (built from the slot's definition); a slot with a row must agree with it, or it raises
    ``ValueError``.
    """
    sizes = sizes or {}
    seeds = list(entries[0]["bpc"]) if entries else []
    lines = [
        "| configuration | parameters | MACs/token | "
        + " | ".join(f"seed {s}" for s in seeds)
        + f" | mean [95 %] | − `{baseline}` [95 %] |",
        "|---|---:|---:|" + "---:|" * len(seeds) + "---|---|",
    ]
    for e in entries:
        size = (e["parameters"], e["macs_per_token"])
        if e["slot"] in sizes:
            if e["parameters"] is not None and tuple(sizes[e["slot"]]) != size:
                raise ValueError(f"slot {e['slot']!r}: rows say {size}, sizes {sizes[e['slot']]}")
            size = tuple(sizes[e["slot"]])
        params, macs = ("–" if v is None else f"{v:,}" for v in size)
        per_seed = ["pending" if v is None else f"{v:.3f}" for v in e["bpc"].values()]
        if e["complete"]:
            mean = f"{e['mean']:.3f} " + _interval(e["low"], e["high"]).replace("+", "")
        else:
            mean = f"pending ({e['done']} of {len(seeds)} seeds)"
        if e["slot"] == baseline:
            diff = "(baseline)"
        elif e["difference"] is None:
            diff = "pending"
        else:
            diff = f"{e['difference'][0]:+.3f} " + _interval(*e["difference"][1:])
        lines.append(
            f"| `{e['slot']}` | {params} | {macs} | " + " | ".join(per_seed)
            + f" | {mean} | {diff} |"
        )  # fmt: skip
    return "\n".join(lines) + "\n"
