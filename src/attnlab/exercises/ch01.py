"""Checks for the exercises of chapter 01 (local context: convolution)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from attnlab.conv import local_context
from attnlab.exercises._registry import ExerciseFailure, expect_close, register


@register("01.1")
def _moving_average(answer: Callable[[int, int], np.ndarray]) -> str:
    rng = np.random.default_rng()
    for _ in range(10):
        half, d = int(rng.integers(0, 4)), int(rng.integers(1, 5))
        s = int(rng.integers(2 * half + 1, 2 * half + 8))
        kernel = np.asarray(answer(half, d))
        if kernel.shape != (2 * half + 1, d, d):
            raise ExerciseFailure(
                f"for C={half}, d={d} expected a kernel of shape {(2 * half + 1, d, d)}, "
                f"got {kernel.shape}"
            )
        x = rng.normal(size=(s, d))
        window_means = np.array(
            [np.mean([x[(i + j) % s] for j in range(-half, half + 1)], axis=0) for i in range(s)]
        )
        expect_close(
            local_context(x, kernel),
            window_means,
            on=f"a random sequence with s={s}, d={d}, C={half}",
        )
    return "local_context with your kernel averages every window on 10 random sequences."


@register("01.2")
def _compose(answer: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> str:
    rng = np.random.default_rng()
    for _ in range(10):
        c1, c2 = int(rng.integers(0, 3)), int(rng.integers(0, 3))
        d_in, d_mid, d_out = (int(v) for v in rng.integers(1, 4, size=3))
        s = 2 * (c1 + c2) + 1 + int(rng.integers(0, 5))
        k1 = rng.normal(size=(2 * c1 + 1, d_in, d_mid))
        k2 = rng.normal(size=(2 * c2 + 1, d_mid, d_out))
        x = rng.normal(size=(s, d_in))
        composed = np.asarray(answer(k1, k2))
        expected_shape = (2 * (c1 + c2) + 1, d_in, d_out)
        if composed.shape != expected_shape:
            raise ExerciseFailure(
                f"for C1={c1}, C2={c2} expected a kernel of shape {expected_shape}, "
                f"got {composed.shape}"
            )
        expect_close(
            local_context(x, composed),
            local_context(local_context(x, k1), k2),
            on=f"C1={c1}, C2={c2}, s={s}, widths {d_in}->{d_mid}->{d_out}",
        )
    return "one layer with your kernel equals the two-layer stack on 10 random cases."
