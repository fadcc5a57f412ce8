"""Checks for the exercises of chapter 10 (the study: GAM against standard attention)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from attnlab.course.spec import Case, ExerciseFailure, as_array, exercise


def _task_judge(got, case: Case) -> None:
    num, n, vocab, seed, _ = case.args
    on = f"num={num}, n={n}, vocab={vocab}, seed={seed}"
    if not isinstance(got, dict):
        raise ExerciseFailure(f"for {on}: expected a task with inputs and targets")
    inputs, targets = got["inputs"], got["targets"]
    if not isinstance(inputs, np.ndarray) or not isinstance(targets, np.ndarray):
        raise ExerciseFailure(f"for {on}: inputs and targets must be arrays")
    if inputs.shape != (num, n) or targets.shape != (num, n):
        raise ExerciseFailure(
            f"inputs and targets must have shape {(num, n)} for {on}, got "
            f"{inputs.shape} and {targets.shape}"
        )
    if inputs.dtype.kind not in "iu" or targets.dtype.kind not in "iu":
        raise ExerciseFailure(f"token ids must be integers, got {inputs.dtype}, {targets.dtype}")
    if inputs.min() < 0 or inputs.max() >= vocab:
        raise ExerciseFailure(f"input ids must lie in [0, {vocab}) for {on}")
    wrong = np.argwhere(targets != inputs[:, :1])
    if len(wrong):
        row, i = (int(v) for v in wrong[0])
        raise ExerciseFailure(
            f"for {on}, example {row}: label {i} is {targets[row, i]}, but the first token is "
            f"{inputs[row, 0]}"
        )
    if got["name"] != "first":
        raise ExerciseFailure(f'the task must be named "first", got {got["name"]}')
    unset = list(got["unset"])
    for field in ("positions", "span"):
        if field not in unset:
            raise ExerciseFailure(f"{field} must stay None: this task has no corpus positions")
    vocabs = as_array(got["vocab"], on, dtype=np.float64)
    if vocabs.shape != (2,) or tuple(vocabs) != (vocab, vocab):
        raise ExerciseFailure(f"vocab_in and vocab_out must both be {vocab}, got {vocabs}")
    again = got["again_inputs"]
    if not isinstance(again, np.ndarray) or not np.array_equal(again, inputs):
        raise ExerciseFailure(f"the same seed must give the same data ({on})")
    if case.private:  # the big case: seeds matter, tokens are uniform
        if np.array_equal(got["other_inputs"], inputs):
            raise ExerciseFailure("seeds 1 and 2 gave identical data: is the seed used?")
        counts = np.bincount(inputs.ravel(), minlength=vocab) / inputs.size
        if np.abs(counts - 1 / vocab).max() > 0.05:
            raise ExerciseFailure(
                f"tokens should be uniform over the vocabulary, got {counts.round(3)}"
            )


@exercise(
    "10.1", answer="first_token_task",
    passed="labels equal the first token, ids in range, seeded, uniform, on 10 random cases.",
    adapter="task",
)
def _first_token_task(rng: np.random.Generator) -> Iterator[Case]:
    """``answer(num, n, vocab, seed)``: inputs uniform in [0, vocab), every label = x_0."""
    for _ in range(10):
        num, n, vocab = int(rng.integers(1, 40)), int(rng.integers(1, 12)), int(rng.integers(2, 9))
        seed = int(rng.integers(0, 2**31))
        yield Case((num, n, vocab, seed, seed + 1), None, on="", judge=_task_judge)
    yield Case((200, 8, 5, 1, 2), None, on="", judge=_task_judge, private=True)


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
    }
    if a.size <= 6:
        hints["the seeds are paired: flip the sign of each seed's difference instead of "
              "shuffling the accuracies of a and b together"] = _unpaired(a, b)
    expected = _sign_flip(diff)
    hints = {m: v for m, v in hints.items() if abs(v - expected) > TIE_TOL}
    on = f"a = {np.round(a, 3).tolist()}, b = {np.round(b, 3).tolist()}"
    return Case((a, b), expected, on=on, hints=hints, atol=TIE_TOL, rtol=0.0)


def _accuracies(rng: np.random.Generator, k: int, low: int = 500) -> np.ndarray:
    """``k`` test accuracies on 1,000 examples (multiples of 0.001), as a plain float array."""
    return rng.integers(low, 1001, size=k) / 1000


@exercise(
    "10.2", answer="sign_flip_p",
    passed="your p-value is the exact sign-flip p on one to twelve seeds, with ties, "
    "negative and zero differences, on 30 cases.",
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
    ]
    for a, b in fixed:
        yield _paired_case(np.array(a), np.array(b))
    yield _paired_case(_accuracies(rng, 12), _accuracies(rng, 12))  # beyond 8 bits of patterns
    for _ in range(21):
        k = int(rng.integers(1, 11))
        a = _accuracies(rng, k)
        b = np.where(rng.random(k) < 0.3, a, _accuracies(rng, k))  # some ties within a seed
        yield _paired_case(a, b)
