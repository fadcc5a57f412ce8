"""Statistics of the study: t quantiles, intervals, the validation-only choice of the rate."""

from __future__ import annotations

import math

import pytest

from attnlab.study.stats import (
    T_975,
    excludes_zero,
    find,
    paired_interval,
    separated,
    summarize,
    t_interval,
)


def _t_cdf(x: float, df: int, steps: int = 20000) -> float:
    """Student t CDF by Simpson's rule on its density (an independent float64 reference)."""
    c = math.gamma((df + 1) / 2) / (math.sqrt(df * math.pi) * math.gamma(df / 2))
    h = x / steps
    total = 0.0
    for i in range(steps + 1):
        t = i * h
        weight = 1 if i in (0, steps) else (4 if i % 2 else 2)
        total += weight * c * (1 + t * t / df) ** (-(df + 1) / 2)
    return 0.5 + total * h / 3


@pytest.mark.parametrize("df", [1, 2, 4, 9, 30])
def test_t_table_against_the_integrated_density(df):
    assert _t_cdf(T_975[df - 1], df) == pytest.approx(0.975, abs=2e-5)


def test_t_interval_by_hand():
    values = [0.5, 0.7, 0.6, 0.6, 0.6]  # mean 0.6, s = sqrt(0.02 / 4)
    mean, low, high = t_interval(values)
    half = 2.776 * math.sqrt(0.005) / math.sqrt(5)
    assert (mean, low, high) == pytest.approx((0.6, 0.6 - half, 0.6 + half))
    assert t_interval([1.0, 1.0, 1.0]) == (1.0, 1.0, 1.0)
    mean, low, high = t_interval([0.4])
    assert mean == 0.4 and math.isnan(low) and math.isnan(high)
    with pytest.raises(ValueError, match="t_interval needs"):
        t_interval([])


def test_separated_only_without_overlap():
    assert separated((0.1, 0.2), (0.3, 0.4)) and separated((0.3, 0.4), (0.1, 0.2))
    assert not separated((0.1, 0.35), (0.3, 0.4))
    assert not separated((math.nan, math.nan), (0.3, 0.4))


def _row(lr, seed, val, test, **extra):
    row = dict(task="gapped", attention="sdpa", positions="rel", embedding="-", steps="10",
               batch_size="8", d="32", h="2", layers="1", long_n="0", lr=str(lr), seed=str(seed),
               val_accuracy=str(val), test_accuracy=str(test), test_loss="0.5",
               long_accuracy="nan", parameters="100", ms_per_step="1.0",
               curve="2.0 1.0 0.5 0.48")  # fmt: skip
    return row | extra


def test_the_rate_is_chosen_on_validation_never_on_test():
    # Rate 0.01 has the better validation accuracy, rate 0.001 the better *test* accuracy:
    # the summary must report 0.01, whose test accuracy is worse.
    rows = [_row(0.01, s, 0.9, 0.5) for s in range(5)] + [
        _row(0.001, s, 0.6, 0.99) for s in range(5)
    ]
    (s,) = summarize(rows)
    assert s["lr"] == "0.01" and s["lrs"] == "0.001 0.01" and s["seeds"] == 5
    assert s["acc_mean"] == pytest.approx(0.5) and s["val_mean"] == pytest.approx(0.9)


def test_summary_groups_interval_and_flatness():
    rows = [_row(0.003, s, 0.5, a) for s, a in enumerate((0.5, 0.7, 0.6, 0.6, 0.6))]
    rows.append(_row(0.003, 0, 1.0, 1.0, attention="luong", curve="2 1 0.1 0.01"))
    summary = summarize(rows)
    sdpa = find(summary, attention="sdpa")
    assert (sdpa["acc_low"], sdpa["acc_high"]) == pytest.approx(
        t_interval([0.5, 0.7, 0.6, 0.6, 0.6])[1:]
    )
    assert sdpa["flat"] == 1.0  # 0.48 > 0.9 * 0.5: flattened
    assert find(summary, attention="luong")["flat"] == 1.0  # solved (test accuracy 1.0)
    assert math.isnan(sdpa["long_mean"])
    with pytest.raises(KeyError):
        find(summary, attention="gam-p1")
    unsolved = summarize([_row(0.003, 0, 0.5, 0.5, curve="2 1 0.5 0.2")])
    assert unsolved[0]["flat"] == 0.0  # still falling: 0.2 < 0.9 * 0.5


def test_paired_interval_by_hand():
    """Differences 0.02, 0.03, 0.01: mean 0.02, s = 0.01, half = 4.303 * 0.01 / sqrt(3)."""
    a, b = {2: 0.85, 0: 0.90, 1: 0.80}, {0: 0.88, 1: 0.77, 2: 0.84}  # seed order does not matter
    half = 4.303 * 0.01 / math.sqrt(3)
    assert paired_interval(a, b) == pytest.approx((0.02, 0.02 - half, 0.02 + half))
    assert not excludes_zero(paired_interval(a, b)[1:])  # -0.0048 < 0 < 0.0448
    # Five seeds, every difference in (0.01, 0.03): separated although the two unpaired
    # intervals overlap (the seed spread is shared, the pairing removes it).
    a = {0: 0.50, 1: 0.70, 2: 0.60, 3: 0.65, 4: 0.55}
    b = {s: v - d for (s, v), d in zip(a.items(), (0.02, 0.01, 0.03, 0.02, 0.02), strict=True)}
    mean, low, high = paired_interval(a, b)
    assert mean == pytest.approx(0.02) and excludes_zero((low, high)) and low > 0
    assert not separated(t_interval(list(a.values()))[1:], t_interval(list(b.values()))[1:])
    assert paired_interval(b, a) == pytest.approx((-mean, -high, -low))  # antisymmetric


def test_paired_interval_ties_and_bad_seeds():
    same = {0: 1.0, 1: 1.0, 2: 1.0}
    assert paired_interval(same, same) == (0.0, 0.0, 0.0)
    assert not excludes_zero((0.0, 0.0))  # a zero-width interval at 0 is not separated
    assert excludes_zero((0.01, 0.01)) and excludes_zero((-0.3, -0.2))
    assert not excludes_zero((math.nan, 0.5)) and not excludes_zero((-0.1, 0.0))
    with pytest.raises(ValueError, match="same seeds"):
        paired_interval({0: 0.1, 1: 0.2}, {0: 0.1, 2: 0.2})
    with pytest.raises(ValueError, match="at least 2 seeds"):
        paired_interval({0: 0.1}, {0: 0.2})
