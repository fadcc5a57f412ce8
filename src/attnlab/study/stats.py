"""Statistics of chapter 10's study: seed means with 95 % t-intervals, the learning rate chosen
on the validation split, and the rule for calling two configurations different.

A configuration's *group* is every CSV column but ``seed`` and ``lr``. For each group,
:func:`summarize` picks the learning rate whose runs have the highest mean **validation**
accuracy (the test split never takes part in a choice) and reports the **test** accuracy of
that rate's seeds: mean and a two-sided 95 % Student t-interval,
``mean ± t_{0.975, k-1} · s / sqrt(k)`` over ``k`` seeds (``s`` the sample standard
deviation). Two configurations are compared by seed: seed ``s`` gives both the same training
batches and test set, so :func:`paired_interval` takes the per-seed differences
``a_s - b_s`` and gives their mean with the same t-interval; they are *separated* when that
interval excludes 0 (:func:`excludes_zero`), otherwise "not separated" (which is not evidence
of agreement). :func:`separated` (two unpaired intervals that do not overlap) is the older,
weaker rule.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence

#: Two-sided 95 % quantiles ``t_{0.975, df}`` of Student's t for ``df = 1 … 30`` (standard
#: tables; ``tests/test_study_stats.py`` recomputes them by integrating the density).
T_975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip

#: The columns that identify a group (everything that is neither a seed nor a rate).
GROUP_COLUMNS = (
    "task", "attention", "positions", "embedding", "steps", "batch_size", "d", "h", "layers",
    "long_n", "shaw_k",
)  # fmt: skip
#: Group columns that rows written before the column existed may lack, with the value they
#: meant (every run before the third pass used Shaw's tables at ``k_max = 8``).
DEFAULTS = {"shaw_k": "8"}


def t_interval(values: Sequence[float]) -> tuple[float, float, float]:
    """``(mean, low, high)``: the mean and its two-sided 95 % Student t-interval.

    One value gives an interval of zero width only if no spread can be estimated: it is
    returned as ``(v, nan, nan)``. Ties (zero spread) give ``(mean, mean, mean)``.

    Raises
    ------
    ValueError
        On no values, or more than 31 (the table ``T_975`` ends at 30 degrees of
        freedom).

    Examples
    --------
    >>> from attnlab.study.stats import t_interval
    >>> [round(v, 3) for v in t_interval([0.5, 0.7, 0.6, 0.6, 0.6])]
    [0.6, 0.512, 0.688]
    """
    k = len(values)
    if k == 0 or k > len(T_975) + 1:
        raise ValueError(f"t_interval needs 1 to {len(T_975) + 1} values, got {k}")
    mean = statistics.fmean(values)
    if k == 1:
        return mean, math.nan, math.nan
    half = T_975[k - 2] * statistics.stdev(values) / math.sqrt(k)
    return mean, mean - half, mean + half


def separated(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Whether two intervals ``(low, high)`` do not overlap (a NaN bound never separates).

    Examples
    --------
    >>> from attnlab.study.stats import separated
    >>> separated((0.1, 0.3), (0.35, 0.5)), separated((0.1, 0.4), (0.35, 0.5))
    (True, False)
    """
    if any(math.isnan(v) for v in (*a, *b)):
        return False
    return a[1] < b[0] or b[1] < a[0]


def paired_interval(
    a: Mapping[int, float], b: Mapping[int, float]
) -> tuple[float, float, float]:
    """``(mean, low, high)`` of the per-seed differences ``a[s] - b[s]`` (95 % t-interval).

    ``a`` and ``b`` map a seed to one configuration's result at that seed; they must hold the
    same seeds (at least two, so that a spread can be estimated).

    Raises
    ------
    ValueError
        If the seeds of ``a`` and ``b`` differ, or fewer than two are shared.

    Examples
    --------
    >>> from attnlab.study.stats import excludes_zero, paired_interval
    >>> a = {0: 0.90, 1: 0.80, 2: 0.85}
    >>> b = {0: 0.88, 1: 0.77, 2: 0.84}
    >>> [round(v, 4) for v in paired_interval(a, b)]
    [0.02, -0.0048, 0.0448]
    >>> excludes_zero(paired_interval(a, b)[1:])
    False
    """
    if set(a) != set(b):
        raise ValueError(
            f"paired_interval needs the same seeds on both sides, got {sorted(a)} and {sorted(b)}"
        )
    if len(a) < 2:
        raise ValueError(f"paired_interval needs at least 2 seeds, got {len(a)}")
    return t_interval([a[s] - b[s] for s in sorted(a)])


def excludes_zero(interval: tuple[float, float]) -> bool:
    """Whether ``(low, high)`` lies wholly above or wholly below 0 (a NaN bound never does).

    Examples
    --------
    >>> from attnlab.study.stats import excludes_zero
    >>> excludes_zero((-0.0126, -0.0010)), excludes_zero((-0.01, 0.02)), excludes_zero((0.0, 0.0))
    (True, False, False)
    """
    low, high = interval
    if math.isnan(low) or math.isnan(high):
        return False
    return low > 0 or high < 0


def _floats(rows: Iterable[dict[str, str]], column: str) -> list[float]:
    return [float(r[column]) for r in rows]


def summarize(rows: Iterable[dict[str, str]]) -> list[dict[str, object]]:
    """One dict per group (first-seen order), at the learning rate chosen on validation.

    Keys: the ``GROUP_COLUMNS``; ``lr`` (chosen), ``lrs`` (the rates tried, as text),
    ``seeds``; ``acc_mean``, ``acc_low``, ``acc_high`` (test accuracy, 95 % t-interval),
    ``acc_std``; ``val_mean``; ``long_mean``, ``long_low``, ``long_high`` (``nan`` when the
    model was not tested at another length); ``loss_mean``; ``parameters``; ``ms_per_step``;
    ``flat`` (fraction of seeds that are solved, test accuracy >= 0.99, or whose training
    loss fell by less than 10 % over the last quarter of the curve).
    """
    groups: dict[tuple[str, ...], dict[str, list[dict[str, str]]]] = {}
    for row in rows:
        key = tuple(str(row[c] if c in row else DEFAULTS[c]) for c in GROUP_COLUMNS)
        groups.setdefault(key, {}).setdefault(str(row["lr"]), []).append(row)
    summary = []
    for key, by_lr in groups.items():
        lr = max(by_lr, key=lambda rate: (statistics.fmean(_floats(by_lr[rate], "val_accuracy")),
                                          -float(rate)))  # fmt: skip
        members = by_lr[lr]
        accs = _floats(members, "test_accuracy")
        mean, low, high = t_interval(accs)
        longs = [v for v in _floats(members, "long_accuracy") if not math.isnan(v)]
        long_mean, long_low, long_high = t_interval(longs) if longs else (math.nan,) * 3
        flat = []
        for r in members:
            curve = [float(v) for v in r["curve"].split()]
            quarter = curve[-max(2, len(curve) // 4)]
            flat.append(float(r["test_accuracy"]) >= 0.99 or curve[-1] > 0.9 * quarter)
        summary.append(
            dict(zip(GROUP_COLUMNS, key, strict=True)) | dict(
                lr=lr, lrs=" ".join(sorted(by_lr, key=float)), seeds=len(members),
                acc_mean=mean, acc_low=low, acc_high=high,
                acc_std=statistics.stdev(accs) if len(accs) > 1 else 0.0,
                val_mean=statistics.fmean(_floats(members, "val_accuracy")),
                long_mean=long_mean, long_low=long_low, long_high=long_high,
                loss_mean=statistics.fmean(_floats(members, "test_loss")),
                parameters=int(members[0]["parameters"]),
                ms_per_step=statistics.fmean(_floats(members, "ms_per_step")),
                flat=sum(flat) / len(flat),
            )
        )  # fmt: skip
    return summary


def find(summary: Sequence[dict[str, object]], **where: object) -> dict[str, object]:
    """The one group of ``summary`` whose fields equal ``where`` (values compared as text).

    Raises
    ------
    KeyError
        If no group or more than one matches.
    """
    hits = [s for s in summary if all(str(s[k]) == str(v) for k, v in where.items())]
    if len(hits) != 1:
        raise KeyError(f"{len(hits)} groups match {where}")
    return hits[0]
