"""Checks of chapter 07's exercises (Luong attention, column convention)."""

from __future__ import annotations

import numpy as np

from attnlab.exercises._registry import ExerciseFailure, expect_close, register
from attnlab.luong import luong_scores
from attnlab.softmax import softmax


@register("07.1")
def _bahdanau_scores(answer) -> str:
    """``answer(q, k, w, u, v_a)`` → ``(m, n)`` scores ``v_aᵀ tanh(W q_j + U k_i)``."""
    rng = np.random.default_rng()
    for case in range(20):
        d_q, d_k, d_a = (int(x) for x in rng.integers(1, 6, size=3))
        n, m = (int(x) for x in rng.integers(1, 7, size=2))
        q, k = rng.normal(size=(d_q, n)), rng.normal(size=(d_k, m))
        w, u, v_a = rng.normal(size=(d_a, d_q)), rng.normal(size=(d_a, d_k)), rng.normal(size=d_a)
        expected = luong_scores(q, k, "concat", w=np.concatenate([w, u], axis=1), v_a=v_a)
        got = answer(q, k, w, u, v_a)
        if np.shape(got) == (n, m) and n != m:
            raise ExerciseFailure(
                f"case {case}: got shape (n, m) = {(n, m)}; the column convention wants one row "
                f"per key and one column per query, shape (m, n) = {(m, n)}"
            )
        expect_close(
            got, expected, on=f"case {case} (d_q={d_q}, d_k={d_k}, d_a={d_a}, n={n}, m={m})"
        )
    return "matches Luong's concat score with W_a = [W, U] on 20 random cases"


@register("07.2")
def _location_weights(answer) -> str:
    """``answer(q, w_loc)`` → ``(m, n)`` weights ``softmax(W_loc q_j)``, one column per query."""
    rng = np.random.default_rng()
    for case in range(20):
        d_q, m, n = int(rng.integers(1, 6)), int(rng.integers(1, 8)), int(rng.integers(1, 6))
        q, w_loc = rng.normal(size=(d_q, n)) * 3, rng.normal(size=(m, d_q))
        expected = softmax(w_loc @ q, axis=0)
        got = answer(q, w_loc)
        expect_close(got, expected, on=f"case {case} (d_q={d_q}, m={m}, n={n})")
    # Large logits must not overflow.
    q, w_loc = np.array([[1.0]]), np.array([[800.0], [0.0]])
    expect_close(answer(q, w_loc), np.array([[1.0], [0.0]]), on="logits (800, 0)")
    return "matches softmax(W_loc q) over each column on 20 random cases and large logits"
