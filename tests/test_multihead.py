"""Tests of attnlab.multihead: the numpy multi-head attention and the head split/merge."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab import merge_heads, multi_head_attention, split_heads


def _naive(x, w_q, w_k, w_v, w_o, mask=None):
    """float64 loops over heads, queries and keys: the formula written out term by term."""
    h, _, d_k = w_q.shape
    s = x.shape[0]
    d_v = w_v.shape[2]
    weights = np.zeros((h, s, s))
    concat = np.zeros((s, h * d_v))
    allow = np.ones((h, s, s), bool) if mask is None else np.broadcast_to(mask, (h, s, s))
    for head in range(h):
        q, k, v = x @ w_q[head], x @ w_k[head], x @ w_v[head]
        for i in range(s):
            allowed = [j for j in range(s) if allow[head, i, j]]
            if not allowed:
                continue
            logits = np.array([q[i] @ k[j] / np.sqrt(d_k) for j in allowed])
            e = np.exp(logits - logits.max())
            for j, w in zip(allowed, e / e.sum(), strict=True):
                weights[head, i, j] = w
                concat[i, head * d_v : (head + 1) * d_v] += w * v[j]
    return concat @ w_o, weights


def _random_weights(rng, h, d, d_k, d_v, d_out):
    return (
        rng.standard_normal((h, d, d_k)),
        rng.standard_normal((h, d, d_k)),
        rng.standard_normal((h, d, d_v)),
        rng.standard_normal((h * d_v, d_out)),
    )


def _torch_reference(x, h, seed):
    """An nn.MultiheadAttention without biases (float64), and its weights in stacked form."""
    torch.manual_seed(seed)
    s, d = x.shape
    mha = torch.nn.MultiheadAttention(d, h, bias=False, batch_first=True, dtype=torch.float64)
    w_in = mha.in_proj_weight.detach().numpy()  # (3d, d), rows = output features
    d_k = d // h
    # Our (h, d, d_k) slice i is the transpose of rows i*d_k:(i+1)*d_k of each (d, d) block.
    stacks = [
        np.stack([w_in[b * d + i * d_k : b * d + (i + 1) * d_k].T for i in range(h)])
        for b in range(3)
    ]
    w_o = mha.out_proj.weight.detach().numpy().T
    return mha, (*stacks, w_o)


@pytest.mark.parametrize(
    ("s", "d", "h"), [(5, 48, 4), (1, 8, 1), (9, 12, 3), (6, 16, 8), (16, 48, 4)]
)
def test_matches_torch_multihead_attention(s, d, h):
    x = np.random.default_rng(s * d + h).standard_normal((s, d))
    mha, weights = _torch_reference(x, h, seed=s + d + h)
    out, w = multi_head_attention(x, *weights)
    xt = torch.tensor(x).unsqueeze(0)
    ref_out, ref_w = mha(xt, xt, xt, average_attn_weights=False)
    np.testing.assert_allclose(out, ref_out[0].detach().numpy(), atol=1e-12)
    np.testing.assert_allclose(w, ref_w[0].detach().numpy(), atol=1e-12)
    assert out.shape == (s, d) and w.shape == (h, s, s)


def test_mask_matches_torch_on_rows_that_are_not_fully_masked():
    rng = np.random.default_rng(3)
    s, d, h = 7, 48, 4
    x = rng.standard_normal((s, d))
    mask = rng.random((s, s)) < 0.5
    mask[2] = False  # a query with no allowed key
    mha, weights = _torch_reference(x, h, seed=1)
    out, w = multi_head_attention(x, *weights, mask=mask)
    xt = torch.tensor(x).unsqueeze(0)
    # torch's boolean attn_mask means "masked out": invert explicitly.
    ref_out, ref_w = mha(xt, xt, xt, attn_mask=torch.tensor(~mask), average_attn_weights=False)
    ref_out, ref_w = ref_out[0].detach().numpy(), ref_w[0].detach().numpy()
    rows = mask.any(axis=1)
    assert not rows[2] and rows.sum() == s - 1
    np.testing.assert_allclose(out[rows], ref_out[rows], atol=1e-12)
    np.testing.assert_allclose(w[:, rows], ref_w[:, rows], atol=1e-12)
    assert np.isnan(ref_out[2]).all()  # torch: NaN; the book: zeros
    np.testing.assert_array_equal(w[:, 2], 0.0)
    np.testing.assert_array_equal(out[2], 0.0)


def test_general_sizes_and_per_head_mask_match_naive_loops():
    rng = np.random.default_rng(4)
    s, d, h, d_k, d_v, d_out = 6, 5, 3, 4, 2, 7  # h does not divide d: fine for stacked weights
    x = rng.standard_normal((s, d))
    weights = _random_weights(rng, h, d, d_k, d_v, d_out)
    mask = rng.random((h, s, s)) < 0.6
    out, w = multi_head_attention(x, *weights, mask=mask)
    ref_out, ref_w = _naive(x, *weights, mask=mask)
    np.testing.assert_allclose(out, ref_out, atol=1e-12)
    np.testing.assert_allclose(w, ref_w, atol=1e-12)
    assert out.shape == (s, d_out)


def test_float32_is_kept():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    weights = [w.astype(np.float32) for w in _random_weights(rng, 2, 8, 4, 4, 8)]
    out, w = multi_head_attention(x, *weights)
    assert out.dtype == np.float32 and w.dtype == np.float32


@settings(max_examples=30, deadline=None)
@given(
    h=st.integers(1, 5),
    s=st.integers(1, 6),
    d_v=st.integers(1, 4),
    seed=st.integers(0, 2**32 - 1),
    data=st.data(),
)
def test_permuting_heads_permutes_output_blocks(h, s, d_v, seed, data):
    rng = np.random.default_rng(seed)
    d, d_k = 6, 3
    x = rng.standard_normal((s, d))
    w_q, w_k, w_v, _ = _random_weights(rng, h, d, d_k, d_v, 1)
    perm = np.array(data.draw(st.permutations(range(h))))
    eye = np.eye(h * d_v)  # W_O = I exposes the concatenated heads
    out, w = multi_head_attention(x, w_q, w_k, w_v, eye)
    out_p, w_p = multi_head_attention(x, w_q[perm], w_k[perm], w_v[perm], eye)
    blocks = out.reshape(s, h, d_v)
    np.testing.assert_allclose(out_p.reshape(s, h, d_v), blocks[:, perm], atol=1e-12)
    np.testing.assert_allclose(w_p, w[perm], atol=1e-12)
    # Permuting W_O's row blocks the same way leaves the layer unchanged.
    w_o = rng.standard_normal((h * d_v, 4))
    w_o_p = w_o.reshape(h, d_v, 4)[perm].reshape(h * d_v, 4)
    np.testing.assert_allclose(
        multi_head_attention(x, w_q[perm], w_k[perm], w_v[perm], w_o_p)[0],
        multi_head_attention(x, w_q, w_k, w_v, w_o)[0],
        atol=1e-10,
    )


def _buggy_merge(heads):
    """The reshape-before-transpose bug: (h, s, d_v) -> (s, h*d_v) without moving the heads."""
    h, s, d_v = heads.shape
    return heads.reshape(s, h * d_v)


def test_token_permutation_equivariance_catches_the_reshape_bug():
    rng = np.random.default_rng(6)
    s, d, h = 5, 8, 2
    x = rng.standard_normal((s, d))
    weights = _random_weights(rng, h, d, 4, 4, d)
    perm = np.array([4, 0, 3, 1, 2])
    out = multi_head_attention(x, *weights)[0]
    np.testing.assert_allclose(multi_head_attention(x[perm], *weights)[0], out[perm], atol=1e-12)
    heads = rng.standard_normal((h, s, 4))
    assert not np.allclose(_buggy_merge(heads), merge_heads(heads))
    # The same test fails for the buggy merge: a token's row mixes other tokens' heads.
    heads_p = heads[:, perm]
    assert not np.allclose(_buggy_merge(heads_p), _buggy_merge(heads)[perm])
    np.testing.assert_allclose(merge_heads(heads_p), merge_heads(heads)[perm])


def test_split_and_merge_heads():
    a = np.arange(24.0).reshape(2, 12)
    parts = split_heads(a, 3)
    assert parts.shape == (3, 2, 4)
    np.testing.assert_array_equal(parts[1], a[:, 4:8])
    np.testing.assert_array_equal(merge_heads(parts), a)
    batched = np.arange(48.0).reshape(2, 2, 12)
    np.testing.assert_array_equal(merge_heads(split_heads(batched, 4)), batched)


def test_split_heads_rejects_h_not_dividing_d():
    with pytest.raises(ValueError, match="h=5 heads do not divide the width 12"):
        split_heads(np.zeros((3, 12)), 5)
    with pytest.raises(ValueError, match="positive integer"):
        split_heads(np.zeros((3, 12)), 0)
    with pytest.raises(ValueError, match="shape"):
        split_heads(np.zeros(12), 2)
    with pytest.raises(ValueError, match="shape"):
        merge_heads(np.zeros((3, 4)))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"x": np.zeros((2, 3, 4))}, r"x must have shape \(s, d\)"),
        ({"w_q": np.zeros((2, 4, 3))}, "w_q and w_k must have the same shape"),
        ({"w_v": np.zeros((2, 5, 3))}, "the weights must be"),
        ({"w_o": np.zeros((5, 4))}, "w_o must have h\\*d_v = 2\\*3 = 6 rows"),
        ({"w_o": np.zeros(6)}, r"w_o must have shape"),
        ({"mask": np.ones((3, 4), bool)}, "mask must have shape"),
        ({"mask": np.ones((3, 3))}, "mask must be boolean"),
        ({"x": np.full((3, 4), np.nan)}, "NaN"),
        ({"x": np.zeros((0, 4))}, "empty"),
    ],
)
def test_bad_input_raises(change, message):
    args = {
        "x": np.zeros((3, 4)),
        "w_q": np.zeros((2, 4, 2)),
        "w_k": np.zeros((2, 4, 2)),
        "w_v": np.zeros((2, 4, 3)),
        "w_o": np.zeros((6, 4)),
        "mask": None,
    }
    args.update(change)
    with pytest.raises(ValueError, match=message):
        multi_head_attention(**args)
