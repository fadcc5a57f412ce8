"""Checks for the exercises of chapter 10 (the study: GAM against standard attention)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from attnlab.course.spec import Case, ExerciseFailure, as_array, exercise

#: What hands the paired interval over: the study's own functions, and scipy's t (skipped
#: where scipy is not installed, :data:`attnlab.course.forbid.OPTIONAL_PACKAGES`).
INTERVAL_FORBID = (
    "attnlab.study.stats.paired_interval",
    "attnlab.study.stats.t_interval",
    "scipy.stats.t.ppf",
    "scipy.stats.t.isf",
    "scipy.stats.t.interval",
    "scipy.stats.ttest_rel",
)

#: Relative tolerance on the half-width of 10.1's interval: a quantile read from a printed
#: three-decimal table (``attnlab.study.stats.T_975``) is off by at most 2e-4 of itself.
HALF_RTOL = 1e-3


def _t_cdf_central(t: float, df: int) -> float:
    """``P(|T| < t)`` for Student's t with an integer ``df >= 1``, in closed form.

    With ``theta = atan(t / sqrt(df))``: for odd ``df``,
    ``(2 / pi) (theta + sin theta cos theta (1 + 2/3 cos^2 + 2 4/(3 5) cos^4 + ...))``, the
    sum running to ``cos^(df-3)``; for even ``df``,
    ``sin theta (1 + 1/2 cos^2 + 1 3/(2 4) cos^4 + ...)`` to ``cos^(df-2)``.
    """
    theta = np.arctan(t / np.sqrt(df))
    c2 = np.cos(theta) ** 2
    if df % 2:
        total, term = 1.0, 1.0
        for j in range(1, (df - 1) // 2):  # (df - 3) / 2 terms after the leading 1
            term *= c2 * (2 * j) / (2 * j + 1)
            total += term
        tail = np.sin(theta) * np.cos(theta) * total if df > 1 else 0.0
        return float(2 / np.pi * (theta + tail))
    total, term = 1.0, 1.0
    for j in range(1, df // 2):  # (df - 2) / 2 terms after the leading 1
        term *= c2 * (2 * j - 1) / (2 * j)
        total += term
    return float(np.sin(theta) * total)


def t_975(df: int) -> float:
    """The two-sided 95 % quantile ``t_{0.975, df}`` of Student's t, by bisection on the
    closed-form distribution function (float64, to about 1e-12)."""
    low, high = 1.0, 1000.0
    for _ in range(200):
        mid = (low + high) / 2
        low, high = (mid, high) if _t_cdf_central(mid, df) < 0.95 else (low, mid)
    return (low + high) / 2


def _interval(mean: float, half: float) -> np.ndarray:
    return np.array([mean, mean - half, mean + half])


def _interval_mistakes(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    """Half-widths of the usual wrong intervals: message -> the half-width it gives."""
    k = a.size
    diff = a - b
    se = diff.std(ddof=1) / np.sqrt(k)
    return {
        "use Student's t, not the normal quantile 1.96: with few seeds the spread itself is "
        "uncertain, and t_{0.975, n-1} (12.7 for two seeds, 2.78 for five) is wider":
            1.959964 * se,
        "Student's t has n - 1 degrees of freedom (one is spent on the mean), not n: use "
        "t_{0.975, n-1}": t_975(k) * se,
        "the spread of the differences is the sample standard deviation, which divides by "
        "n - 1 (np.std(..., ddof=1)), not by n": t_975(k - 1) * diff.std(ddof=0) / np.sqrt(k),
    }


def _interval_judge(got, case: Case) -> None:
    """The paired interval within ``HALF_RTOL`` of its half-width; a wrong one is named."""
    values = as_array(got, case.on, dtype=np.float64)
    if values.shape != (3,):
        raise ExerciseFailure(f"on {case.on}: return (mean, low, high), got shape {values.shape}")
    expected = case.expected
    half = (expected[2] - expected[1]) / 2
    tol = HALF_RTOL * half + 1e-12
    if np.all(np.abs(values - expected) <= tol):
        return
    shown = np.round(expected, 6).tolist()
    if abs(values[0] - expected[0]) > tol:
        raise ExerciseFailure(
            f"on {case.on}: the centre is the mean of the per-seed differences a_s - b_s, "
            f"expected (mean, low, high) = {shown}, got {np.round(values, 6).tolist()}"
        )
    got_half = (values[2] - values[1]) / 2
    if abs(values[0] - (values[1] + values[2]) / 2) <= tol:  # symmetric: which half-width?
        for message, wrong in case.private["mistakes"].items():
            if abs(got_half - wrong) <= HALF_RTOL * wrong + 1e-12 and abs(wrong - half) > tol:
                raise ExerciseFailure(f"on {case.on}: {message}")
        # unpaired: se = sqrt(s_a^2 / n + s_b^2 / n) times a t quantile whose degrees of
        # freedom lie between Welch's least, n - 1, and the pooled 2n - 2
        unpaired, k = case.private["unpaired_se"], case.private["k"]
        lowest, highest = t_975(2 * k - 2) * unpaired, t_975(k - 1) * unpaired
        if abs(highest - half) > 0.05 * half + tol and (
            lowest * (1 - HALF_RTOL) - 1e-12 <= got_half <= highest * (1 + HALF_RTOL) + 1e-12
        ):
            raise ExerciseFailure(
                f"on {case.on}: the seeds are paired: take the spread of the differences "
                f"D_s = a_s - b_s, not an unpaired (Welch or pooled) interval built from the "
                f"spreads of a and b"
            )
    raise ExerciseFailure(
        f"on {case.on}: expected (mean, low, high) = {shown}, got {np.round(values, 6).tolist()}"
    )


def _interval_case(a, b) -> Case:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    k = a.size
    diff = a - b
    half = t_975(k - 1) * diff.std(ddof=1) / np.sqrt(k)
    unpaired_se = np.sqrt(a.var(ddof=1) / k + b.var(ddof=1) / k)
    on = f"a = {np.round(a, 4).tolist()}, b = {np.round(b, 4).tolist()}"
    private = {"k": k, "mistakes": _interval_mistakes(a, b), "unpaired_se": unpaired_se}
    return Case((a, b), _interval(diff.mean(), half), on=on, judge=_interval_judge,
                private=private)  # fmt: skip


@exercise(
    "10.1", answer="paired_interval", forbid=INTERVAL_FORBID,
    passed="your interval is the paired 95 % t-interval on two to twelve seeds, on 24 cases.",
)
def _paired_interval(rng: np.random.Generator) -> Iterator[Case]:
    """``answer(a, b)``: ``(mean, low, high)`` of ``a - b`` paired by seed, Student t, n - 1."""
    fixed = [
        # two seeds: t_{0.975,1} = 12.7 against t_2 = 4.30, z = 1.96, and ddof 0 (a factor 0.71)
        ([0.90, 0.80], [0.85, 0.78]),
        # five seeds that move together: the unpaired interval is ten times wider
        ([0.60, 0.70, 0.80, 0.90, 0.95], [0.59, 0.68, 0.785, 0.888, 0.932]),
        # GAM against Shaw's perfect seeds (item 3 of section 10.6)
        ([0.974, 0.966, 0.983, 0.971, 0.976], [1.0] * 5),
        # three seeds, signs that change: an interval that holds 0
        ([0.91, 0.88, 0.95], [0.90, 0.90, 0.93]),
        # equal differences: no spread, an interval of width 0
        ([0.75, 0.5, 0.25], [0.5, 0.25, 0.0]),
    ]
    for a, b in fixed:
        yield _interval_case(a, b)
    yield _interval_case(rng.integers(500, 1001, 30) / 1000, rng.integers(500, 1001, 30) / 1000)
    for _ in range(18):
        k = int(rng.integers(2, 13))
        b = rng.integers(500, 1001, size=k) / 1000
        a = np.clip(b + rng.normal(rng.normal(0, 0.02), 0.02, size=k), 0, 1).round(3)
        yield _interval_case(a, b)


#: Two sums that are equal in exact arithmetic count as a tie within this tolerance (10.2).
TIE_TOL = 1e-9


def _patterns(k: int) -> np.ndarray:
    """Every sign pattern of ``k`` seeds, shape ``(2**k, k)``, entries -1 and +1."""
    return 1 - 2 * ((np.arange(2**k)[:, None] >> np.arange(k)) & 1)


def _sign_flip(diff: np.ndarray, *, tol: float = TIE_TOL, strict: bool = False,
               two_sided: bool = True, exclude_observed: bool = False) -> float:
    """The exact sign-flip p-value of paired differences, and the usual mistakes (hints)."""
    sums = _patterns(diff.size) @ diff
    observed = diff.sum()
    if two_sided:
        sums, observed = np.abs(sums), abs(observed)
    hits = sums > observed + tol if strict else sums >= observed - tol
    count = int(hits.sum())
    if exclude_observed:  # "the other patterns": drop the observed one, divide by 2^k - 1
        return (count - 1) / (2**diff.size - 1) if diff.size > 1 else 0.0
    return count / 2**diff.size


def _unpaired(a: np.ndarray, b: np.ndarray) -> float:
    """Exact two-sided p of the *unpaired* permutation test (shuffling a and b together)."""
    from itertools import combinations

    pooled, k = np.concatenate([a, b]), a.size
    observed = abs(a.sum() - b.sum())
    total = pooled.sum()
    splits = [abs(2 * pooled[list(c)].sum() - total) for c in combinations(range(2 * k), k)]
    return float(np.mean(np.array(splits) >= observed - TIE_TOL))


def _paired_case(a: np.ndarray, b: np.ndarray) -> Case:
    diff = a - b
    hints = {
        "the test is two-sided: count patterns with |sum of sigma D| >= |sum of D|, not "
        "sum >= sum": _sign_flip(diff, two_sided=False),
        "count a pattern whose |sum| equals the observed one (>=, not >): the observed "
        "pattern and its negation always count, so p >= 2 / 2^k": _sign_flip(diff, strict=True),
        "compare with the tolerance 1e-9: sums equal in exact arithmetic differ here by "
        "rounding, and such ties must count": _sign_flip(diff, tol=0.0),
        "divide by all 2^k patterns and count the observed one among them":
            _sign_flip(diff, exclude_observed=True),
        "compute in float64 and keep the tolerance at 1e-9: float32 (rounding near 6e-8 at "
        "0.5) or a looser tolerance (1e-6) counts a pattern that falls 2e-8 short of a tie":
            _sign_flip(diff, tol=1e-6),
    }
    if a.size <= 6:
        hints["the seeds are paired: flip the sign of each seed's difference instead of "
              "shuffling the accuracies of a and b together"] = _unpaired(a, b)
    expected = _sign_flip(diff)
    hints = {m: v for m, v in hints.items() if abs(v - expected) > TIE_TOL}
    on = f"a = {_digits(a)}, b = {_digits(b)}"
    return Case((a, b), expected, on=on, hints=hints, atol=TIE_TOL, rtol=0.0)


def _digits(values: np.ndarray) -> str:
    """``values`` to 10 significant digits, so that a near tie (0.50000001) shows as one."""
    return "[" + ", ".join(f"{float(v):.10g}" for v in values) + "]"


def _accuracies(rng: np.random.Generator, k: int, low: int = 500) -> np.ndarray:
    """``k`` test accuracies on 1,000 examples (multiples of 0.001), as a plain float array."""
    return rng.integers(low, 1001, size=k) / 1000


@exercise(
    "10.2", answer="sign_flip_p",
    passed="your p-value is the exact sign-flip p on one to twelve seeds, with ties, near "
    "ties, negative and zero differences, on 31 cases.",
)
def _sign_flip_p(rng: np.random.Generator) -> Iterator[Case]:
    """``answer(a, b)``: two-sided exact sign-flip p-value of the paired ``a - b``."""
    fixed = [
        ([0.97], [1.0]),  # one seed: both patterns tie, p = 1
        ([0.9, 0.8, 0.7], [0.9, 0.8, 0.7]),  # every difference zero: p = 1
        ([0.974, 0.966, 0.983, 0.971, 0.976], [1.0] * 5),  # all negative (GAM vs Shaw)
        ([0.93, 0.95, 0.91, 0.96, 0.94], [0.90, 0.92, 0.90, 0.93, 0.91]),  # all positive
        ([0.6, 0.7], [0.5, 0.65]),  # two seeds, same sign: p = 1/2
        ([0.6, 0.7], [0.7, 0.65]),  # two seeds, opposite signs: p = 1
        ([0.988, 0.913, 0.905], [0.941, 0.908, 0.952]),  # D = .047 .005 -.047: rounding ties
        ([0.2, 0.4, 0.6, 0.8, 0.99], [0.19, 0.39, 0.59, 0.79, 0.98]),  # pairing matters
        # D = .3 .2 1e-8: flipping the last seed gives |sum| 0.5 - 1e-8, 2e-8 short of the
        # observed 0.5 + 1e-8, so p = 2/8; float32 (or a tolerance of 1e-6) ties them: 4/8
        ([0.8, 0.7, 0.5 + 1e-8], [0.5, 0.5, 0.5]),
    ]
    for a, b in fixed:
        yield _paired_case(np.array(a), np.array(b))
    yield _paired_case(_accuracies(rng, 12), _accuracies(rng, 12))  # beyond 8 bits of patterns
    for _ in range(21):
        k = int(rng.integers(1, 11))
        a = _accuracies(rng, k)
        b = np.where(rng.random(k) < 0.3, a, _accuracies(rng, k))  # some ties within a seed
        yield _paired_case(a, b)
