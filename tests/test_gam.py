"""Tests of attnlab.gam (chapter 08) against a naive pairwise float64 reference and SDPA."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab import (
    gam_attention,
    gam_init_std,
    gam_logits,
    scaled_dot_product_attention,
    signed_power,
)
from attnlab.gam import check_mix

# ---- the naive reference: eq. 13-18 of Pandya (2022), one pair (alpha, beta) at a time -------


def _f_naive(x: np.ndarray, f: str, n1: float, coeffs) -> np.ndarray:
    """The feature function applied to the products themselves (not factorised)."""
    if f == "power":
        if float(n1).is_integer():
            return x ** int(n1)
        return np.where(x < 0, -(np.abs(x) ** n1), np.abs(x) ** n1)
    return sum(a * x**k for k, a in enumerate(coeffs, start=1))


def naive_gam_logits(y, b, f="power", n1=1, coeffs=None) -> np.ndarray:
    """eps[i, α, β] = Σ_rt f(y[α, r] y[β, t]) b[i, r, t], by loops over α and β (float64)."""
    y = np.asarray(y, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    b = b[None] if b.ndim == 2 else b
    n = y.shape[0]
    eps = np.zeros((b.shape[0], n, n))
    for alpha in range(n):
        for beta in range(n):
            products = np.outer(y[alpha], y[beta])  # (M, M): y_r^α y_t^β
            features = _f_naive(products, f, n1, coeffs)
            for i in range(b.shape[0]):
                eps[i, alpha, beta] = np.sum(features * b[i])
    return eps


def naive_gam_attention(y, b, w_v, f="power", n1=1, coeffs=None, mix=None, mask=None):
    """Eq. 13-15 and 14 with explicit exponentials, row by row (float64)."""
    eps = naive_gam_logits(y, b, f, n1, coeffs)
    n_b, n, _ = eps.shape
    mix = np.full(n_b, 1.0 / n_b) if mix is None else np.asarray(mix, dtype=np.float64)
    allowed = np.ones((n, n), bool) if mask is None else np.broadcast_to(mask, (n, n))
    phi = np.zeros((n, n))
    for i in range(n_b):
        for alpha in range(n):
            keys = np.flatnonzero(allowed[alpha])
            if keys.size == 0:
                continue
            e = np.exp(eps[i, alpha, keys] - eps[i, alpha, keys].max())
            phi[alpha, keys] += mix[i] * e / e.sum()
    values = np.asarray(y, np.float64) @ np.asarray(w_v, np.float64)
    return phi @ values, phi


FEATURES = [
    ("power", 1, None),
    ("power", 2, None),
    ("power", 3, None),
    ("power", 0.5, None),
    ("power", 1.5, None),
    ("power", 2.5, None),
    ("poly", 1, (0.7, -0.4, 0.25)),
    ("poly", 1, (0.0, 1.0)),
]


# ---- signed_power ------------------------------------------------------------------------------


def test_signed_power_integer_is_exact_power():
    x = np.array([-3.0, -1.5, 0.0, 0.5, 2.0])
    for n in (1, 2, 3, 4):
        np.testing.assert_array_equal(signed_power(x, n), x**n)
        np.testing.assert_array_equal(signed_power(x, float(n)), x**n)


@pytest.mark.parametrize("p", [0.3, 0.5, 1.5, 2.5, 3.7])
def test_signed_power_noninteger_rule(p):
    rng = np.random.default_rng(1)
    x = rng.normal(size=200) * 3
    x_pos = np.abs(x)
    # agrees with the real power where it exists, odd, and multiplicative
    np.testing.assert_allclose(signed_power(x_pos, p), np.power(x_pos, p), rtol=1e-14)
    np.testing.assert_allclose(signed_power(-x, p), -signed_power(x, p), rtol=1e-14)
    a, c = x[:100], x[100:]
    np.testing.assert_allclose(
        signed_power(a * c, p), signed_power(a, p) * signed_power(c, p), rtol=1e-12, atol=1e-14
    )
    assert not np.isnan(signed_power(x, p)).any()  # numpy's x**p would be NaN for x < 0
    with np.errstate(invalid="ignore"):
        assert np.isnan(np.power(-2.0, p))


@pytest.mark.parametrize("p", [0, -1, float("nan"), float("inf")])
def test_signed_power_rejects_bad_exponent(p):
    with pytest.raises(ValueError, match="n1"):
        signed_power(np.ones(3), p)


def test_signed_power_keeps_float32():
    assert signed_power(np.ones(3, np.float32), 1.5).dtype == np.float32
    assert signed_power(np.ones(3, np.float32), 2).dtype == np.float32


# ---- reduction to scaled dot-product attention (eq. 10-12) ---------------------------------


@pytest.mark.parametrize("causal", [False, True])
def test_reduces_to_scaled_dot_product_attention(causal):
    rng = np.random.default_rng(2)
    n, m, d_k, d_v = 7, 6, 3, 4
    y = rng.normal(size=(n, m))
    w_q, w_k, w_v = rng.normal(size=(m, d_k)), rng.normal(size=(m, d_k)), rng.normal(size=(m, d_v))
    b = w_q @ w_k.T / math.sqrt(d_k)
    assert np.linalg.matrix_rank(b) <= d_k
    mask = np.tril(np.ones((n, n), bool)) if causal else None
    z, phi = gam_attention(y, b, w_v, mask=mask)
    ref_out, ref_w = scaled_dot_product_attention(y @ w_q, y @ w_k, y @ w_v, mask=mask)
    np.testing.assert_allclose(z, ref_out, rtol=0, atol=1e-10)
    np.testing.assert_allclose(phi, ref_w, rtol=0, atol=1e-10)
    q, k, v = (torch.from_numpy(a) for a in (y @ w_q, y @ w_k, y @ w_v))
    torch_mask = None if mask is None else torch.from_numpy(mask)
    torch_out = F.scaled_dot_product_attention(q, k, v, attn_mask=torch_mask)
    assert torch_out.dtype == torch.float64
    np.testing.assert_allclose(z, torch_out.numpy(), rtol=0, atol=1e-10)


def test_one_brain_identity_logits_are_bilinear_form():
    rng = np.random.default_rng(3)
    y, b = rng.normal(size=(5, 4)), rng.normal(size=(4, 4))
    np.testing.assert_allclose(gam_logits(y, b)[0], y @ b @ y.T, atol=1e-12)


# ---- factorised against naive --------------------------------------------------------------


@pytest.mark.parametrize(("f", "n1", "coeffs"), FEATURES)
@pytest.mark.parametrize("n_brains", [1, 3])
def test_factorised_logits_match_naive(f, n1, coeffs, n_brains):
    rng = np.random.default_rng(4)
    y = rng.normal(size=(6, 5))
    b = rng.normal(size=(n_brains, 5, 5)) / 5
    got = gam_logits(y, b, f=f, n1=n1, coeffs=coeffs)
    assert got.shape == (n_brains, 6, 6)
    np.testing.assert_allclose(got, naive_gam_logits(y, b, f, n1, coeffs), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize(("f", "n1", "coeffs"), FEATURES)
def test_attention_matches_naive_with_mixes(f, n1, coeffs):
    rng = np.random.default_rng(5)
    n, m, n_b = 5, 4, 3
    y, w_v = rng.normal(size=(n, m)), rng.normal(size=(m, 2))
    b = rng.normal(size=(n_b, m, m)) / m
    for mix in (None, rng.dirichlet(np.ones(n_b)), np.array([1.0, 0.0, 0.0])):
        z, phi = gam_attention(y, b, w_v, f=f, n1=n1, coeffs=coeffs, mix=mix)
        z_ref, phi_ref = naive_gam_attention(y, b, w_v, f, n1, coeffs, mix)
        np.testing.assert_allclose(phi, phi_ref, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(z, z_ref, rtol=1e-10, atol=1e-12)


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 6),
    m=st.integers(1, 4),
    n_b=st.integers(1, 3),
    p=st.sampled_from([1, 2, 0.5, 1.5, 3]),
    seed=st.integers(0, 2**16),
)
def test_property_factorised_equals_naive_and_rows_are_distributions(n, m, n_b, p, seed):
    rng = np.random.default_rng(seed)
    y = rng.normal(size=(n, m))
    b = rng.normal(size=(n_b, m, m))
    mix = rng.dirichlet(np.ones(n_b))
    w_v = rng.normal(size=(m, 2))
    z, phi = gam_attention(y, b, w_v, n1=p, mix=mix)
    _, phi_ref = naive_gam_attention(y, b, w_v, "power", p, None, mix)
    np.testing.assert_allclose(phi, phi_ref, rtol=1e-9, atol=1e-12)
    assert np.all(phi >= 0)
    np.testing.assert_allclose(phi.sum(-1), 1.0, atol=1e-12)
    # each output is a convex combination of the values: inside their bounding box
    values = y @ w_v
    assert np.all(z <= values.max(0) + 1e-9) and np.all(z >= values.min(0) - 1e-9)


def test_mask_matches_naive_and_fully_masked_row_is_zero():
    rng = np.random.default_rng(6)
    n, m = 5, 3
    y, w_v, b = rng.normal(size=(n, m)), rng.normal(size=(m, 2)), rng.normal(size=(2, m, m))
    mask = np.tril(np.ones((n, n), bool))
    mask[2] = False  # row 2 may attend to nothing
    z, phi = gam_attention(y, b, w_v, n1=2, mask=mask, mix=[0.3, 0.7])
    z_ref, phi_ref = naive_gam_attention(y, b, w_v, "power", 2, None, [0.3, 0.7], mask)
    np.testing.assert_allclose(phi, phi_ref, atol=1e-12)
    np.testing.assert_allclose(z, z_ref, atol=1e-12)
    assert np.all(phi[~mask] == 0) and np.all(z[2] == 0)
    np.testing.assert_allclose(phi[[0, 1, 3, 4]].sum(-1), 1.0, atol=1e-12)


def test_float32_is_kept():
    rng = np.random.default_rng(7)
    y = rng.normal(size=(4, 3)).astype(np.float32)
    b = rng.normal(size=(2, 3, 3)).astype(np.float32)
    z, phi = gam_attention(y, b, np.eye(3, dtype=np.float32), n1=1.5)
    assert z.dtype == np.float32 and phi.dtype == np.float32
    assert gam_logits(y, b).dtype == np.float32


# ---- bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mix", "message"),
    [
        ([0.5, 0.6], "sum to one"),
        ([1.5, -0.5], "non-negative"),
        ([1.0], r"shape \(N_B,\)"),
        ([0.2, 0.3, 0.5], r"shape \(N_B,\)"),
        ([[0.5, 0.5]], r"shape \(N_B,\)"),
        ([np.nan, 1.0], "NaN"),
    ],
)
def test_bad_mix_raises(mix, message):
    y, b = np.ones((3, 2)), np.ones((2, 2, 2))
    with pytest.raises(ValueError, match=message):
        gam_attention(y, b, np.eye(2), mix=mix)


def test_default_mix_is_uniform():
    np.testing.assert_array_equal(check_mix(None, 4), np.full(4, 0.25))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"b": np.ones((3, 3))}, "M=2"),
        ({"b": np.ones((2, 2, 3))}, "M=2"),
        ({"b": np.ones((0, 2, 2))}, "N_B = 0"),
        ({"w_v": np.ones((3, 2))}, "w_v must have shape"),
        ({"y": np.ones((0, 2))}, "non-empty"),
        ({"y": np.ones(2)}, r"\(n, M\)"),
        ({"y": np.array([[np.nan, 1.0]])}, "NaN"),
        ({"f": "exp"}, "f must be one of"),
        ({"n1": 0}, "positive"),
        ({"n1": -1.5}, "positive"),
        ({"f": "poly"}, "needs coeffs"),
        ({"f": "poly", "coeffs": [[1.0]]}, "1-D"),
        ({"coeffs": [1.0]}, "only used"),
        ({"mask": np.ones((2, 2))}, "boolean"),
        ({"mask": np.ones((3, 3), bool)}, "does not broadcast"),
    ],
)
def test_bad_input_raises(kwargs, message):
    args = {"y": np.ones((2, 2)), "b": np.ones((2, 2)), "w_v": np.eye(2)}
    args.update(kwargs)
    y, b, w_v = args.pop("y"), args.pop("b"), args.pop("w_v")
    with pytest.raises(ValueError, match=message):
        gam_attention(y, b, w_v, **args)


# ---- unit-variance initialisation ----------------------------------------------------------


def test_gaussian_moments_closed_forms():
    from attnlab.gam_init import _gaussian_abs_moment, _gaussian_moment

    assert math.isclose(_gaussian_abs_moment(1), math.sqrt(2 / math.pi))
    assert math.isclose(_gaussian_abs_moment(2), 1.0)
    assert math.isclose(_gaussian_abs_moment(4), 3.0)
    assert math.isclose(_gaussian_abs_moment(6), 15.0)
    assert _gaussian_moment(3) == 0.0 and math.isclose(_gaussian_moment(8), 105.0)


@pytest.mark.parametrize(
    ("f", "n1", "coeffs"),
    [("power", 1, None), ("power", 1.5, None), ("power", 2, None), ("poly", 1, (1.0, 0.5))],
)
def test_init_std_gives_unit_variance_logits(f, n1, coeffs):
    """Monte Carlo: standard-normal y, B ~ N(0, σ²); off-diagonal logits have variance ≈ 1."""
    rng = np.random.default_rng(8)
    m, n, draws = 16, 24, 150
    sigma = gam_init_std(m, f=f, n1=n1, coeffs=coeffs)
    off = ~np.eye(n, dtype=bool)
    samples = []
    for _ in range(draws):
        y = rng.normal(size=(n, m))
        b = rng.normal(size=(m, m)) * sigma
        samples.append(gam_logits(y, b, f=f, n1=n1, coeffs=coeffs)[0][off])
    var = np.var(np.concatenate(samples))
    assert 0.85 < var < 1.15, var
    # and the naive choice σ = 1/M is off for every f but the identity
    if (f, n1) != ("power", 1):
        assert abs(sigma * m - 1) > 0.3


def test_init_std_rejects_bad_input():
    with pytest.raises(ValueError, match="at least 1"):
        gam_init_std(0)
    with pytest.raises(ValueError, match="identically zero"):
        gam_init_std(4, f="poly", coeffs=(0.0, 0.0))
