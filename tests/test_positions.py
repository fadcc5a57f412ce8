"""Tests of attnlab.positions against float64 loops over the papers' equations and torch."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab import (
    combine_geometric,
    combine_linear,
    convolution_as_attention,
    convolution_attention_params,
    gam_position_weights,
    gam_relative_attention,
    gam_relative_vectors,
    local_context,
    relative_position_index,
    shaw_attention,
    sinusoidal_positions,
    sinusoidal_shift_matrix,
)
from attnlab.positions import circular_offsets

# ---- sinusoidal -----------------------------------------------------------------------------


def loop_sinusoidal(n: int, d: int) -> np.ndarray:
    """Vaswani et al.'s formula, one entry at a time with math.sin / math.cos."""
    out = np.zeros((n, d))
    for pos in range(n):
        for i in range(d // 2):
            angle = pos / 10000 ** (2 * i / d)
            out[pos, 2 * i] = math.sin(angle)
            out[pos, 2 * i + 1] = math.cos(angle)
    return out


@pytest.mark.parametrize(("n", "d"), [(1, 2), (7, 4), (50, 16), (3, 64)])
def test_sinusoidal_matches_loop(n, d):
    np.testing.assert_allclose(sinusoidal_positions(n, d), loop_sinusoidal(n, d), atol=1e-12)


def test_sinusoidal_shift_is_linear_and_rotation():
    pe = sinusoidal_positions(60, 10)
    for k in (1, 3, 17):
        m = sinusoidal_shift_matrix(k, 10)
        np.testing.assert_allclose(pe[:-k] @ m, pe[k:], atol=1e-12)
        np.testing.assert_allclose(m @ m.T, np.eye(10), atol=1e-12)
    # M_a M_b = M_{a+b}: shifts compose
    np.testing.assert_allclose(
        sinusoidal_shift_matrix(2, 8) @ sinusoidal_shift_matrix(5, 8),
        sinusoidal_shift_matrix(7, 8),
        atol=1e-12,
    )


def test_sinusoidal_dot_product_depends_on_distance_only():
    pe = sinusoidal_positions(40, 16)
    gram = pe @ pe.T
    for k in range(5):
        diag = np.diagonal(gram, offset=k)
        np.testing.assert_allclose(diag, diag[0], atol=1e-12)


@pytest.mark.parametrize(("n", "d"), [(4, 3), (4, 7), (4, 0), (-1, 4)])
def test_sinusoidal_bad_sizes(n, d):
    with pytest.raises(ValueError, match="d must|n must"):
        sinusoidal_positions(n, d)


def test_shift_matrix_odd_d():
    with pytest.raises(ValueError, match="even"):
        sinusoidal_shift_matrix(1, 5)


# ---- Shaw -----------------------------------------------------------------------------------


def test_relative_index_matches_loop():
    for n, k_max in [(1, 0), (5, 0), (6, 2), (4, 10)]:
        expected = np.zeros((n, n), dtype=int)
        for i in range(n):
            for j in range(n):
                expected[i, j] = max(-k_max, min(k_max, j - i)) + k_max
        np.testing.assert_array_equal(relative_position_index(n, k_max=k_max), expected)


def test_relative_index_tensor2tensor_and_hf_conventions():
    # tensor2tensor: distance_mat = range[None, :] - range[:, None] (j - i); Hugging Face's
    # relative_key: position_ids_l - position_ids_r (i - j) + max_len - 1: the transpose.
    n = 6
    rng = np.arange(n)
    hf = (rng[:, None] - rng[None, :]) + n - 1
    np.testing.assert_array_equal(relative_position_index(n, n - 1).T, hf)


@pytest.mark.parametrize("k_max", [-1, -5])
def test_relative_index_negative_k_max(k_max):
    with pytest.raises(ValueError, match="k_max .the clipping distance"):
        relative_position_index(4, k_max)


def loop_shaw(q, k, v, a_k, a_v, mask=None):
    """Shaw et al. eq. 2-4 in float64, one query and one key at a time."""
    s, d_k = q.shape
    clip = a_k.shape[0] // 2
    out = np.zeros((s, v.shape[1]))
    weights = np.zeros((s, s))
    for i in range(s):
        logits = np.full(s, -np.inf)
        for j in range(s):
            if mask is not None and not mask[i, j]:
                continue
            w = max(-clip, min(clip, j - i)) + clip
            logits[j] = q[i] @ (k[j] + a_k[w]) / math.sqrt(d_k)
        if np.all(np.isinf(logits)):
            continue
        e = np.exp(logits - logits.max())
        weights[i] = e / e.sum()
        for j in range(s):
            w = max(-clip, min(clip, j - i)) + clip
            out[i] += weights[i, j] * (v[j] + a_v[w])
    return out, weights


@settings(max_examples=30, deadline=None)
@given(
    s=st.integers(1, 8),
    d_k=st.integers(1, 4),
    d_v=st.integers(1, 3),
    clip=st.integers(0, 4),
    seed=st.integers(0, 2**31),
)
def test_shaw_attention_matches_loop(s, d_k, d_v, clip, seed):
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(s, d_k)), rng.normal(size=(s, d_k))
    v = rng.normal(size=(s, d_v))
    a_k, a_v = rng.normal(size=(2 * clip + 1, d_k)), rng.normal(size=(2 * clip + 1, d_v))
    mask = rng.random((s, s)) < 0.7
    for m in (None, mask):
        out, w = shaw_attention(q, k, v, a_k, a_v, mask=m)
        ref_out, ref_w = loop_shaw(q, k, v, a_k, a_v, m)
        np.testing.assert_allclose(w, ref_w, atol=1e-12)
        np.testing.assert_allclose(out, ref_out, atol=1e-12)


def test_shaw_zero_tables_is_plain_attention():
    rng = np.random.default_rng(1)
    q, k, v = (torch.tensor(rng.normal(size=(2, 3, 5, 4))) for _ in range(3))
    out, _ = shaw_attention(q.numpy(), k.numpy(), v.numpy(), np.zeros((5, 4)), np.zeros((5, 4)))
    np.testing.assert_allclose(out, F.scaled_dot_product_attention(q, k, v).numpy(), atol=1e-12)


def test_shaw_fully_masked_row_is_zero():
    rng = np.random.default_rng(2)
    q, k, v = rng.normal(size=(3, 2)), rng.normal(size=(3, 2)), rng.normal(size=(3, 2))
    mask = np.ones((3, 3), dtype=bool)
    mask[1] = False
    out, w = shaw_attention(q, k, v, rng.normal(size=(3, 2)), rng.normal(size=(3, 2)), mask)
    assert np.all(w[1] == 0) and np.all(out[1] == 0) and np.all(np.isfinite(out))


def test_shaw_bad_input():
    q = np.zeros((3, 2))
    with pytest.raises(ValueError, match="odd"):
        shaw_attention(q, q, q, np.zeros((2, 2)), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="table widths"):
        shaw_attention(q, q, q, np.zeros((3, 5)), np.zeros((3, 2)))
    with pytest.raises(ValueError, match="one length"):
        shaw_attention(q, np.zeros((4, 2)), np.zeros((4, 2)), np.zeros((3, 2)), np.zeros((3, 2)))
    with pytest.raises(ValueError, match="boolean"):
        shaw_attention(q, q, q, np.zeros((3, 2)), np.zeros((3, 2)), mask=np.ones((3, 3)))


# ---- GAM relative positions -----------------------------------------------------------------


def counted_relative_vectors(corpus: list[str], window: list[int]) -> np.ndarray:
    """Eq. 28-29 literally: 1 on the diagonal, else 2 + the corpus words strictly between."""
    n = len(window)
    r = np.zeros((n, n), dtype=int)
    for a in range(n):
        for i in range(n):
            if a == i:
                r[a, i] = 1
            else:
                lo, hi = sorted((window[a], window[i]))
                between = corpus[lo + 1 : hi]
                r[a, i] = 2 + len(between)
    return r


def test_gam_paper_examples():
    # Pandya 2022, eq. 30-41, corpus "My name is Vikram".
    np.testing.assert_array_equal(
        gam_relative_vectors([0, 1, 2]), [[1, 2, 3], [2, 1, 2], [3, 2, 1]]
    )
    np.testing.assert_array_equal(
        gam_relative_vectors([0, 1, 3]), [[1, 2, 4], [2, 1, 3], [4, 3, 1]]
    )


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=1, max_size=8, unique=True), st.integers(-50, 50))
def test_gam_vectors_count_symmetry_shift(positions, shift):
    positions = sorted(positions)
    corpus = [f"w{i}" for i in range(41)]
    r = gam_relative_vectors(positions)
    np.testing.assert_array_equal(r, counted_relative_vectors(corpus, positions))
    np.testing.assert_array_equal(r, r.T)
    np.testing.assert_array_equal(gam_relative_vectors(np.array(positions) + shift), r)


@pytest.mark.parametrize(
    "positions", [[0, 2, 1], [0, 1, 1], [3, 2], [], [[0, 1]], [0.0, 1.0], [0.0, 1.5]]
)
def test_gam_vectors_bad_positions(positions):
    with pytest.raises(ValueError, match="positions"):
        gam_relative_vectors(positions)


def loop_gam_head(y, p, b, b_p, w_v, mix, mix_s, n1):
    """Pandya eq. 13-16 and 21-24 in float64 loops (power-law f with the signed power)."""

    def f(x):
        return math.copysign(abs(x) ** n1, x) if not float(n1).is_integer() else x**n1

    def mixed_softmax(u, brains, weights):
        n, m = u.shape
        out = np.zeros((n, n))
        for i in range(brains.shape[0]):
            logits = np.zeros((n, n))
            for a in range(n):
                for c in range(n):
                    logits[a, c] = sum(
                        f(u[a, r] * u[c, t]) * brains[i, r, t] for r in range(m) for t in range(m)
                    )
            e = np.exp(logits - logits.max(axis=1, keepdims=True))
            out += weights[i] * e / e.sum(axis=1, keepdims=True)
        return out

    phi = mixed_softmax(y, b, mix)
    theta = mixed_softmax(p, b_p, mix_s)
    values = y @ w_v
    return phi @ values, theta @ values, phi, theta


@pytest.mark.parametrize("n1", [1, 2, 1.5])
def test_gam_relative_attention_matches_loop(n1):
    rng = np.random.default_rng(3)
    n, m, n_b = 4, 3, 2
    y, w_v = rng.normal(size=(n, m)), rng.normal(size=(m, 2))
    p = gam_relative_vectors([0, 2, 3, 7]) @ rng.normal(size=(n, m)) * 0.3
    b, b_p = rng.normal(size=(n_b, m, m)) * 0.3, rng.normal(size=(n_b, m, m)) * 0.3
    mix, mix_s = np.array([0.3, 0.7]), np.array([0.9, 0.1])
    z, pi, phi_ref, theta_ref = loop_gam_head(y, p, b, b_p, w_v, mix, mix_s, n1)
    kw = dict(n1=n1, mix=mix, mix_s=mix_s)
    out, phi, theta = gam_relative_attention(y, p, b, b_p, w_v, c1=0.3, **kw)
    np.testing.assert_allclose(phi, phi_ref, atol=1e-12)
    np.testing.assert_allclose(theta, theta_ref, atol=1e-12)
    np.testing.assert_allclose(out, 0.3 * z + 0.7 * pi, atol=1e-12)
    geo, _, _ = gam_relative_attention(y, p, b, b_p, w_v, combine="geometric", **kw)
    prod = z * pi
    expected = np.where(prod >= 0, np.sign(z) * np.sqrt(np.abs(prod)), 0.0)
    np.testing.assert_allclose(geo, expected, atol=1e-12)
    np.testing.assert_allclose(
        gam_position_weights(p, b_p, n1=n1, mix_s=mix_s), theta_ref, atol=1e-12
    )


def test_theta_rows_are_probabilities_and_mask():
    rng = np.random.default_rng(4)
    p = rng.normal(size=(5, 3))
    mask = np.tril(np.ones((5, 5), dtype=bool))
    theta = gam_position_weights(p, rng.normal(size=(3, 3, 3)), n1=2, mask=mask)
    np.testing.assert_allclose(theta.sum(axis=1), 1.0)
    assert np.all(theta >= 0) and np.all(theta[~mask] == 0)


@pytest.mark.parametrize("mix_s", [[-0.5, 1.5], [0.3, 0.3], [1.0]])
def test_ws_constrained_like_wp(mix_s):
    with pytest.raises(ValueError, match="mix"):
        gam_position_weights(np.ones((3, 2)), np.ones((2, 2, 2)), mix_s=mix_s)


@pytest.mark.parametrize("c1", [0.0, 1.0, -0.2, 1.5, float("nan")])
def test_c1_outside_open_interval(c1):
    with pytest.raises(ValueError, match="c1"):
        combine_linear(np.ones(2), np.ones(2), c1)
    y = np.ones((2, 2))
    with pytest.raises(ValueError, match="c1"):
        gam_relative_attention(y, y, np.eye(2), np.eye(2), np.eye(2), c1=c1)


def test_gam_relative_attention_bad_shapes():
    with pytest.raises(ValueError, match="shape of y"):
        gam_relative_attention(np.ones((3, 2)), np.ones((2, 2)), np.eye(2), np.eye(2), np.eye(2))
    with pytest.raises(ValueError, match="combine"):
        gam_relative_attention(
            np.ones((2, 2)), np.ones((2, 2)), np.eye(2), np.eye(2), np.eye(2), combine="mean"
        )


@settings(max_examples=50, deadline=None)
@given(st.floats(-100, 100), st.floats(-100, 100))
def test_geometric_rule_properties(z, pi):
    g = float(combine_geometric(np.array([z]), np.array([pi]))[0])
    assert min(z, pi) - 1e-9 <= g <= max(z, pi) + 1e-9  # a mean lies between its arguments
    assert g == pytest.approx(-float(combine_geometric(np.array([-z]), np.array([-pi]))[0]))
    if z >= 0 and pi >= 0:
        assert g == pytest.approx(math.sqrt(z * pi))  # eq. 25 where it is defined
    if z * pi < 0:
        assert g == 0.0


# ---- convolution as attention ---------------------------------------------------------------


def test_circular_offsets_are_signed_distances_mod_s():
    for s in (1, 2, 5, 6):
        delta = circular_offsets(s)
        i, j = np.meshgrid(np.arange(s), np.arange(s), indexing="ij")
        assert np.all((delta - (j - i)) % s == 0)
        assert np.all(np.abs(delta) <= s // 2)


@settings(max_examples=30, deadline=None)
@given(half=st.integers(0, 3), extra=st.integers(0, 5), seed=st.integers(0, 2**31))
def test_hard_convolution_attention_equals_local_context(half, extra, seed):
    rng = np.random.default_rng(seed)
    s = 2 * half + 1 + extra
    x, kernel = rng.normal(size=(s, 3)), rng.normal(size=(2 * half + 1, 3, 2))
    out, weights = convolution_as_attention(x, kernel)
    np.testing.assert_allclose(out, local_context(x, kernel), atol=1e-12)
    assert np.all(weights.sum(axis=-1) == 1) and np.all((weights == 0) | (weights == 1))


@pytest.mark.parametrize("alpha", [5.0, 10.0, 20.0])
def test_soft_convolution_attention_within_bound(alpha):
    rng = np.random.default_rng(5)
    s, half = 9, 2
    x, kernel = rng.normal(size=(s, 3)), rng.normal(size=(2 * half + 1, 3, 4))
    out, _ = convolution_as_attention(x, kernel, alpha=alpha)
    values = np.einsum("sd,cde->cse", x, kernel)
    bound = 2 * (s - 1) * math.exp(-alpha) * np.abs(values).max(axis=1).sum(axis=0)
    error = np.abs(out - local_context(x, kernel)).max(axis=0)
    assert np.all(error <= bound)
    assert error.max() > 0  # the quadratic encoding is only approximately one-hot


def test_convolution_attention_against_torch_sdpa():
    # Positional heads = attention with zero queries and keys plus an additive logit bias.
    rng = np.random.default_rng(6)
    s, half, d_in, d_out = 7, 1, 2, 3
    x, kernel = rng.normal(size=(s, d_in)), rng.normal(size=(2 * half + 1, d_in, d_out))
    logits, w_v, w_o = convolution_attention_params(kernel, s, alpha=3.0)
    v = torch.tensor(np.einsum("sd,hde->hse", x, w_v))
    zeros = torch.zeros(2 * half + 1, s, 1, dtype=torch.float64)
    heads = F.scaled_dot_product_attention(zeros, zeros, v, attn_mask=torch.tensor(logits))
    expected = torch.cat(list(heads), dim=-1).numpy() @ w_o
    out, _ = convolution_as_attention(x, kernel, alpha=3.0)
    np.testing.assert_allclose(out, expected, atol=1e-12)


def test_convolution_attention_bad_input():
    with pytest.raises(ValueError, match="offsets"):
        convolution_attention_params(np.ones((5, 1, 1)), s=4)
    with pytest.raises(ValueError, match="odd"):
        convolution_attention_params(np.ones((4, 1, 1)), s=6)
    with pytest.raises(ValueError, match="alpha"):
        convolution_attention_params(np.ones((3, 1, 1)), s=6, alpha=-1.0)
    with pytest.raises(ValueError, match="width"):
        convolution_as_attention(np.ones((5, 2)), np.ones((3, 1, 1)))
