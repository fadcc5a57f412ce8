"""Checks of chapter 07's exercises (Luong attention, column convention)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from attnlab.course.spec import Case, ExerciseFailure, close, exercise
from attnlab.exercises.ch02 import SOFTMAX_FORBID
from attnlab.exercises.ch03 import ATTENTION_FORBID
from attnlab.luong import luong_scores
from attnlab.softmax import softmax

#: attnlab's Luong code, numpy and torch, private helpers included (``attnlab.luong._raw_scores``
#: computes 07.1's answer): whole modules, so every function defined in them counts.
LUONG_FUNCTIONS = ("attnlab.luong", "attnlab.nn.luong_attention", "attnlab.nn.LuongAttention")

#: 07.2 asks for a softmax down each column: every library softmax is unavailable.
LOCATION_FORBID = (*LUONG_FUNCTIONS, *SOFTMAX_FORBID)

#: 07.4 asks for masked attention with the general score: no library softmax or attention.
GENERAL_FORBID = (*LUONG_FUNCTIONS, *SOFTMAX_FORBID, *ATTENTION_FORBID)


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
    passed="matches Luong's concat score with W_cat = [W_1, W_2] on 22 cases (n ≠ m, d_q ≠ d_k, "
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
    "07.2", answer="location_weights", forbid=LOCATION_FORBID,
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


def general_rows(queries, keys, values, weight, lengths) -> np.ndarray:
    """Reference for 07.4, one batch item and one query at a time (row convention).

    ``queries (B, n, d_q)``, ``keys (B, m, d_k)``, ``values (B, m, d_v)``, ``weight (d_q, d_k)``
    (``nn.Linear(d_k, d_q).weight``), ``lengths (B,)`` → ``(B, n, d_v)``: the score of query
    ``q`` against key ``k`` is ``q · (weight @ k)``, and keys from ``lengths[b]`` on are padding.
    """
    out = np.zeros((*queries.shape[:2], values.shape[2]))
    for b, length in enumerate(lengths):
        for j, q in enumerate(queries[b]):
            logits = np.array([q @ (weight @ k) for k in keys[b, :length]])
            e = np.exp(logits - logits.max())
            out[b, j] = (e / e.sum()) @ values[b, :length]
    return out


def _general_hints(queries, keys, values, weight, lengths) -> dict[str, np.ndarray]:
    """The outputs of the common mistakes, where they differ from the right one."""
    d_q, d_k = weight.shape
    b, m = keys.shape[:2]
    valid = np.arange(m)[None, :] < np.asarray(lengths)[:, None]  # (B, m)

    def attend(logits, axis=-1, mask=True, renormalise=True):
        z = np.where(valid[:, None, :], logits, -np.inf) if mask else logits
        e = np.exp(z - z.max(axis=axis, keepdims=True))
        a = e / e.sum(axis=axis, keepdims=True)
        if not mask and not renormalise:  # padding zeroed after the softmax, no renormalising
            a = np.where(valid[:, None, :], a, 0.0)
        return a @ values

    right = queries @ weight @ keys.transpose(0, 2, 1)  # (B, n, m)
    hints = {
        "you divided by √d_k: the general score q · (W_a k) has no scale": attend(
            right / np.sqrt(d_k)),
    }
    if not valid.all():
        hints["padding keys got weight: mask the keys from lengths[b] on before the softmax"] = (
            attend(right, mask=False))
        hints["you zeroed the padding weights after the softmax: the rest no longer sum to 1; "
              "mask the logits before it"] = attend(right, mask=False, renormalise=False)
    if d_q == d_k:
        hints["the matrix is on the wrong side: nn.Linear(d_k, d_q) stores W_a (out, in) = "
              "(d_q, d_k) and maps a key, so the score is q W_a k^T, not q W_a^T k^T"] = attend(
            queries @ weight.T @ keys.transpose(0, 2, 1))
    if queries.shape[1] > 1:
        with np.errstate(invalid="ignore"):
            hints["you normalised over the queries; each query's weights over the keys must "
                  "sum to 1 (softmax over the last axis)"] = attend(right, axis=1)
    return hints


@exercise(
    "07.4", answer="general_attention", forbid=GENERAL_FORBID,
    passed="matches a loop over items and queries on 12 padded batches, with the weight of "
           "nn.Linear(d_k, d_q) (d_q ≠ d_k and square, one-key items)",
)
def _general_attention(rng: np.random.Generator) -> Iterator[Case]:
    """``answer(queries, keys, values, weight, lengths)`` → ``(B, n, d_v)``."""
    fixed = [  # (B, n, m, d_q, d_k, d_v), lengths
        ((2, 4, 4, 3, 3, 2), (4, 1)),  # square: the wrong side is silent (named first)
        ((2, 3, 5, 3, 4, 2), (5, 2)),  # d_q ≠ d_k: the wrong side is a shape error
        ((1, 1, 1, 2, 3, 1), (1,)),  # one query, one key
        ((3, 2, 6, 4, 2, 3), (6, 3, 1)),
    ]
    random = []
    for _ in range(8):
        b, n, m, d_q, d_k, d_v = (int(x) for x in rng.integers(1, 6, size=6))
        random.append(((b, n, m, d_q, d_k, d_v), tuple(int(x) for x in rng.integers(1, m + 1,
                                                                                    size=b))))
    for (b, n, m, d_q, d_k, d_v), lengths in fixed + random:
        queries, keys = rng.normal(size=(b, n, d_q)), rng.normal(size=(b, m, d_k))
        values, weight = rng.normal(size=(b, m, d_v)), rng.normal(size=(d_q, d_k))
        lengths = np.array(lengths)
        args = (queries, keys, values, weight, lengths)
        yield Case(
            args, general_rows(*args),
            on=f"B={b}, n={n}, m={m}, d_q={d_q}, d_k={d_k}, lengths={lengths.tolist()}",
            hints=_general_hints(*args),
        )
