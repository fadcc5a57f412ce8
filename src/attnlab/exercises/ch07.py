"""Checks of chapter 07's exercises (Luong attention, column convention)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from attnlab.course.spec import Case, ExerciseFailure, as_array, close, exercise
from attnlab.luong import luong_scores
from attnlab.softmax import softmax

#: attnlab's Luong scores, numpy and torch: an answer to 07.1 or 07.4 may not call them.
LUONG_FUNCTIONS = (
    "attnlab.luong.luong_scores",
    "attnlab.luong.luong_attention",
    "attnlab.nn.LuongAttention",
)


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
    passed="matches Luong's concat score with W_a = [W, U] on 22 cases (n ≠ m, d_q ≠ d_k, "
           "then random)",
    forbid=LUONG_FUNCTIONS,
)
def _bahdanau_scores(rng: np.random.Generator) -> Iterator[Case]:
    """``answer(q, k, w, u, v_a)`` → ``(m, n)`` scores ``v_aᵀ tanh(W q_j + U k_i)``."""
    fixed = [(2, 3, 4, 3, 5), (3, 3, 3, 4, 4)]  # (d_q, d_k, d_a, n, m)
    random = [tuple(int(x) for x in rng.integers(1, 6, size=3)) + tuple(
        int(x) for x in rng.integers(1, 7, size=2)) for _ in range(20)]
    for case, (d_q, d_k, d_a, n, m) in enumerate(fixed + random):
        q, k = rng.normal(size=(d_q, n)), rng.normal(size=(d_k, m))
        w, u, v_a = rng.normal(size=(d_a, d_q)), rng.normal(size=(d_a, d_k)), rng.normal(size=d_a)
        expected = luong_scores(q, k, "concat", w=np.concatenate([w, u], axis=1), v_a=v_a)
        hints = {
            "you left out the tanh: v_a^T tanh(W q_j + U k_i)": (
                v_a @ ((u @ k)[:, :, None] + (w @ q)[:, None, :]).reshape(d_a, -1)
            ).reshape(m, n),
        }
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
    passed="matches softmax(W_loc q) over each column on 20 random cases, large logits, and "
           "columns on different scales",
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
    q, w_loc = np.eye(2), np.array([[800.0, -800.0], [0.0, 40.0]])
    yield Case(  # columns on different scales: each column needs its own maximum
        (q, w_loc), np.array([[1.0, 0.0], [0.0, 1.0]]),
        on="two queries, logit columns (800, 0) and (-800, 40)",
        hints={
            "you subtracted one maximum for the whole matrix: a column whose logits all lie far "
            "below it underflows to 0/0; subtract each column's own maximum "
            "(keepdims=True)": np.array([[1.0, np.nan], [0.0, np.nan]]),
            row_hint: softmax(w_loc @ q, axis=1),
        },
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


def concat_rows(queries, keys, weight, v_a) -> np.ndarray:
    """Reference for 07.4, pair by pair: ``scores[j, i] = v_aᵀ tanh(W_a [q_j; k_i])``."""
    return np.array([
        [v_a @ np.tanh(weight @ np.concatenate([q, k])) for k in keys] for q in queries
    ])


def _row_convention(got, case: Case) -> None:
    n, m = case.private
    arr = as_array(got, case.on)
    if arr.shape == (m, n) and n != m:
        raise ExerciseFailure(
            f"{case.on}: got shape (m, n) = {(m, n)}, the column convention; in the row "
            f"convention one row per query: shape (n, m) = {(n, m)}"
        )
    close(got, case)


@exercise(
    "07.4", answer="concat_scores",
    passed="matches v_a^T tanh(W_a [q_j; k_i]), computed pair by pair, on 15 cases with the "
           "weight of nn.Linear(d_q + d_k, d_a) (square and non-square blocks, n ≠ m)",
    forbid=LUONG_FUNCTIONS,
)
def _concat_scores(rng: np.random.Generator) -> Iterator[Case]:
    """``answer(queries (n, d_q), keys (m, d_k), weight (d_a, d_q + d_k), v_a)`` → ``(n, m)``."""
    fixed = [(3, 3, 6, 4, 5), (2, 3, 4, 3, 5), (3, 3, 3, 4, 4), (1, 2, 3, 1, 2), (3, 2, 5, 5, 3)]
    random = [tuple(int(x) for x in rng.integers(1, 6, size=5)) for _ in range(10)]
    for d_q, d_k, d_a, n, m in fixed + random:
        queries, keys = rng.normal(size=(n, d_q)), rng.normal(size=(m, d_k))
        weight, v_a = rng.normal(size=(d_a, d_q + d_k)), rng.normal(size=d_a)
        expected = concat_rows(queries, keys, weight, v_a)
        hints = {
            "you left out the tanh": np.array([
                [v_a @ (weight @ np.concatenate([q, k])) for k in keys] for q in queries]),
        }
        if d_q == d_k:
            swapped = np.concatenate([weight[:, d_q:], weight[:, :d_q]], axis=1)
            hints["you stacked [k; q]: Luong's W_a multiplies [q_j; k_i], so its first d_q "
                  "columns act on the query"] = concat_rows(queries, keys, swapped, v_a)
        if n == m and n > 1:
            hints["transposed: in the row convention row j is query j, shape (n, m)"] = (
                expected.T
            )
        yield Case(
            (queries, keys, weight, v_a),
            expected,
            on=f"d_q={d_q}, d_k={d_k}, d_a={d_a}, n={n}, m={m}",
            judge=_row_convention,
            hints=hints,
            private=(n, m),
        )
