"""Checks for the exercises of chapter 03 (self-attention)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from attnlab.course.spec import Case, ExerciseFailure, as_array, exercise, expect_close, mask_equal


@exercise("03.2", answer="causal_mask", passed="correct for s = 1, 2 and 5 random lengths")
def _causal_mask(rng: np.random.Generator) -> Iterator[Case]:
    """``causal_mask(s)``: query ``i`` may attend to keys ``j <= i``."""
    for s in [1, 2, *(int(n) for n in rng.integers(3, 12, size=5))]:
        i, j = np.indices((s, s))
        hints = {
            "True above the diagonal: query i (row) may attend to keys j <= i (np.tril, "
            "not np.triu)": i <= j,
            "the diagonal must be True: a query may attend to its own token": i > j,
        }
        yield Case((s,), i >= j, on=f"s={s}", judge=mask_equal, hints=hints)


@exercise(
    "03.3", answer="padding_mask",
    passed="correct (shape (b, 1, s), broadcasting over the queries) on 10 random batches",
)
def _padding_mask(rng: np.random.Generator) -> Iterator[Case]:
    """``padding_mask(lengths, s)``: item ``b`` may attend to its first ``lengths[b]`` keys."""
    for case in range(10):
        s = int(rng.integers(1, 9))
        lengths = rng.integers(0, s + 1, size=int(rng.integers(1, 5)))
        expected = (np.arange(s)[None, :] < lengths[:, None])[:, None, :]
        hints = {
            "True marks the padding here; True must mean 'may attend' (the first lengths[b] "
            "keys)": ~expected,
            "key lengths[b] is padding: use < lengths[b], not <=": (
                np.arange(s)[None, :] <= lengths[:, None]
            )[:, None, :],
        }
        yield Case(
            (lengths, s),
            expected,
            on=f"case {case}: lengths={lengths.tolist()}, s={s}",
            judge=mask_equal,
            hints=hints,
        )


def _factor_judge(got, case: Case) -> None:
    d, d_k = case.private
    if not isinstance(got, tuple) or len(got) != 2:
        kind = "a tuple of " + str(len(got)) if isinstance(got, tuple) else "an array"
        raise ExerciseFailure(f"on {case.on}: return a pair (W_Q, W_K), got {kind}")
    w_q, w_k = (as_array(m, case.on) for m in got)
    for name, m in [("W_Q", w_q), ("W_K", w_k)]:
        if m.shape != (d, d_k):
            raise ExerciseFailure(f"on {case.on}: {name} must have shape {(d, d_k)}, got {m.shape}")
    expect_close(w_q @ w_k.T, case.expected, on=f"{case.on}, the product W_Q W_K^T", atol=1e-8)


@exercise(
    "03.4", answer="factorise",
    passed="W_Q W_K^T reproduces W_QK (ranks 0..d_k, shapes (d, d_k)) on 10 random matrices",
)
def _factorise(rng: np.random.Generator) -> Iterator[Case]:
    """``factorise(W_QK, d_k)``: ``(W_Q, W_K)``, each ``(d, d_k)``, with ``W_Q @ W_K.T == W_QK``."""
    for case in range(10):
        d = int(rng.integers(2, 9))
        d_k = int(rng.integers(1, d + 1))
        rank = int(rng.integers(0, d_k + 1))  # rank 0 (W_QK = 0) and rank < d_k included
        a = rng.normal(size=(d, rank)) @ rng.normal(size=(rank, d))
        yield Case(
            (a, d_k),
            a,
            on=f"case {case}: d={d}, d_k={d_k}, rank W_QK={rank}",
            judge=_factor_judge,
            private=(d, d_k),
        )
