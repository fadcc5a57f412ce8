"""Checks for the exercises of chapter 08 (the Generalized Attention Mechanism)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from attnlab.attention import self_attention
from attnlab.exercises._registry import ExerciseFailure, expect_close, register
from attnlab.gam import gam_attention, gam_logits


@register("08.1")
def _b_from_query_key(answer: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> str:
    rng = np.random.default_rng()
    for _ in range(10):
        m, d_k, d_v, n = (int(v) for v in rng.integers(1, 7, size=4))
        w_q, w_k = rng.normal(size=(m, d_k)), rng.normal(size=(m, d_k))
        w_v, y = rng.normal(size=(m, d_v)), rng.normal(size=(n, m))
        b = np.asarray(answer(w_q, w_k))
        if b.shape != (m, m):
            raise ExerciseFailure(
                f"for w_q, w_k of shape {(m, d_k)} expected B of shape {(m, m)}, got {b.shape}"
            )
        z, _ = gam_attention(y, b, w_v)
        expected, _ = self_attention(y, w_q, w_k, w_v)
        expect_close(z, expected, on=f"M={m}, d_k={d_k}, n={n}", atol=1e-9)
    return "GAM with your B reproduces scaled dot-product self-attention on 10 random cases."


@register("08.2")
def _poly_logits(answer: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]) -> str:
    rng = np.random.default_rng()
    for _ in range(10):
        n, m, degree = int(rng.integers(1, 9)), int(rng.integers(1, 6)), int(rng.integers(1, 5))
        y, b = rng.normal(size=(n, m)), rng.normal(size=(m, m))
        coeffs = rng.normal(size=degree)
        got = np.asarray(answer(y, b, coeffs))
        expected = gam_logits(y, b, f="poly", coeffs=coeffs)[0]
        expect_close(got, expected, on=f"n={n}, M={m}, L={degree}", atol=1e-8, rtol=1e-8)
    return "your polynomial logits match attnlab.gam_logits on 10 random cases."
