"""Checks for the exercises of chapter 03 (self-attention)."""

from __future__ import annotations

import numpy as np

from attnlab.exercises._registry import ExerciseFailure, expect_close, register


def _expect_mask(got, expected: np.ndarray, on: str) -> None:
    got = np.asarray(got)
    if got.dtype != np.bool_:
        raise ExerciseFailure(f"on {on}: a mask must be boolean, got dtype {got.dtype}")
    if got.shape != expected.shape:
        raise ExerciseFailure(f"on {on}: expected shape {expected.shape}, got {got.shape}")
    wrong = np.argwhere(got != expected)
    if len(wrong):
        where = tuple(int(i) for i in wrong[0])
        raise ExerciseFailure(
            f"on {on}: at index {where} expected {bool(expected[where])} (True = may attend), "
            f"got {bool(got[where])}"
        )


@register("03.2")
def _causal_mask(answer) -> str:
    """``causal_mask(s)``: query ``i`` may attend to keys ``j <= i``."""
    rng = np.random.default_rng()
    for s in [1, 2, *(int(n) for n in rng.integers(3, 12, size=5))]:
        i, j = np.indices((s, s))
        _expect_mask(answer(s), i >= j, on=f"s={s}")
    return "correct for s = 1, 2 and 5 random lengths"


@register("03.3")
def _padding_mask(answer) -> str:
    """``padding_mask(lengths, s)``: item ``b`` may attend to its first ``lengths[b]`` keys."""
    rng = np.random.default_rng()
    for case in range(10):
        s = int(rng.integers(1, 9))
        lengths = rng.integers(0, s + 1, size=int(rng.integers(1, 5)))
        expected = (np.arange(s)[None, :] < lengths[:, None])[:, None, :]
        _expect_mask(
            answer(lengths, s), expected, on=f"case {case}: lengths={lengths.tolist()}, s={s}"
        )
    return "correct (shape (b, 1, s), broadcasting over the queries) on 10 random batches"


@register("03.4")
def _factorise(answer) -> str:
    """``factorise(W_QK, d_k)``: ``(W_Q, W_K)``, each ``(d, d_k)``, with ``W_Q @ W_K.T == W_QK``."""
    rng = np.random.default_rng()
    for case in range(10):
        d = int(rng.integers(2, 9))
        d_k = int(rng.integers(1, d + 1))
        rank = int(rng.integers(0, d_k + 1))  # rank 0 (W_QK = 0) and rank < d_k included
        a = rng.normal(size=(d, rank)) @ rng.normal(size=(rank, d))
        on = f"case {case}: d={d}, d_k={d_k}, rank W_QK={rank}"
        got = answer(a.copy(), d_k)
        if not isinstance(got, (tuple, list)) or len(got) != 2:
            raise ExerciseFailure(f"on {on}: return a pair (W_Q, W_K), got {type(got).__name__}")
        w_q, w_k = (np.asarray(m, dtype=np.float64) for m in got)
        for name, m in [("W_Q", w_q), ("W_K", w_k)]:
            if m.shape != (d, d_k):
                raise ExerciseFailure(f"on {on}: {name} must have shape {(d, d_k)}, got {m.shape}")
        expect_close(w_q @ w_k.T, a, on=f"{on}, the product W_Q W_K^T", atol=1e-8)
    return "W_Q W_K^T reproduces W_QK (ranks 0..d_k, shapes (d, d_k)) on 10 random matrices"
