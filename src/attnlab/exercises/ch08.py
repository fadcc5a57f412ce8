"""Checks for the exercises of chapter 08 (the Generalized Attention Mechanism)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from attnlab.attention import self_attention
from attnlab.course.spec import Case, ExerciseFailure, as_array, exercise, expect_close
from attnlab.gam import gam_attention, gam_logits


def _b_judge(got, case: Case) -> None:
    y, w_v, m, d_k = case.private
    b = as_array(got, case.on)
    if b.shape != (m, m):
        raise ExerciseFailure(
            f"for w_q, w_k of shape {(m, d_k)} expected B of shape {(m, m)}, got {b.shape}"
        )
    z, _ = gam_attention(y, b, w_v)
    expect_close(z, case.expected, on=case.on, atol=1e-9)


@exercise(
    "08.1", answer="b_from_query_key",
    passed="GAM with your B reproduces scaled dot-product self-attention on 10 random cases.",
)
def _b_from_query_key(rng: np.random.Generator) -> Iterator[Case]:
    for _ in range(10):
        m, d_k, d_v, n = (int(v) for v in rng.integers(1, 7, size=4))
        w_q, w_k = rng.normal(size=(m, d_k)), rng.normal(size=(m, d_k))
        w_v, y = rng.normal(size=(m, d_v)), rng.normal(size=(n, m))
        expected, _ = self_attention(y, w_q, w_k, w_v)
        hints = {
            "B is missing the 1/√d_k scale: B = W_Q W_K^T / √d_k": w_q @ w_k.T,
            "B is transposed: queries multiply from the left, B = W_Q W_K^T / √d_k": (
                w_k @ w_q.T / np.sqrt(d_k)
            ),
        }
        if d_k == 1:
            hints.pop(next(iter(hints)))
        yield Case(
            (w_q, w_k),
            expected,
            on=f"M={m}, d_k={d_k}, n={n}",
            judge=_b_judge,
            hints=hints,
            private=(y, w_v, m, d_k),
        )


@exercise(
    "08.2",
    answer="poly_logits",
    passed="your polynomial logits match attnlab.gam_logits on 10 random cases.",
)
def _poly_logits(rng: np.random.Generator) -> Iterator[Case]:
    for _ in range(10):
        n, m, degree = int(rng.integers(1, 9)), int(rng.integers(1, 6)), int(rng.integers(1, 5))
        y, b = rng.normal(size=(n, m)), rng.normal(size=(m, m))
        coeffs = rng.normal(size=degree)
        yield Case(
            (y, b, coeffs),
            gam_logits(y, b, f="poly", coeffs=coeffs)[0],
            on=f"n={n}, M={m}, L={degree}",
            atol=1e-8,
            rtol=1e-8,
        )
