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


def _count_judge(got, case: Case) -> None:
    value = as_array(got, case.on)
    if value.shape != () or value != case.expected:
        shown = value.tolist() if value.size < 10 else f"an array of shape {value.shape}"
        raise ExerciseFailure(
            f"{case.on}: GeneralizedAttention has {case.expected} trainable parameters, your "
            f"formula gives {shown}"
        )


@exercise(
    "10.2", answer="gam_parameter_count",
    passed="your formula matches the parameter count of GeneralizedAttention on 12 random cases.",
)
def _gam_parameter_count(rng: np.random.Generator) -> Iterator[Case]:
    """``answer(d, h, n_brains, degree)``: trainable scalars of ``GeneralizedAttention``."""
    from attnlab.nn import GeneralizedAttention

    for _ in range(12):
        h = int(rng.integers(1, 5))
        d = h * int(rng.integers(1, 6))
        n_brains = int(rng.integers(1, 4))
        degree = None if rng.random() < 0.5 else int(rng.integers(1, 4))
        module = GeneralizedAttention(
            d, h, n_brains, f="power" if degree is None else "poly", degree=degree
        )
        expected = sum(p.numel() for p in module.parameters() if p.requires_grad)
        yield Case(
            (d, h, n_brains, degree),
            int(expected),
            on=f"d={d}, h={h}, n_brains={n_brains}, degree={degree}",
            judge=_count_judge,
        )
