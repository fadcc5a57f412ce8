"""Tests of the numpy attention core (:mod:`attnlab.attention`), chapters 02–04.

References: ``torch.nn.functional.scaled_dot_product_attention`` in float64, a float64 loop
that follows the definition one query and one key at a time, and hand-computed cases.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab import scaled_dot_product_attention, self_attention
from attnlab.exercises import check

# ---------------------------------------------------------------- independent references


def torch_reference(q, k, v, mask=None, scale=None):
    """Output of PyTorch's built-in attention (float64), as numpy."""
    t = [torch.from_numpy(np.ascontiguousarray(a, dtype=np.float64)) for a in (q, k, v)]
    full = np.broadcast_shapes(q.shape[:-1] + (k.shape[-2],), k.shape[:-2] + (1, 1))
    m = None if mask is None else torch.from_numpy(np.broadcast_to(mask, full).copy())
    return F.scaled_dot_product_attention(*t, attn_mask=m, scale=scale).numpy()


def loop_reference(q, k, v, mask=None, scale=None):
    """The definition, one (query, key) pair at a time, in float64, for 2-D inputs."""
    s_q, d_k = q.shape
    s_k = k.shape[0]
    c = 1 / math.sqrt(d_k) if scale is None else scale
    weights = np.zeros((s_q, s_k))
    out = np.zeros((s_q, v.shape[1]))
    for i in range(s_q):
        allowed = [j for j in range(s_k) if mask is None or mask[i, j]]
        if not allowed:
            continue
        logits = {j: c * sum(float(q[i, a]) * float(k[j, a]) for a in range(d_k)) for j in allowed}
        top = max(logits.values())
        total = sum(math.exp(x - top) for x in logits.values())
        for j in allowed:
            weights[i, j] = math.exp(logits[j] - top) / total
            out[i] += weights[i, j] * v[j]
    return out, weights


def causal(s_q: int, s_k: int) -> np.ndarray:
    """Query i may attend to keys 0..i (aligned at the start)."""
    return np.tril(np.ones((s_q, s_k), dtype=bool))


# ---------------------------------------------------------------- hand-computed cases


def test_two_keys_by_hand():
    # logits (scale ln 3): [ln 3, 0] -> weights [3/4, 1/4] -> 0.75*10 + 0.25*20 = 12.5
    out, w = scaled_dot_product_attention(
        [[1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]], [[10.0], [20.0]], scale=math.log(3.0)
    )
    np.testing.assert_allclose(w, [[0.75, 0.25]], rtol=1e-12)
    np.testing.assert_allclose(out, [[12.5]], rtol=1e-12)


def test_default_scale_is_inverse_sqrt_dk():
    # d_k = 4: q·k = 4 for the first key, 0 for the second; scaled logits [2, 0].
    q = np.array([[1.0, 1.0, 1.0, 1.0]])
    k = np.array([[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    _, w = scaled_dot_product_attention(q, k, np.eye(2))
    e2 = math.exp(2.0)
    np.testing.assert_allclose(w, [[e2 / (e2 + 1), 1 / (e2 + 1)]], rtol=1e-12)


def test_equal_keys_give_uniform_weights_and_the_mean_value():
    rng = np.random.default_rng(1)
    v = rng.normal(size=(5, 3))
    out, w = scaled_dot_product_attention(rng.normal(size=(4, 2)), np.ones((5, 2)), v)
    np.testing.assert_allclose(w, np.full((4, 5), 0.2), rtol=1e-12)
    np.testing.assert_allclose(out, np.tile(v.mean(axis=0), (4, 1)), rtol=1e-12)


# ---------------------------------------------------------------- against PyTorch, float64


@pytest.mark.parametrize("seed", range(12))
def test_matches_torch_on_random_shapes_with_batch_axes(seed):
    rng = np.random.default_rng(seed)
    batch = tuple(rng.integers(1, 4, size=rng.integers(0, 3)))
    s_q, s_k, d_k, d_v = (int(n) for n in rng.integers(1, 9, size=4))
    q = rng.normal(size=(*batch, s_q, d_k))
    k = rng.normal(size=(*batch, s_k, d_k))
    v = rng.normal(size=(*batch, s_k, d_v))
    out, w = scaled_dot_product_attention(q, k, v)
    assert out.shape == (*batch, s_q, d_v) and w.shape == (*batch, s_q, s_k)
    np.testing.assert_allclose(out, torch_reference(q, k, v), rtol=0, atol=1e-10)


@pytest.mark.parametrize("scale", [0.01, 0.37, 1.0, 2.5])
def test_matches_torch_with_explicit_scale(scale):
    rng = np.random.default_rng(7)
    q, k, v = (
        rng.normal(size=(2, 3, 6, 5)),
        rng.normal(size=(2, 3, 7, 5)),
        rng.normal(size=(2, 3, 7, 4)),
    )
    out, _ = scaled_dot_product_attention(q, k, v, scale=scale)
    np.testing.assert_allclose(out, torch_reference(q, k, v, scale=scale), rtol=0, atol=1e-10)


@pytest.mark.parametrize("seed", range(6))
def test_matches_torch_with_broadcast_masks(seed):
    rng = np.random.default_rng(100 + seed)
    q, k, v = (
        rng.normal(size=(2, 3, 5, 4)),
        rng.normal(size=(2, 3, 6, 4)),
        rng.normal(size=(2, 3, 6, 2)),
    )
    # One mask per key, shared by batch, heads and queries (padding), and a full random one.
    for shape in [(6,), (1, 1, 1, 6), (3, 1, 6), (5, 6), (2, 3, 5, 6)]:
        mask = rng.random(shape) < 0.7
        mask[..., 0] = True  # keep at least one key per query so torch is well defined
        out, w = scaled_dot_product_attention(q, k, v, mask=mask)
        np.testing.assert_allclose(out, torch_reference(q, k, v, mask=mask), rtol=0, atol=1e-10)
        assert np.all(w[~np.broadcast_to(mask, w.shape)] == 0.0)


def test_matches_torch_with_causal_mask():
    rng = np.random.default_rng(3)
    q, k, v = rng.normal(size=(4, 8, 6)), rng.normal(size=(4, 8, 6)), rng.normal(size=(4, 8, 3))
    out, w = scaled_dot_product_attention(q, k, v, mask=causal(8, 8))
    ref = F.scaled_dot_product_attention(
        *(torch.from_numpy(a) for a in (q, k, v)), is_causal=True
    ).numpy()
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-10)
    assert np.all(np.triu(w[0], 1) == 0.0)


def test_broadcast_batch_axes_match_a_loop():
    rng = np.random.default_rng(4)
    q = rng.normal(size=(3, 1, 4, 5))  # batch axes (3, 1)
    k = rng.normal(size=(1, 2, 6, 5))  # batch axes (1, 2)
    v = rng.normal(size=(6, 2))  # no batch axes
    out, w = scaled_dot_product_attention(q, k, v)
    assert out.shape == (3, 2, 4, 2) and w.shape == (3, 2, 4, 6)
    for a in range(3):
        for b in range(2):
            ref_out, ref_w = loop_reference(q[a, 0], k[0, b], v)
            np.testing.assert_allclose(out[a, b], ref_out, atol=1e-12)
            np.testing.assert_allclose(w[a, b], ref_w, atol=1e-12)


def test_matches_the_definition_loop_with_mask():
    rng = np.random.default_rng(5)
    q, k, v = rng.normal(size=(5, 3)), rng.normal(size=(7, 3)), rng.normal(size=(7, 2))
    mask = rng.random((5, 7)) < 0.5
    mask[2] = False  # one fully-masked query
    out, w = scaled_dot_product_attention(q, k, v, mask=mask, scale=0.8)
    ref_out, ref_w = loop_reference(q, k, v, mask=mask, scale=0.8)
    np.testing.assert_allclose(out, ref_out, atol=1e-12)
    np.testing.assert_allclose(w, ref_w, atol=1e-12)


def test_fully_masked_row_gives_zero_weights_and_zero_output():
    rng = np.random.default_rng(6)
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    mask = np.ones((3, 5), dtype=bool)
    mask[1] = False
    out, w = scaled_dot_product_attention(q, k, v, mask=mask)
    assert np.all(w[1] == 0.0) and np.all(out[1] == 0.0)
    assert not np.isnan(out).any()
    np.testing.assert_allclose(w[[0, 2]].sum(axis=-1), 1.0, atol=1e-12)


def test_self_attention_is_attention_of_projections():
    rng = np.random.default_rng(8)
    x = rng.normal(size=(2, 6, 5))
    w_q, w_k, w_v = rng.normal(size=(5, 3)), rng.normal(size=(5, 3)), rng.normal(size=(5, 4))
    out, w = self_attention(x, w_q, w_k, w_v, mask=causal(6, 6))
    ref = torch_reference(x @ w_q, x @ w_k, x @ w_v, mask=causal(6, 6))
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-10)
    assert out.shape == (2, 6, 4) and w.shape == (2, 6, 6)


def test_self_attention_matches_a_torch_linear_head():
    # nn.Linear stores (out, in): the row-convention matrix is its transpose.
    torch.manual_seed(0)
    x = torch.randn(7, 6, dtype=torch.float64)
    lin = [torch.nn.Linear(6, 4, bias=False, dtype=torch.float64) for _ in range(3)]
    with torch.no_grad():
        q, k, v = (m(x) for m in lin)
        ref = torch.softmax(q @ k.T / 2.0, dim=-1) @ v
    ws = [m.weight.detach().numpy().T for m in lin]
    out, _ = self_attention(x.numpy(), *ws)
    np.testing.assert_allclose(out, ref.numpy(), rtol=0, atol=1e-10)


# ---------------------------------------------------------------- dtypes and numerics


def test_float32_logits_of_magnitude_1e5_stay_finite_and_float32():
    rng = np.random.default_rng(9)
    q = (rng.normal(size=(4, 8)) * 300).astype(np.float32)
    k = (rng.normal(size=(6, 8)) * 300).astype(np.float32)
    v = rng.normal(size=(6, 3)).astype(np.float32)
    out, w = scaled_dot_product_attention(q, k, v, scale=1.0)
    assert np.abs(q @ k.T).max() > 1e5  # the logits really are that large
    assert out.dtype == np.float32 and w.dtype == np.float32
    assert np.isfinite(out).all() and np.isfinite(w).all()
    np.testing.assert_allclose(w.sum(axis=-1), 1.0, atol=1e-6)
    # With logits this far apart the softmax is one-hot on the largest logit.
    np.testing.assert_array_equal(w.argmax(axis=-1), (q @ k.T).argmax(axis=-1))
    np.testing.assert_allclose(w.max(axis=-1), 1.0, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_float_dtype_is_kept(dtype):
    rng = np.random.default_rng(10)
    q, k, v = (rng.normal(size=(3, 4)).astype(dtype) for _ in range(3))
    out, w = scaled_dot_product_attention(q, k, v, mask=causal(3, 3))
    assert out.dtype == dtype and w.dtype == dtype
    ref_out, _ = loop_reference(*(a.astype(np.float64) for a in (q, k, v)), mask=causal(3, 3))
    np.testing.assert_allclose(out, ref_out, atol={np.float16: 1e-2}.get(dtype, 1e-5))


def test_integers_become_float64():
    out, w = scaled_dot_product_attention([[1, 0]], [[1, 0], [0, 1]], [[1, 2], [3, 4]])
    assert out.dtype == np.float64 and w.dtype == np.float64


def test_float16_overflow_is_a_clear_error_not_nan():
    q = np.full((2, 16), 100.0, dtype=np.float16)  # q·k = 16 * 1e4 > 65504
    with pytest.raises(ValueError, match="overflowed in float16"):
        scaled_dot_product_attention(q, q, q, scale=1.0)


# ---------------------------------------------------------------- properties (hypothesis)

dims = st.integers(1, 6)


@st.composite
def qkv(draw):
    s_q, s_k, d_k, d_v = draw(dims), draw(dims), draw(dims), draw(dims)
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    spread = draw(st.sampled_from([0.1, 1.0, 10.0]))
    return (
        rng.normal(size=(s_q, d_k)) * spread,
        rng.normal(size=(s_k, d_k)) * spread,
        rng.normal(size=(s_k, d_v)),
        rng,
    )


@settings(max_examples=60, deadline=None)
@given(qkv())
def test_rows_are_convex_weights(case):
    q, k, v, _ = case
    out, w = scaled_dot_product_attention(q, k, v)
    assert np.all(w >= 0)
    np.testing.assert_allclose(w.sum(axis=-1), 1.0, atol=1e-12)
    # A convex combination stays inside the values' per-feature range.
    assert np.all(out <= v.max(axis=0) + 1e-9) and np.all(out >= v.min(axis=0) - 1e-9)


@settings(max_examples=60, deadline=None)
@given(qkv())
def test_permutation_equivariance(case):
    q, k, v, rng = case
    s = k.shape[0]
    x_q = q[: min(len(q), s)]
    # Self-attention form: queries, keys, values from one sequence x, permuted together.
    x = np.concatenate([k, v], axis=1)
    d_k = k.shape[1]
    w_q = rng.normal(size=(x.shape[1], d_k))
    w_k = rng.normal(size=(x.shape[1], d_k))
    w_v = rng.normal(size=(x.shape[1], 3))
    perm = rng.permutation(s)
    out, w = self_attention(x, w_q, w_k, w_v)
    out_p, w_p = self_attention(x[perm], w_q, w_k, w_v)
    np.testing.assert_allclose(out_p, out[perm], atol=1e-10)
    np.testing.assert_allclose(w_p, w[np.ix_(perm, perm)], atol=1e-12)
    # Cross-attention: permuting keys and values together changes nothing at all.
    out_kv, _ = scaled_dot_product_attention(x_q, k[perm], v[perm])
    np.testing.assert_allclose(out_kv, scaled_dot_product_attention(x_q, k, v)[0], atol=1e-10)


@settings(max_examples=60, deadline=None)
@given(qkv(), st.integers(0, 5))
def test_causal_output_ignores_later_keys_and_values(case, cut):
    q, k, v, rng = case
    s = min(len(q), len(k))
    q, k, v = q[:s], k[:s], v[:s]
    cut = min(cut, s - 1)
    mask = causal(s, s)
    out, _ = scaled_dot_product_attention(q, k, v, mask=mask)
    k2, v2 = k.copy(), v.copy()
    k2[cut + 1 :] = rng.normal(size=k2[cut + 1 :].shape) * 50
    v2[cut + 1 :] = rng.normal(size=v2[cut + 1 :].shape) * 50
    out2, _ = scaled_dot_product_attention(q, k2, v2, mask=mask)
    np.testing.assert_array_equal(out2[: cut + 1], out[: cut + 1])


@settings(max_examples=40, deadline=None)
@given(qkv(), st.floats(-50, 50))
def test_adding_a_constant_to_one_querys_logits_changes_nothing(case, shift):
    # softmax is shift-invariant. A constant feature 1 on every key, met by `shift` on every
    # query, adds shift·scale to a whole row of logits: the weights must not move.
    q, k, v, _ = case
    q2 = np.concatenate([q, np.full((len(q), 1), shift)], axis=1)
    k2 = np.concatenate([k, np.ones((len(k), 1))], axis=1)
    out, w = scaled_dot_product_attention(q, k, v, scale=0.5)
    out2, w2 = scaled_dot_product_attention(q2, k2, v, scale=0.5)
    np.testing.assert_allclose(w2, w, atol=1e-10)
    np.testing.assert_allclose(out2, out, atol=1e-9)


# ---------------------------------------------------------------- bad input


def good():
    rng = np.random.default_rng(11)
    return rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda q, k, v: (q[:, :3], k, v),
            r"share d_k: q has shape \(3, 3\), k has shape \(5, 4\)",
        ),
        (
            lambda q, k, v: (q, k, v[:4]),
            r"same length s_k: k has shape \(5, 4\), v has shape \(4, 2\)",
        ),
        (lambda q, k, v: (q[:0], k, v), r"empty sequence: q has shape \(0, 4\)"),
        (lambda q, k, v: (q, k[:0], v[:0]), r"empty sequence: .*k has shape \(0, 4\)"),
        (lambda q, k, v: (q[:, :0], k[:, :0], v), r"d_k = 0"),
        (lambda q, k, v: (q[0], k, v), r"q must have shape \(\.\.\., s, d\), got shape \(4,\)"),
        (
            lambda q, k, v: (np.stack([q, q]), np.stack([k] * 3), v),
            r"batch.*\(2, 3, 4\).*\(3, 5, 4\)",
        ),
        (lambda q, k, v: (q, k * np.nan, v), r"k contains NaN"),
        (lambda q, k, v: (q, k, v + 1j), r"v must hold real numbers"),
    ],
)
def test_bad_shapes_raise_value_error_naming_them(change, message):
    with pytest.raises(ValueError, match=message):
        scaled_dot_product_attention(*change(*good()))


@pytest.mark.parametrize(
    ("mask", "message"),
    [
        (np.ones((3, 4), dtype=bool), r"mask of shape \(3, 4\) does not broadcast .* \(3, 5\)"),
        (np.ones((2, 3, 5), dtype=bool), r"mask of shape \(2, 3, 5\) does not broadcast"),
        (np.ones((3, 5)), r"mask must be boolean .* float64"),
        (np.ones((3, 5), dtype=int), r"mask must be boolean"),
    ],
)
def test_bad_masks_raise(mask, message):
    with pytest.raises(ValueError, match=message):
        scaled_dot_product_attention(*good(), mask=mask)


@pytest.mark.parametrize("scale", [0.0, -1.0, math.inf, math.nan])
def test_bad_scale_raises(scale):
    with pytest.raises(ValueError, match="scale must be a positive finite number"):
        scaled_dot_product_attention(*good(), scale=scale)


@pytest.mark.parametrize(
    ("shapes", "message"),
    [
        (((4, 3), (5, 3), (4, 2)), r"w_k must have shape \(d, ·\) with d=4.*got shape \(5, 3\)"),
        (((4, 3), (4, 2), (4, 2)), r"w_q and w_k must share d_k: got shapes \(4, 3\) and \(4, 2\)"),
        (((4, 3), (4, 3), (2, 4, 2)), r"w_v must have shape"),
    ],
)
def test_self_attention_bad_weights(shapes, message):
    x = np.zeros((6, 4))
    with pytest.raises(ValueError, match=message):
        self_attention(x, *(np.zeros(s) for s in shapes))


def test_self_attention_rejects_a_vector():
    with pytest.raises(ValueError, match=r"x must have shape \(\.\.\., s, d\), got shape \(4,\)"):
        self_attention(np.zeros(4), np.zeros((4, 2)), np.zeros((4, 2)), np.zeros((4, 2)))


# ---------------------------------------------------------------- the chapters' exercise checks


def reference_answers():
    """Correct answers written independently of the checks, and one wrong answer each."""

    def soft_lookup(query, keys, values, temperature):  # 02.1
        z = keys @ query / temperature
        e = np.exp(z - z.max())
        return (e / e.sum()) @ values

    def stable_softmax(x):  # 02.2
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    def naive_softmax(x):  # 02.2, wrong: overflows for large logits
        with np.errstate(over="ignore", invalid="ignore"):
            return np.exp(x) / np.exp(x).sum(axis=-1, keepdims=True)

    def factorise(a, d_k):  # 03.4: a rank-<=d_k matrix as W_Q W_K^T, by the SVD
        u, sv, vt = np.linalg.svd(a)
        return u[:, :d_k] * sv[:d_k], vt[:d_k].T

    def causal_mask(s_q, s_k):  # 03.2: the queries are the last s_q of s_k positions
        return np.arange(s_q)[:, None] + (s_k - s_q) >= np.arange(s_k)[None, :]

    def left_padding_mask(lengths, s):  # 03.3
        return (np.arange(s)[None, :] >= s - np.asarray(lengths)[:, None])[:, None, :]

    def masked_softmax(logits, mask):  # 04.3
        z = np.where(mask, logits, np.finfo(logits.dtype).min)
        e = np.exp(z - z.max(axis=-1, keepdims=True)) * mask
        total = e.sum(axis=-1, keepdims=True)
        return np.divide(e, total, out=np.zeros_like(e), where=total > 0)

    def finfo_softmax(logits, mask):  # 04.3, wrong: a fully-masked row comes out uniform
        return stable_softmax(np.where(mask, logits, np.finfo(logits.dtype).min))

    return {
        "02.1": (soft_lookup, lambda q, k, v, t: soft_lookup(q, k, v, 1.0)),
        "02.2": (stable_softmax, naive_softmax),
        "03.2": (causal_mask, lambda s_q, s_k: np.tril(np.ones((s_q, s_k), dtype=bool))),
        "03.4": (factorise, lambda a, d_k: (a[:, :d_k], np.eye(len(a))[:, :d_k])),
        "03.3": (left_padding_mask, lambda lengths, s: left_padding_mask(lengths, s)[:, :, ::-1]),
        "04.3": (masked_softmax, finfo_softmax),
    }


@pytest.mark.parametrize("exercise_id", sorted(reference_answers()))
def test_exercise_checks_accept_right_and_reject_wrong_answers(exercise_id):
    right, wrong = reference_answers()[exercise_id]
    assert check(exercise_id, right, verbose=False)
    assert not check(exercise_id, wrong, verbose=False)
