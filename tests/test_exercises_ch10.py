"""Exercises 10.1 (the paired t-interval) and 10.2 (an exact paired sign-flip test) pass honest
answers and no partly right one.

The honest answers here are written independently of the check's reference (10.1: a float64
formula with t quantiles from a printed table; 10.2: a loop over ``itertools.product`` and a
recursive enumeration); each wrong answer is right on some inputs, and the check must fail it
on every draw of its random cases (the cases that separate it are fixed, not drawn).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from attnlab.course.check import run_spec
from attnlab.course.spec import get_spec
from attnlab.exercises import exercise_ids


def _verdict(answer, exercise_id="10.2"):
    exercise_ids()
    return run_spec(get_spec(exercise_id), answer)


def loop_p(a, b, tol=1e-9):
    """The exact two-sided sign-flip p-value, by a plain loop over every sign pattern."""
    diff = [float(x) - float(y) for x, y in zip(a, b, strict=True)]
    observed = abs(sum(diff))
    hits = 0
    for signs in itertools.product((1, -1), repeat=len(diff)):
        hits += abs(sum(s * x for s, x in zip(signs, diff, strict=True))) >= observed - tol
    return hits / 2 ** len(diff)


def recursive_p(a, b):
    """The same p-value by recursion over the seeds (another independent answer)."""
    diff = np.subtract(a, b, dtype=float)
    observed = abs(diff.sum())

    def count(i, total):
        if i == len(diff):
            return int(abs(total) >= observed - 1e-9)
        return count(i + 1, total + diff[i]) + count(i + 1, total - diff[i])

    return count(0, 0.0) / 2 ** len(diff)


def _numpy_p(a, b, *, compare=lambda sums, obs: sums >= obs - 1e-9, absolute=True):
    diff = np.subtract(a, b, dtype=float)
    signs = np.array(list(itertools.product((1, -1), repeat=diff.size)))
    sums, obs = signs @ diff, diff.sum()
    if absolute:
        sums, obs = np.abs(sums), abs(obs)
    return float(np.mean(compare(sums, obs)))


def test_hand_values_of_the_independent_answer():
    """Worked by hand: one seed p = 1; five seeds all one sign p = 2/32; two seeds of one
    sign p = 1/2; a tie that rounding breaks still counts."""
    assert loop_p([0.97], [1.0]) == 1.0
    assert loop_p([0.9] * 5, [1.0] * 5) == 2 / 32
    assert loop_p([0.6, 0.7], [0.5, 0.65]) == 0.5
    assert loop_p([0.6, 0.7], [0.7, 0.65]) == 1.0
    assert loop_p([0.988, 0.913, 0.905], [0.941, 0.908, 0.952]) == 1.0  # D = .047 .005 -.047
    assert loop_p([0.988, 0.913, 0.905], [0.941, 0.908, 0.952], tol=0.0) == 0.75  # rounding


@pytest.mark.parametrize("answer", [loop_p, recursive_p, _numpy_p])
def test_honest_answers_pass(answer):
    for _ in range(3):  # fresh random cases each time
        ok, message = _verdict(answer)
        assert ok, message


def test_answers_that_return_lists_or_numpy_scalars_pass():
    assert _verdict(lambda a, b: np.float64(loop_p(a, b)))[0]


WRONG = {
    "one-sided": (lambda a, b: _numpy_p(a, b, absolute=False), "two-sided"),
    "strict >": (lambda a, b: _numpy_p(a, b, compare=lambda s, o: s > o), ">=, not >"),
    "no tolerance": (lambda a, b: _numpy_p(a, b, compare=lambda s, o: s >= o), "tolerance"),
    "excludes the observed pattern": (
        lambda a, b: (loop_p(a, b) * 2 ** len(a) - 1) / max(2 ** len(a) - 1, 1),
        "count the observed one",
    ),
    "unpaired permutation": (None, "paired"),
    # float32 rounding at 0.5 is 6e-8: a pattern 2e-8 short of a tie counts as one
    "float32": (lambda a, b: _numpy_p(np.float32(a), np.float32(b), compare=lambda s, o:
                                      s >= o - np.float32(1e-9)), "float64"),
    "tolerance 1e-6": (lambda a, b: _numpy_p(a, b, compare=lambda s, o: s >= o - 1e-6),
                       "tolerance at 1e-9"),
}


def _unpaired_p(a, b):
    pooled = np.concatenate([a, b]).astype(float)
    k, total = len(a), pooled.sum()
    observed = abs(np.sum(a) - np.sum(b))
    splits = [abs(2 * pooled[list(c)].sum() - total)
              for c in itertools.combinations(range(2 * k), k)]  # fmt: skip
    return float(np.mean(np.array(splits) >= observed - 1e-9))


WRONG["unpaired permutation"] = (_unpaired_p, "paired")


@pytest.mark.parametrize("name", list(WRONG))
def test_partly_right_answers_fail_with_their_mistake_named(name):
    answer, phrase = WRONG[name]
    for _ in range(3):
        ok, message = _verdict(answer)
        assert not ok, f"{name} passed"
        assert phrase in message, (name, message)


def test_answers_right_only_on_some_boundary_fail():
    """Each is right on most inputs; a fixed case of the check separates it."""
    partial = {
        # patterns from 8-bit integers: right up to 8 seeds, wrong (or failing) beyond
        "at most 8 seeds": lambda a, b: loop_p(a, b) if len(a) <= 8 else 0.5,
        # a one-seed shortcut that forgets that both patterns tie
        "one seed": lambda a, b: 0.5 if len(a) == 1 else loop_p(a, b),
        # a Student t approximation instead of the exact count
        "normal approximation": lambda a, b: math.erfc(
            abs(np.mean(np.subtract(a, b))) / (np.std(np.subtract(a, b), ddof=1) /
                                             math.sqrt(len(a)) + 1e-12) / math.sqrt(2)
        ) if len(a) > 1 else 1.0,
        # a Monte Carlo estimate of the p-value
        "sampled patterns": lambda a, b: float(np.mean(
            np.abs(np.random.default_rng(0).choice([-1, 1], size=(4000, len(a)))
                   @ np.subtract(a, b)) >= abs(np.sum(np.subtract(a, b))) - 1e-9)),
    }  # fmt: skip
    for name, answer in partial.items():
        ok, message = _verdict(answer)
        assert not ok, f"{name} passed"


def test_the_check_hands_copies_and_refuses_arrays_of_the_wrong_shape():
    def mutating(a, b):
        p = loop_p(a, b)
        a[:] = 0  # spoils its own copies only: the references were computed before
        b[:] = 0
        return p

    ok, message = _verdict(mutating)
    assert ok, message
    ok, message = _verdict(lambda a, b: np.array([loop_p(a, b)]))
    assert not ok and "shape" in message


def test_the_near_tie_separates_float32_by_hand():
    """D = .3 .2 1e-8: in float64 two of eight patterns reach |sum| = 0.5 + 1e-8 (p = 1/4);
    in float32 the last difference rounds to 0 and four patterns tie (p = 1/2)."""
    a, b = [0.8, 0.7, 0.5 + 1e-8], [0.5, 0.5, 0.5]
    assert loop_p(a, b) == 0.25 and recursive_p(a, b) == 0.25
    assert _numpy_p(np.float32(a), np.float32(b)) == 0.5
    assert loop_p(a, b, tol=1e-6) == 0.5


# ---------------------------------------------------------------------------------------------
# Exercise 10.1: the paired 95 % t-interval.

#: t_{0.975, df} for df = 1 ... 12, to 9 digits, from a printed table of Student's t.
T_PRINTED = {1: 12.706204736, 2: 4.302652730, 3: 3.182446305, 4: 2.776445105, 5: 2.570581836,
             6: 2.446911851, 7: 2.364624252, 8: 2.306004135, 9: 2.262157163, 10: 2.228138852,
             11: 2.200985160, 12: 2.178812830}  # fmt: skip
#: t_{0.975, df} for df = 13 ... 30 to 3 decimals (the check draws one case of 30 seeds).
T_PRINTED |= dict(zip(range(13, 31), (2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
                                      2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
                                      2.045, 2.042), strict=True))  # fmt: skip


def table_interval(a, b, quantile=T_PRINTED.get):
    """Mean of D_s = a_s - b_s, +- t_{0.975, n-1} s_D / sqrt(n): plain Python floats."""
    diff = [float(x) - float(y) for x, y in zip(a, b, strict=True)]
    n = len(diff)
    mean = sum(diff) / n
    s_d = math.sqrt(sum((x - mean) ** 2 for x in diff) / (n - 1))
    half = quantile(n - 1) * s_d / math.sqrt(n)
    return mean, mean - half, mean + half


def test_the_check_s_quantiles_are_the_printed_table_s():
    from attnlab.exercises.ch10 import t_975

    for df in range(1, 13):
        assert abs(t_975(df) - T_PRINTED[df]) < 1e-8, df
    for df in range(13, 31):
        assert abs(t_975(df) - T_PRINTED[df]) < 5e-4, df


def test_the_interval_by_hand():
    """a - b = (0.05, 0.02): mean 0.035, s_D = 0.03 / sqrt 2, half = 12.7062 * 0.015."""
    mean, low, high = table_interval([0.90, 0.80], [0.85, 0.78])
    assert math.isclose(mean, 0.035) and math.isclose(high - mean, 12.706204736 * 0.015)


def test_honest_interval_answers_pass():
    from attnlab.study.stats import T_975

    three_decimals = lambda a, b: table_interval(a, b, lambda df: T_975[df - 1])  # noqa: E731

    def numpy_answer(a, b):
        diff = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
        half = T_PRINTED[diff.size - 1] * diff.std(ddof=1) / np.sqrt(diff.size)
        return np.array([diff.mean(), diff.mean() - half, diff.mean() + half])

    for answer in (table_interval, three_decimals, numpy_answer):
        for _ in range(3):  # fresh random cases each time
            ok, message = _verdict(answer, "10.1")
            assert ok, message


def _welch(a, b, pooled=False):
    """The unpaired interval of mean(a) - mean(b): Welch (df rounded down) or pooled."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    n = a.size
    va, vb = a.var(ddof=1) / n, b.var(ddof=1) / n
    se = math.sqrt(va + vb)
    if pooled:
        df = 2 * n - 2
    else:
        df = (va + vb) ** 2 / ((va**2 + vb**2) / (n - 1)) if va + vb > 0 else n - 1
    t = T_PRINTED[min(30, max(1, math.floor(df)))]
    mean = a.mean() - b.mean()
    return mean, mean - t * se, mean + t * se


def _scaled(factor_of_n):
    """The paired interval with its half-width rescaled by factor_of_n(n)."""

    def answer(a, b):
        mean, low, _ = table_interval(a, b)
        half = (mean - low) * factor_of_n(len(a))
        return mean, mean - half, mean + half

    return answer


WRONG_INTERVALS = {
    "z, not t": (_scaled(lambda n: 1.96 / T_PRINTED[n - 1]), "1.96"),
    "df = n": (_scaled(lambda n: T_PRINTED[min(n, 30)] / T_PRINTED[n - 1]), "n - 1 degrees"),
    "std divides by n": (_scaled(lambda n: math.sqrt((n - 1) / n)), "ddof=1"),
    "Welch": (_welch, "paired"),
    "pooled": (lambda a, b: _welch(a, b, pooled=True), "paired"),
    "one-sided 95 %": (_scaled(lambda n: 0.8), "expected (mean, low, high)"),
    "mean of a only": (lambda a, b: table_interval(a, np.zeros(len(b))), "centre"),
}


@pytest.mark.parametrize("name", list(WRONG_INTERVALS))
def test_partly_right_intervals_fail_with_their_mistake_named(name):
    from _partly_right import always_fails

    answer, phrase = WRONG_INTERVALS[name]
    always_fails("10.1", answer, phrase)


def test_the_separating_cases_are_fixed_not_drawn():
    """Each partly right answer fails a case of every draw, at the same (fixed) case."""
    from _partly_right import first_failure

    for name, (answer, _) in WRONG_INTERVALS.items():
        messages = {first_failure("10.1", answer, seed).split(":")[0] for seed in range(6)}
        assert len(messages) == 1, (name, messages)  # the same first case on every draw


def test_the_library_s_interval_is_refused():
    from _partly_right import refused_loophole

    from attnlab.study.stats import paired_interval, t_interval

    def via_paired(a, b):
        return paired_interval(dict(enumerate(a)), dict(enumerate(b)))

    def via_t(a, b):
        return t_interval(list(np.subtract(a, b)))

    refused_loophole("10.1", via_paired, "attnlab.study.stats.paired_interval")
    refused_loophole("10.1", via_t, "attnlab.study.stats.t_interval")


def test_an_interval_of_the_wrong_shape_is_refused():
    ok, message = _verdict(lambda a, b: table_interval(a, b)[1:], "10.1")
    assert not ok and "(mean, low, high)" in message


def test_the_near_tie_case_is_shown_with_its_perturbation():
    """The reader's point: a float32 answer was told of a pattern "2e-8 short of a tie" on a
    case printed as a = [0.8, 0.7, 0.5], an exact tie to the eye; the case now shows 0.50000001."""
    ok, message = _verdict(WRONG["float32"][0])
    assert not ok and "2e-8 short of a tie" in message, message
    assert "0.50000001" in message, message
    assert "a = [0.8, 0.7, 0.5]," not in message, message
