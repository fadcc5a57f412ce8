"""Checks of chapter 07's exercises (Luong attention, column convention)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from attnlab.course.spec import Case, ExerciseFailure, close, exercise
from attnlab.luong import luong_scores
from attnlab.softmax import softmax


def _column_convention(got, case: Case) -> None:
    n, m = case.private
    if isinstance(got, np.ndarray) and got.shape == (n, m) and n != m:
        raise ExerciseFailure(
            f"{case.on}: got shape (n, m) = {(n, m)}; the column convention wants one row "
            f"per key and one column per query, shape (m, n) = {(m, n)}"
        )
    close(got, case)


@exercise(
    "07.1",
    answer="bahdanau_scores",
    passed="matches Luong's concat score with W_a = [W, U] on 20 random cases",
)
def _bahdanau_scores(rng: np.random.Generator) -> Iterator[Case]:
    """``answer(q, k, w, u, v_a)`` → ``(m, n)`` scores ``v_aᵀ tanh(W q_j + U k_i)``."""
    for case in range(20):
        d_q, d_k, d_a = (int(x) for x in rng.integers(1, 6, size=3))
        n, m = (int(x) for x in rng.integers(1, 7, size=2))
        q, k = rng.normal(size=(d_q, n)), rng.normal(size=(d_k, m))
        w, u, v_a = rng.normal(size=(d_a, d_q)), rng.normal(size=(d_a, d_k)), rng.normal(size=d_a)
        expected = luong_scores(q, k, "concat", w=np.concatenate([w, u], axis=1), v_a=v_a)
        hints = {}
        if n == m and n > 1:
            hints["transposed: one row per key and one column per query, shape (m, n)"] = (
                expected.T
            )
        yield Case(
            (q, k, w, u, v_a),
            expected,
            on=f"case {case} (d_q={d_q}, d_k={d_k}, d_a={d_a}, n={n}, m={m})",
            judge=_column_convention,
            hints=hints,
            private=(n, m),
        )


@exercise(
    "07.2", answer="location_weights",
    passed="matches softmax(W_loc q) over each column on 20 random cases and large logits",
)
def _location_weights(rng: np.random.Generator) -> Iterator[Case]:
    """``answer(q, w_loc)`` → ``(m, n)`` weights ``softmax(W_loc q_j)``, one column per query."""
    row_hint = (
        "you normalised each row; each column (one query) must sum to 1: softmax over axis=0"
    )
    q, w_loc = np.array([[1.0]]), np.array([[800.0], [0.0]])
    yield Case(  # large logits must not overflow
        (q, w_loc), np.array([[1.0], [0.0]]), on="logits (800, 0)",
        hints={row_hint: softmax(w_loc @ q, axis=1)},
    )
    for case in range(20):
        d_q, m, n = int(rng.integers(1, 6)), int(rng.integers(1, 8)), int(rng.integers(1, 6))
        q, w_loc = rng.normal(size=(d_q, n)) * 3, rng.normal(size=(m, d_q))
        yield Case(
            (q, w_loc),
            softmax(w_loc @ q, axis=0),
            on=f"case {case} (d_q={d_q}, m={m}, n={n})",
            hints={row_hint: softmax(w_loc @ q, axis=1)} if m > 1 else {},
        )
