"""Checks for the exercises of chapter 08 (the Generalized Attention Mechanism).

Each generator yields fixed boundary cases first (the sizes and degrees where a partly right
answer and the right one differ), then random ones.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from attnlab.course.spec import Case, ExerciseFailure, as_array, exercise, expect_close

#: The library's GAM code, numpy and torch, private helpers included (whole modules), and
#: torch's converters: 08.2 is a numpy exercise, and its memory bound is measured by tracemalloc,
#: which sees numpy's arrays but not torch's.
GAM_FUNCTIONS = (
    "attnlab.gam",
    "attnlab.nn.gam_functional",
    "attnlab.nn.gam_fused",
    "attnlab.nn.gam",
    "torch.from_numpy",
    "torch.as_tensor",
    "torch.asarray",
    "torch.tensor",
)


def best_split(b: np.ndarray, d_k: int) -> np.ndarray:
    """The product ``W_Q W_Kᵀ / √d_k`` that 08.1's answer must reach: ``B`` truncated to its
    ``d_k`` largest singular values (``B`` itself when ``rank B ≤ d_k``; Eckart–Young)."""
    u, s, vt = np.linalg.svd(b)
    keep = min(d_k, b.shape[0])
    return (u[:, :keep] * s[:keep]) @ vt[:keep]


def _split_judge(got, case: Case) -> None:
    b, d_k, rank = case.private
    m = b.shape[0]
    if not isinstance(got, tuple) or len(got) != 2:
        raise ExerciseFailure(f"on {case.on}: return the pair (w_q, w_k)")
    w_q, w_k = (as_array(x, case.on) for x in got)
    for name, w in (("w_q", w_q), ("w_k", w_k)):
        if w.shape != (m, d_k):
            pad = " (d_k > M: pad with zero columns)" if d_k > m else ""
            raise ExerciseFailure(f"on {case.on}: {name} must have shape {(m, d_k)}, got "
                                  f"{w.shape}{pad}")
        if not np.all(np.isfinite(w)):
            raise ExerciseFailure(f"on {case.on}: {name} holds NaN or inf")
    product = w_q @ w_k.T / np.sqrt(d_k)
    target = case.expected
    if np.allclose(product, target, atol=1e-8, rtol=1e-6):
        return
    if d_k > 1 and np.allclose(product * np.sqrt(d_k), target, atol=1e-8, rtol=1e-6):
        raise ExerciseFailure(f"on {case.on}: your W_Q W_K^T equals B, but B includes the "
                              f"1/√d_k: W_Q W_K^T must be √d_k B (give each factor d_k^(1/4))")
    if m > 1 and np.allclose(product, target.T, atol=1e-8, rtol=1e-6):
        raise ExerciseFailure(f"on {case.on}: your product is B transposed: W_Q takes the left "
                              f"singular vectors (B's rows), W_K the right ones")
    if rank > d_k:
        raise ExerciseFailure(f"on {case.on}: rank B = {rank} > d_k, and yours is not the "
                              f"closest W_Q W_K^T / √d_k: keep the d_k largest singular values")
    worst = np.abs(product - target).max()
    raise ExerciseFailure(f"on {case.on}: W_Q W_K^T / √d_k differs from B by up to {worst:.3g}")


@exercise(
    "08.1", answer="query_key_from_b",
    passed="W_Q W_K^T / √d_k is B, or its best rank-d_k approximation, on 15 cases (rank below, "
           "at and above d_k, d_k > M, M = 1, then random).",
)
def _query_key_from_b(rng: np.random.Generator) -> Iterator[Case]:
    fixed = [(5, 2, 2), (5, 3, 1), (4, 4, 4), (3, 5, 3), (6, 2, 6), (1, 1, 1), (4, 1, 4)]
    random = [(int(m), int(d), int(rng.integers(1, m + 1)))
              for m, d in rng.integers(1, 7, size=(8, 2))]
    for m, d_k, rank in fixed + random:  # (M, d_k, rank B)
        b = rng.normal(size=(m, rank)) @ rng.normal(size=(rank, m))
        yield Case((b, d_k), best_split(b, d_k), on=f"M={m}, d_k={d_k}, rank B={rank}",
                   judge=_split_judge, private=(b, d_k, rank))


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


def peak_bound(n: int, m: int, degree: int, arrays: int = 4) -> int:
    """08.2's memory bound in bytes: ``arrays`` float64 arrays of each size the factorisation
    needs, ``n²`` (the logits), ``n·L·M`` (the powers of ``Y``) and ``(L·M)²`` (a stacked
    brain), and 64 KiB for Python's own objects. The pairwise array has ``n²M²`` numbers."""
    return arrays * 8 * (n * n + n * degree * m + (degree * m) ** 2) + 64 * 1024


def factorised(y: np.ndarray, b: np.ndarray, coeffs: np.ndarray) -> np.ndarray:
    """The reference of 08.2's large cases (prop-08-factor; the tests check it against
    :func:`poly_pairwise`)."""
    return sum(a * (y**p @ b @ (y**p).T) for p, a in enumerate(coeffs, start=1))


@exercise(
    "08.2",
    answer="poly_logits",
    adapter="bounded",
    passed="your polynomial logits match eq. 16 computed pair by pair on 14 cases (degrees 1 to "
           "5, n = 1, M = 1, then random), and the factorisation within its memory at n = M = 48 "
           "and at n = 2000.",
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
            (y, b, coeffs, peak_bound(n, m, degree)),
            poly_pairwise(y, b, coeffs),
            on=f"n={n}, M={m}, L={degree}",
            hints=_poly_hints(y, b, coeffs),
            atol=1e-8,
            rtol=1e-8,
        )
    # The factorisation itself: at n = M = 48 the pairwise array needs 42 MB, the bound ~1 MB;
    # at n = 2000 a loop over the 4 million pairs runs past the check's time limit.
    # The large case is there for the time limit: its bound (16 arrays) leaves room for any
    # honest way of summing the terms (a lean loop peaks at 3 arrays of n² numbers).
    for n, m, degree, arrays in ((48, 48, 3, 4), (2000, 16, 2, 16)):
        y, b = rng.normal(size=(n, m)) / 2, rng.normal(size=(m, m)) / m
        coeffs = rng.normal(size=degree)
        yield Case(
            (y, b, coeffs, peak_bound(n, m, degree, arrays)),
            factorised(y, b, coeffs),
            on=f"n={n}, M={m}, L={degree} (the pairwise array would hold {n * n * m * m:,} "
               f"numbers)",
            atol=1e-8,
            rtol=1e-8,
        )


def _augmented_judge(got, case: Case) -> None:
    y, m = case.private
    b = as_array(got, case.on)
    if b.shape != (m + 1, m + 1):
        raise ExerciseFailure(f"on {case.on}: B~ acts on (y, 1) of length M + 1 = {m + 1}: "
                              f"expected shape {(m + 1, m + 1)}, got {b.shape}")
    y_tilde = np.hstack([y, np.ones((len(y), 1))])
    expect_close(y_tilde @ b @ y_tilde.T, case.expected, on=case.on, atol=1e-9)


@exercise(
    "08.3", answer="augmented_brain",
    passed="GAM with your B~ on (y, 1) reproduces the logits of biased queries and keys on 12 "
           "cases (M = 1, d_k = 1, then random).",
)
def _augmented_brain(rng: np.random.Generator) -> Iterator[Case]:
    fixed = [(3, 2, 5), (1, 1, 3), (4, 1, 4), (2, 3, 6)]  # (M, d_k, n)
    random = [tuple(int(v) for v in rng.integers(1, 6, size=3)) for _ in range(8)]
    for m, d_k, n in fixed + random:
        w_q, w_k = rng.normal(size=(m, d_k)), rng.normal(size=(m, d_k))
        b_q, b_k = rng.normal(size=(1, d_k)), rng.normal(size=(1, d_k))
        y = rng.normal(size=(n + 1, m))
        right = np.block([[w_q @ w_k.T, w_q @ b_k.T], [b_q @ w_k.T, b_q @ b_k.T]])
        hints = {
            "B~ is missing the 1/√d_k, for all four blocks": right,
            "the bias blocks are swapped: row M (the 1 of the query) holds b_Q W_K^T, column M "
            "(the 1 of the key) W_Q b_K^T": np.block(
                [[w_q @ w_k.T, (b_q @ w_k.T).T], [(w_q @ b_k.T).T, b_q @ b_k.T]]) / np.sqrt(d_k),
            "the corner b_Q b_K^T is missing (the product of the two biases)": np.block(
                [[w_q @ w_k.T, w_q @ b_k.T], [b_q @ w_k.T, np.zeros((1, 1))]]) / np.sqrt(d_k),
        }
        if d_k == 1:
            hints.pop("B~ is missing the 1/√d_k, for all four blocks")
        yield Case(
            (w_q, w_k, b_q, b_k),
            (y @ w_q + b_q) @ (y @ w_k + b_k).T / np.sqrt(d_k),  # the biased logits themselves
            on=f"M={m}, d_k={d_k}", judge=_augmented_judge, hints=hints, private=(y, m),
        )
