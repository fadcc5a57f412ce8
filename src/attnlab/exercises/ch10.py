"""Checks for the exercises of chapter 10 (the study: GAM against standard attention)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from attnlab.exercises._registry import ExerciseFailure, register


@register("10.1")
def _first_token_task(answer: Callable[..., Any]) -> str:
    """``answer(num, n, vocab, seed)``: inputs uniform in [0, vocab), every label = x_0."""
    rng = np.random.default_rng()
    for _ in range(10):
        num, n, vocab = int(rng.integers(1, 40)), int(rng.integers(1, 12)), int(rng.integers(2, 9))
        seed = int(rng.integers(0, 2**31))
        on = f"num={num}, n={n}, vocab={vocab}, seed={seed}"
        task = answer(num, n, vocab, seed)
        inputs, targets = np.asarray(task.inputs), np.asarray(task.targets)
        if inputs.shape != (num, n) or targets.shape != (num, n):
            raise ExerciseFailure(
                f"inputs and targets must have shape {(num, n)} for {on}, got "
                f"{inputs.shape} and {targets.shape}"
            )
        if not (
            np.issubdtype(inputs.dtype, np.integer) and np.issubdtype(targets.dtype, np.integer)
        ):
            raise ExerciseFailure(
                f"token ids must be integers, got {inputs.dtype}, {targets.dtype}"
            )
        if inputs.min() < 0 or inputs.max() >= vocab:
            raise ExerciseFailure(f"input ids must lie in [0, {vocab}) for {on}")
        for row in range(num):
            for i in range(n):
                if targets[row, i] != inputs[row, 0]:
                    raise ExerciseFailure(
                        f"for {on}, example {row}: label {i} is {targets[row, i]}, but the "
                        f"first token is {inputs[row, 0]}"
                    )
        if (int(task.vocab_in), int(task.vocab_out)) != (vocab, vocab):
            raise ExerciseFailure(
                f"vocab_in and vocab_out must both be {vocab}, got {task.vocab_in}, "
                f"{task.vocab_out}"
            )
        again = answer(num, n, vocab, seed)
        if not np.array_equal(np.asarray(again.inputs), inputs):
            raise ExerciseFailure(f"the same seed must give the same data ({on})")
    big = [np.asarray(answer(200, 8, 5, s).inputs) for s in (1, 2)]
    if np.array_equal(big[0], big[1]):
        raise ExerciseFailure("seeds 1 and 2 gave identical data: is the seed used?")
    counts = np.bincount(big[0].ravel(), minlength=5) / big[0].size
    if np.abs(counts - 0.2).max() > 0.05:
        raise ExerciseFailure(
            f"tokens should be uniform over the vocabulary, got {counts.round(3)}"
        )
    return "labels equal the first token, ids in range, seeded, uniform, on 10 random cases."


@register("10.2")
def _gam_parameter_count(answer: Callable[..., int]) -> str:
    """``answer(d, h, n_brains, degree)``: trainable scalars of ``GeneralizedAttention``."""
    from attnlab.nn import GeneralizedAttention

    rng = np.random.default_rng()
    for _ in range(12):
        h = int(rng.integers(1, 5))
        d = h * int(rng.integers(1, 6))
        n_brains = int(rng.integers(1, 4))
        degree = None if rng.random() < 0.5 else int(rng.integers(1, 4))
        module = GeneralizedAttention(
            d, h, n_brains, f="power" if degree is None else "poly", degree=degree
        )
        expected = sum(p.numel() for p in module.parameters() if p.requires_grad)
        got = answer(d, h, n_brains, degree)
        if got != expected:
            raise ExerciseFailure(
                f"d={d}, h={h}, n_brains={n_brains}, degree={degree}: GeneralizedAttention has "
                f"{expected} trainable parameters, your formula gives {got}"
            )
    return "your formula matches the parameter count of GeneralizedAttention on 12 random cases."
