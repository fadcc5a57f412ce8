"""Checks for the exercises of chapter 08 (the Generalized Attention Mechanism).

Each generator yields fixed boundary cases first (the sizes and degrees where a partly right
answer and the right one differ), then random ones.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from attnlab.attention import self_attention
from attnlab.course.spec import Case, ExerciseFailure, as_array, exercise, expect_close
from attnlab.gam import gam_attention

#: The library's own GAM logits and heads: an answer to 08.2 may not call them.
GAM_FUNCTIONS = (
    "attnlab.gam.gam_logits",
    "attnlab.gam.gam_attention",
    "attnlab.nn.gam_functional.gam_logits",
    "attnlab.nn.gam_fused.gam_features",
    "attnlab.nn.gam_fused.gam_fused_heads",
    "attnlab.nn.GeneralizedAttention",
)


def _b_judge(got, case: Case) -> None:
    y, w_v, m, d_k = case.private
    b = as_array(got, case.on)
    if b.shape != (m, m):
        raise ExerciseFailure(
            f"for w_q, w_k of shape {(m, d_k)} expected B of shape {(m, m)}, got {b.shape}"
        )
    z, _ = gam_attention(y, b, w_v)
    expect_close(z, case.expected, on=case.on, atol=1e-9)


def _b_hints(w_q: np.ndarray, w_k: np.ndarray) -> dict[str, np.ndarray]:
    """The B that each common mistake returns, where it differs from the right B.

    A hint is offered only where it names one mistake: with ``M = 1`` dividing by ``√M``
    is dividing by nothing, so "no scale" and "the wrong scale" are one message there.
    """
    m, d_k = w_q.shape
    plain = w_q @ w_k.T
    hints: dict[str, np.ndarray] = {}
    if d_k > 1 and m != d_k and m > 1:
        hints["you divided by √M (the model width, the size of B); the scale is 1/√d_k, the "
              "key size: B = W_Q W_K^T / √d_k"] = plain / np.sqrt(m)
    if d_k > 1:
        name = ("B has no 1/√d_k scale (dividing by √M changes nothing here, M = 1): "
                "B = W_Q W_K^T / √d_k") if m == 1 else (
                "B is missing the 1/√d_k scale: B = W_Q W_K^T / √d_k")
        hints[name] = plain
        hints["you divided by d_k; the scale is its square root: B = W_Q W_K^T / √d_k"] = (
            plain / d_k
        )
    if m > 1:
        hints["B is transposed: queries multiply from the left, B = W_Q W_K^T / √d_k"] = (
            w_k @ w_q.T / np.sqrt(d_k)
        )
    return hints


@exercise(
    "08.1", answer="b_from_query_key",
    passed="GAM with your B reproduces scaled dot-product self-attention on 13 cases "
           "(M ≠ d_k, M = 1, d_k = 1, then random).",
)
def _b_from_query_key(rng: np.random.Generator) -> Iterator[Case]:
    fixed = [(5, 2, 3, 6), (1, 3, 2, 4), (4, 1, 2, 5)]  # (M, d_k, d_v, n)
    random = [tuple(int(v) for v in rng.integers(1, 7, size=4)) for _ in range(10)]
    for m, d_k, d_v, n in fixed + random:
        w_q, w_k = rng.normal(size=(m, d_k)), rng.normal(size=(m, d_k))
        w_v, y = rng.normal(size=(m, d_v)), rng.normal(size=(max(n, 2), m))
        expected, _ = self_attention(y, w_q, w_k, w_v)
        yield Case(
            (w_q, w_k),
            expected,
            on=f"M={m}, d_k={d_k}, n={y.shape[0]}",
            judge=_b_judge,
            hints=_b_hints(w_q, w_k),
            private=(y, w_v, m, d_k),
        )


def poly_pairwise(y: np.ndarray, b: np.ndarray, coeffs: np.ndarray) -> np.ndarray:
    """Eq. 16 as written, with ``f(x) = Σ_l A_l x^l``: every product ``y^α_r y^β_t`` (an
    ``(n, n, M, M)`` array, affordable at the sizes of the check), then weighted by ``B``."""
    products = np.einsum("ar,bt->abrt", y, y)
    f = sum(a * products**power for power, a in enumerate(coeffs, start=1))
    return np.einsum("abrt,rt->ab", f, b)


def _poly_hints(y: np.ndarray, b: np.ndarray, coeffs: np.ndarray) -> dict[str, np.ndarray]:
    bilinear = y @ b @ y.T
    terms = [y**power @ b @ (y**power).T for power in range(len(coeffs) + 1)]  # l = 0..L
    hints = {
        "you raised the bilinear logits Y B Y^T to the power l (Σ_l A_l (Y B Y^T)^l); f acts "
        "on each product y_r y_t, so each term is Y^{∘l} B (Y^{∘l})^T with the entries of Y "
        "raised to the power l": sum(a * bilinear**p for p, a in enumerate(coeffs, start=1)),
        "your powers start at 0: coeffs = (A_1, ..., A_L) multiply the powers 1..L": sum(
            a * terms[p] for p, a in enumerate(coeffs)
        ),
        "the coefficients are in reverse order: coeffs[0] is A_1, the coefficient of x^1": sum(
            a * terms[p] for p, a in enumerate(coeffs[::-1], start=1)
        ),
        "you dropped the coefficients A_l: f(x) = Σ_l A_l x^l": sum(terms[1:]),
        "you took |Y|^l: odd powers keep their sign (the exact power y**l)": sum(
            a * (np.abs(y) ** p @ b @ (np.abs(y) ** p).T) for p, a in enumerate(coeffs, 1)
        ),
    }
    if len(coeffs) > 1:
        hints["you used only A_1 (the bilinear form); add the terms l = 2..L"] = (
            coeffs[0] * terms[1]
        )
    if len(coeffs) > 2:
        hints["you used only the first two coefficients; f has L terms"] = (
            coeffs[0] * terms[1] + coeffs[1] * terms[2]
        )
    return hints


@exercise(
    "08.2",
    answer="poly_logits",
    passed="your polynomial logits match eq. 16 computed pair by pair on 14 cases "
           "(degrees 1 to 5, n = 1, M = 1, then random).",
    forbid=GAM_FUNCTIONS,
)
def _poly_logits(rng: np.random.Generator) -> Iterator[Case]:
    fixed = [(5, 3, 3), (4, 2, 4), (6, 3, 1), (3, 4, 2), (1, 3, 5), (5, 1, 3)]  # (n, M, L)
    random = [
        (int(rng.integers(1, 9)), int(rng.integers(1, 6)), int(rng.integers(1, 6)))
        for _ in range(8)
    ]
    for n, m, degree in fixed + random:
        y, b = rng.normal(size=(n, m)), rng.normal(size=(m, m))
        coeffs = rng.normal(size=degree)
        yield Case(
            (y, b, coeffs),
            poly_pairwise(y, b, coeffs),
            on=f"n={n}, M={m}, L={degree}",
            hints=_poly_hints(y, b, coeffs),
            atol=1e-8,
            rtol=1e-8,
        )
