"""Checks for the exercises of chapter 09 (positions)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from attnlab.exercises._registry import ExerciseFailure, expect_close, register
from attnlab.positions import circular_offsets, sinusoidal_positions


@register("09.1")
def _shift_matrix(answer: Callable[[int, int], np.ndarray]) -> str:
    rng = np.random.default_rng()
    for _ in range(10):
        d = 2 * int(rng.integers(1, 9))
        k = int(rng.integers(-20, 21))
        m = np.asarray(answer(k, d), dtype=float)
        if m.shape != (d, d):
            raise ExerciseFailure(f"for k={k}, d={d} expected a ({d}, {d}) matrix, got {m.shape}")
        pe = sinusoidal_positions(80, d)
        rows = np.arange(max(0, -k), 80 - max(0, k))  # every p with p and p + k in the table
        expect_close(pe[rows] @ m, pe[rows + k], on=f"k={k}, d={d}, positions {rows[0]}..")
    return "PE[p] @ M_k equals PE[p + k] for every tested p, on 10 random (k, d)."


@register("09.2")
def _shaw_logits(answer: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]) -> str:
    rng = np.random.default_rng()
    for _ in range(10):
        s, d_k, clip = int(rng.integers(1, 9)), int(rng.integers(1, 5)), int(rng.integers(0, 4))
        q, k = rng.normal(size=(s, d_k)), rng.normal(size=(s, d_k))
        a_k = rng.normal(size=(2 * clip + 1, d_k))
        expected = np.empty((s, s))
        for i in range(s):
            for j in range(s):
                row = min(max(j - i, -clip), clip) + clip
                expected[i, j] = q[i] @ (k[j] + a_k[row]) / np.sqrt(d_k)
        expect_close(answer(q, k, a_k), expected, on=f"s={s}, d_k={d_k}, k_max={clip}")
    return "your logits equal Shaw et al.'s e_ij on 10 random cases."


@register("09.3")
def _quadratic_logits(answer: Callable[[int, int, float], np.ndarray]) -> str:
    rng = np.random.default_rng()
    for _ in range(10):
        s = int(rng.integers(1, 12))
        offset = int(rng.integers(-((s - 1) // 2), (s - 1) // 2 + 1))
        alpha = float(rng.uniform(0.1, 20.0))
        expected = -alpha * (circular_offsets(s) - offset).astype(float) ** 2
        got = np.asarray(answer(s, offset, alpha))
        expect_close(got, expected, on=f"s={s}, offset={offset}, alpha={alpha:.3f}")
        if not np.all(np.argmax(got, axis=1) == (np.arange(s) + offset) % s):
            raise ExerciseFailure(f"s={s}, offset={offset}: the largest logit is not the target")
    return "your logits match -alpha (o - offset)^2 with circular offset o on 10 random cases."
