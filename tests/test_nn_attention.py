"""Tests of the torch attention (:mod:`attnlab.nn.attention`), chapters 02–04.

Reference: ``torch.nn.functional.scaled_dot_product_attention`` in float64, forward and
backward, and ``torch.autograd.gradcheck`` (finite differences) for the gradients.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attnlab
from attnlab.nn import ScaledDotProductAttention, scaled_dot_product_attention

f64 = torch.float64


def random_qkv(seed, batch, s_q, s_k, d_k, d_v, dtype=f64):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(*batch, s_q, d_k, generator=g, dtype=dtype, requires_grad=True),
        torch.randn(*batch, s_k, d_k, generator=g, dtype=dtype, requires_grad=True),
        torch.randn(*batch, s_k, d_v, generator=g, dtype=dtype, requires_grad=True),
    )


def outputs_and_grads(fn, q, k, v, upstream):
    """Forward output and the gradients of ``<out, upstream>`` with respect to q, k, v."""
    out = fn(q, k, v)
    grads = torch.autograd.grad(out, (q, k, v), upstream)
    return out.detach(), grads


def assert_same_forward_and_backward(ours_fn, ref_fn, q, k, v, upstream):
    """Outputs and the gradients w.r.t. q, k, v agree to 1e-10 (float64)."""
    ours, g_ours = outputs_and_grads(ours_fn, q, k, v, upstream)
    ref, g_ref = outputs_and_grads(ref_fn, q, k, v, upstream)
    torch.testing.assert_close(ours, ref, rtol=0, atol=1e-10)
    for name, a, b in zip("qkv", g_ours, g_ref, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10, msg=f"gradient of {name}")


@pytest.mark.parametrize("seed", range(8))
def test_forward_and_backward_match_torch(seed):
    rng = np.random.default_rng(seed)
    batch = tuple(int(n) for n in rng.integers(1, 4, size=rng.integers(0, 3)))
    s_q, s_k, d_k, d_v = (int(n) for n in rng.integers(1, 9, size=4))
    scale = [None, 0.3, 1.7][seed % 3]
    q, k, v = random_qkv(seed, batch, s_q, s_k, d_k, d_v)
    upstream = torch.randn(*batch, s_q, d_v, dtype=f64)
    assert_same_forward_and_backward(
        lambda *a: scaled_dot_product_attention(*a, scale=scale)[0],
        lambda *a: F.scaled_dot_product_attention(*a, scale=scale),
        q,
        k,
        v,
        upstream,
    )


@pytest.mark.parametrize("mask_shape", [(7,), (1, 7), (5, 7), (3, 1, 7), (2, 3, 5, 7)])
def test_masks_match_torch_forward_and_backward(mask_shape):
    q, k, v = random_qkv(1, (2, 3), 5, 7, 4, 3)
    g = torch.Generator().manual_seed(2)
    mask = torch.rand(mask_shape, generator=g) < 0.6
    mask[..., 0] = True
    full_mask = mask.expand(2, 3, 5, 7)
    upstream = torch.randn(2, 3, 5, 3, dtype=f64, generator=g)
    assert_same_forward_and_backward(
        lambda *a: scaled_dot_product_attention(*a, mask=mask)[0],
        lambda *a: F.scaled_dot_product_attention(*a, attn_mask=full_mask),
        q,
        k,
        v,
        upstream,
    )


def test_causal_mask_matches_is_causal():
    q, k, v = random_qkv(3, (4,), 6, 6, 5, 2)
    causal = torch.ones(6, 6, dtype=torch.bool).tril()
    upstream = torch.randn(4, 6, 2, dtype=f64)
    assert_same_forward_and_backward(
        lambda *a: scaled_dot_product_attention(*a, mask=causal)[0],
        lambda *a: F.scaled_dot_product_attention(*a, is_causal=True),
        q,
        k,
        v,
        upstream,
    )


def test_gradcheck_float64_with_mask_and_a_fully_masked_row():
    q, k, v = random_qkv(4, (2,), 4, 5, 3, 2)
    mask = torch.rand(4, 5, generator=torch.Generator().manual_seed(5)) < 0.6
    mask[:, 1] = True
    mask[2] = False  # one query sees nothing: its output is 0 and its gradient must be 0 too

    def fn(q, k, v):
        out, weights = scaled_dot_product_attention(q, k, v, mask=mask, scale=0.8)
        return out, weights

    assert torch.autograd.gradcheck(fn, (q, k, v), eps=1e-6, atol=1e-8)
    assert torch.autograd.gradgradcheck(lambda *a: fn(*a)[0], (q, k, v), eps=1e-6, atol=1e-6)


def test_fully_masked_row_is_zero_and_its_gradient_finite():
    q, k, v = random_qkv(6, (), 3, 4, 2, 2)
    mask = torch.ones(3, 4, dtype=torch.bool)
    mask[0] = False
    out, w = scaled_dot_product_attention(q, k, v, mask=mask)
    assert torch.all(out[0] == 0) and torch.all(w[0] == 0)
    out.sum().backward()
    assert torch.all(q.grad[0] == 0)
    for t in (q, k, v):
        assert torch.isfinite(t.grad).all()
    # torch's built-in agrees on the zero output (torch 2.13).
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-10)


def test_weights_match_the_numpy_core():
    q, k, v = random_qkv(7, (2, 2), 5, 6, 4, 3)
    mask = torch.ones(5, 6, dtype=torch.bool).tril()
    out, w = scaled_dot_product_attention(q, k, v, mask=mask)
    out_np, w_np = attnlab.scaled_dot_product_attention(
        *(t.detach().numpy() for t in (q, k, v)), mask=mask.numpy()
    )
    np.testing.assert_allclose(w.detach().numpy(), w_np, rtol=0, atol=1e-12)
    np.testing.assert_allclose(out.detach().numpy(), out_np, rtol=0, atol=1e-12)


def test_float32_large_logits_stay_finite():
    q, k, v = (t.detach().float() * 300 for t in random_qkv(8, (), 4, 6, 8, 3))
    out, w = scaled_dot_product_attention(q, k, v, scale=1.0)
    assert (q @ k.T).abs().max() > 1e5
    assert out.dtype == torch.float32 and torch.isfinite(out).all() and torch.isfinite(w).all()
    torch.testing.assert_close(w.sum(-1), torch.ones(4))


def test_module_wraps_the_function():
    q, k, v = random_qkv(9, (3,), 4, 4, 6, 2)
    mask = torch.ones(4, 4, dtype=torch.bool).tril()
    out, w = ScaledDotProductAttention(scale=0.5)(q, k, v, mask)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.5)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-10)
    assert not list(ScaledDotProductAttention().parameters())
    assert "scale=0.5" in repr(ScaledDotProductAttention(scale=0.5))


# ---------------------------------------------------------------- bad input


def good():
    return (t.detach() for t in random_qkv(10, (), 3, 5, 4, 2))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda q, k, v: (q[:, :3], k, v), r"share d_k: q has shape \(3, 3\), k .*\(5, 4\)"),
        (lambda q, k, v: (q, k, v[:4]), r"same length s_k: k has shape \(5, 4\), v .*\(4, 2\)"),
        (lambda q, k, v: (q[:0], k, v), r"empty sequence: q has shape \(0, 4\)"),
        (lambda q, k, v: (q, k[:0], v[:0]), r"empty sequence: .*k has shape \(0, 4\)"),
        (lambda q, k, v: (q[:, :0], k[:, :0], v), r"d_k = 0"),
        (lambda q, k, v: (q[0], k, v), r"q must have shape \(\.\.\., s, d\), got shape \(4,\)"),
        (lambda q, k, v: (q.expand(2, 3, 4), k.expand(3, 5, 4), v), r"batch.*\(2, 3, 4\)"),
        (lambda q, k, v: (q, k.float(), v), r"share one dtype"),
        (lambda q, k, v: (q.long(), k.long(), v.long()), r"floating-point"),
    ],
)
def test_bad_input_raises_value_error_naming_shapes(change, message):
    with pytest.raises(ValueError, match=message):
        scaled_dot_product_attention(*change(*good()))


@pytest.mark.parametrize(
    ("mask", "message"),
    [
        (torch.ones(3, 4, dtype=torch.bool), r"mask of shape \(3, 4\) does not broadcast"),
        (torch.ones(2, 3, 5, dtype=torch.bool), r"mask of shape \(2, 3, 5\) does not broadcast"),
        (torch.ones(3, 5), r"mask must be boolean"),
    ],
)
def test_bad_mask_raises(mask, message):
    with pytest.raises(ValueError, match=message):
        scaled_dot_product_attention(*good(), mask=mask)


@pytest.mark.parametrize("scale", [0.0, -2.0, math.inf, math.nan])
def test_bad_scale_raises(scale):
    with pytest.raises(ValueError, match="positive finite"):
        scaled_dot_product_attention(*good(), scale=scale)
    with pytest.raises(ValueError, match="positive finite"):
        ScaledDotProductAttention(scale=scale)


def test_a_padding_mask_that_empties_one_item_only_zeroes_that_item():
    """Rows with keys left take the fast path's exact zeros; the empty item still gets zeros."""
    q, k, v = random_qkv(8, (3, 2), 4, 6, 5, 3)  # (b, h, n, d)
    lengths = torch.tensor([6, 0, 2])  # item 1 has no key at all
    mask = (torch.arange(6) < lengths[:, None])[:, None, None, :]  # (b, 1, 1, s_k)
    out, w = scaled_dot_product_attention(q, k, v, mask=mask)
    assert torch.all(out[1] == 0) and torch.all(w[1] == 0)
    assert torch.all(w[2, ..., 2:] == 0)  # exactly zero, not merely small
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-10)
    upstream = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), upstream)
    ref_grads = torch.autograd.grad(ref, (q, k, v), upstream)
    for a, b in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10)
    assert torch.all(grads[0][1] == 0)
