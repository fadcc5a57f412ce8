"""Tests of attnlab.nn.multihead: MultiHeadAttention and AttentionHead against torch.nn."""

import numpy as np
import pytest
import torch
from torch import nn

from attnlab import self_attention
from attnlab.nn import AttentionHead, MultiHeadAttention, to_torch_attn_mask

F64 = torch.float64


def _reference(d, h, bias, seed):
    torch.manual_seed(seed)
    mha = nn.MultiheadAttention(d, h, bias=bias, batch_first=True, dtype=F64)
    if bias:  # torch initialises biases to zero: make them matter
        with torch.no_grad():
            mha.in_proj_bias.normal_()
            mha.out_proj.bias.normal_()
    return mha


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize(
    ("b", "s", "d", "h"), [(2, 5, 48, 4), (1, 16, 48, 4), (3, 4, 12, 3), (2, 7, 8, 1)]
)
def test_matches_torch_multihead_attention(b, s, d, h, bias):
    theirs = _reference(d, h, bias, seed=s + d)
    ours = MultiHeadAttention.from_torch(theirs)
    x = torch.randn(b, s, d, dtype=F64)
    out, w = ours(x, need_weights=True)
    ref_out, ref_w = theirs(x, x, x, average_attn_weights=False)
    torch.testing.assert_close(out, ref_out, atol=1e-12, rtol=0)
    torch.testing.assert_close(w, ref_w, atol=1e-12, rtol=0)
    assert w.shape == (b, h, s, s)
    torch.testing.assert_close(ours(x), ref_out, atol=1e-12, rtol=0)  # need_weights=False


def test_separate_context_matches_torch_cross_attention():
    theirs = _reference(12, 3, True, seed=0)
    ours = MultiHeadAttention.from_torch(theirs)
    x, c = torch.randn(2, 4, 12, dtype=F64), torch.randn(2, 6, 12, dtype=F64)
    out, w = ours(x, context=c, need_weights=True)
    ref_out, ref_w = theirs(x, c, c, average_attn_weights=False)
    torch.testing.assert_close(out, ref_out, atol=1e-12, rtol=0)
    torch.testing.assert_close(w, ref_w, atol=1e-12, rtol=0)


def test_unbatched_input():
    ours = MultiHeadAttention.from_torch(_reference(8, 2, True, seed=1))
    x = torch.randn(5, 8, dtype=F64)
    out, w = ours(x, need_weights=True)
    assert out.shape == (5, 8) and w.shape == (2, 5, 5)
    torch.testing.assert_close(out, ours(x.unsqueeze(0))[0])


@pytest.mark.parametrize("bias", [True, False])
def test_masks_match_torch_on_rows_that_are_not_fully_masked(bias):
    b, s, d, h = 2, 6, 48, 4
    theirs = _reference(d, h, bias, seed=2)
    ours = MultiHeadAttention.from_torch(theirs)
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(b, s, d, dtype=F64, generator=gen)
    mask = torch.rand(b, s, s, generator=gen) < 0.5  # the book: True = may attend
    mask[0, 1] = False  # query 1 of example 0 may attend nowhere
    out, w = ours(x, mask=mask, need_weights=True)
    # torch wants (b*h, s, s) with True = masked out: repeat per head, invert explicitly.
    attn_mask = to_torch_attn_mask(mask).repeat_interleave(h, dim=0)
    ref_out, ref_w = theirs(x, x, x, attn_mask=attn_mask, average_attn_weights=False)
    rows = mask.any(-1)  # (b, s): queries with at least one allowed key
    assert rows.sum() == b * s - 1
    torch.testing.assert_close(out[rows], ref_out[rows], atol=1e-12, rtol=0)
    torch.testing.assert_close(
        w.transpose(1, 2)[rows], ref_w.transpose(1, 2)[rows], atol=1e-12, rtol=0
    )
    assert torch.isnan(ref_out[0, 1]).all()  # torch gives NaN there
    assert (w[0, :, 1] == 0).all()  # the book: zero weights, zero head output
    expected = theirs.out_proj.bias if bias else torch.zeros(d, dtype=F64)
    torch.testing.assert_close(out[0, 1], expected.detach(), atol=1e-12, rtol=0)
    # need_weights=False takes the fused path: the same outputs, the fully-masked row included.
    torch.testing.assert_close(ours(x, mask=mask), out, atol=1e-12, rtol=0)


def test_fast_path_gradient_is_finite_on_a_fully_masked_row():
    ours = MultiHeadAttention(8, 2).double()
    x = torch.randn(1, 3, 8, dtype=F64, requires_grad=True)
    mask = torch.tensor([[True, False, True], [False, False, False], [True, True, True]])
    out_fast = ours(x, mask=mask)
    out_slow, _ = ours(x, mask=mask, need_weights=True)
    torch.testing.assert_close(out_fast, out_slow, atol=1e-12, rtol=0)
    (grad_fast,) = torch.autograd.grad(out_fast.square().sum(), x)
    (grad_slow,) = torch.autograd.grad(out_slow.square().sum(), x)
    assert torch.isfinite(grad_fast).all()
    torch.testing.assert_close(grad_fast, grad_slow, atol=1e-12, rtol=0)


def test_key_padding_mask_as_book_mask():
    b, s, d, h = 3, 5, 12, 3
    theirs = _reference(d, h, True, seed=4)
    ours = MultiHeadAttention.from_torch(theirs)
    x = torch.randn(b, s, d, dtype=F64)
    lengths = torch.tensor([5, 3, 1])
    padding = torch.arange(s) >= lengths[:, None]  # torch: True = padding, ignore
    out, w = ours(x, mask=~padding[:, None, :], need_weights=True)  # book: True = real key
    ref_out, ref_w = theirs(x, x, x, key_padding_mask=padding, average_attn_weights=False)
    torch.testing.assert_close(out, ref_out, atol=1e-12, rtol=0)
    torch.testing.assert_close(w, ref_w, atol=1e-12, rtol=0)


def test_causal_mask_shape_s_by_s():
    ours = MultiHeadAttention(8, 2).double()
    x = torch.randn(2, 4, 8, dtype=F64)
    causal = torch.tril(torch.ones(4, 4, dtype=torch.bool))
    out, w = ours(x, mask=causal, need_weights=True)
    assert (w.masked_select(~causal) == 0).all()
    # Changing the last token does not change the earlier outputs.
    x2 = x.clone()
    x2[:, -1] += 1.0
    torch.testing.assert_close(ours(x2, mask=causal)[:, :-1], out[:, :-1])


@pytest.mark.parametrize("bias", [True, False])
def test_round_trip_is_exact(bias):
    theirs = _reference(48, 4, bias, seed=5)
    back = MultiHeadAttention.from_torch(theirs).to_torch()
    assert back.batch_first
    theirs_state, back_state = theirs.state_dict(), back.state_dict()
    assert theirs_state.keys() == back_state.keys()
    for key, value in theirs_state.items():
        assert torch.equal(value, back_state[key]), key
    ours = MultiHeadAttention(48, 4, bias=bias)
    again = MultiHeadAttention.from_torch(ours.to_torch())
    for (name, p), (_, q) in zip(ours.named_parameters(), again.named_parameters(), strict=True):
        assert torch.equal(p, q), name


def test_from_torch_keeps_dtype_and_device():
    theirs = _reference(8, 2, True, seed=6)
    ours = MultiHeadAttention.from_torch(theirs)
    assert all(
        p.dtype == F64 and p.device == theirs.in_proj_weight.device for p in ours.parameters()
    )
    assert ours.to_torch().in_proj_weight.dtype == F64


def test_from_torch_rejects_what_it_cannot_copy():
    with pytest.raises(ValueError, match="kdim"):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(8, 2, kdim=4, vdim=4))
    with pytest.raises(ValueError, match="add_bias_kv"):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(8, 2, add_bias_kv=True))
    with pytest.raises(ValueError, match="dropout"):
        MultiHeadAttention.from_torch(nn.MultiheadAttention(8, 2, dropout=0.1))


def test_h_not_dividing_d_raises():
    with pytest.raises(ValueError, match="h=5 heads must divide the model width d=48"):
        MultiHeadAttention(48, 5)
    with pytest.raises(ValueError, match="positive integer"):
        MultiHeadAttention(48, 0)


def test_bad_forward_input_raises():
    ours = MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match=r"x must have shape \(b, s, d=8\)"):
        ours(torch.randn(2, 3, 6))
    with pytest.raises(ValueError, match="mask must be boolean"):
        ours(torch.randn(2, 3, 8), mask=torch.ones(3, 3))
    with pytest.raises(ValueError, match="does not broadcast"):
        ours(torch.randn(2, 3, 8), mask=torch.ones(4, 4, dtype=torch.bool))


def test_gradients_match_finite_differences():
    torch.manual_seed(7)
    ours = MultiHeadAttention(6, 2).double()
    x = torch.randn(1, 3, 6, dtype=F64, requires_grad=True)
    mask = torch.tensor([[True, False, True], [True, True, True], [False, False, True]])
    assert torch.autograd.gradcheck(lambda t: ours(t, mask=mask), (x,))


def test_attention_head_matches_numpy_self_attention():
    torch.manual_seed(8)
    head = AttentionHead(48, 12, bias=False).double()
    x = torch.randn(6, 48, dtype=F64)
    out, p = head(x)
    w_q, w_k, w_v = (m.weight.detach().numpy().T for m in (head.query, head.key, head.value))
    ref_out, ref_p = self_attention(x.numpy(), w_q, w_k, w_v)  # scale 1/sqrt(12)
    np.testing.assert_allclose(out.detach().numpy(), ref_out, atol=1e-12)
    np.testing.assert_allclose(p.detach().numpy(), ref_p, atol=1e-12)


def test_attention_head_bias_and_mask():
    torch.manual_seed(9)
    head = AttentionHead(8, 4).double()
    x = torch.randn(2, 5, 8, dtype=F64)
    mask = torch.rand(2, 5, 5) < 0.6
    out, p = head(x, mask=mask)
    q, k, v = head.query(x), head.key(x), head.value(x)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    rows = mask.any(-1)
    torch.testing.assert_close(out[rows], ref[rows], atol=1e-12, rtol=0)
    assert (p[~rows] == 0).all() and (out[~rows] == 0).all()


def test_multi_head_equals_attention_heads_side_by_side():
    torch.manual_seed(10)
    d, h = 48, 4
    mha = MultiHeadAttention(d, h).double()
    heads = [AttentionHead(d, d // h).double() for _ in range(h)]
    with torch.no_grad():
        for i, head in enumerate(heads):
            rows = slice(i * 12, (i + 1) * 12)
            for mine, theirs in (
                (head.query, mha.q_proj),
                (head.key, mha.k_proj),
                (head.value, mha.v_proj),
            ):
                mine.weight.copy_(theirs.weight[rows])
                mine.bias.copy_(theirs.bias[rows])
    x = torch.randn(2, 9, d, dtype=F64)
    outs = [head(x) for head in heads]
    concat = torch.cat([o for o, _ in outs], dim=-1)
    out, w = mha(x, need_weights=True)
    torch.testing.assert_close(out, mha.out_proj(concat), atol=1e-12, rtol=0)
    torch.testing.assert_close(w, torch.stack([p for _, p in outs], dim=1), atol=1e-12, rtol=0)


def test_attention_head_rejects_bad_sizes():
    with pytest.raises(ValueError, match="head_size"):
        AttentionHead(48, 0)
    with pytest.raises(ValueError, match="hidden_size=48"):
        AttentionHead(48, 12)(torch.randn(3, 40))


def test_to_torch_attn_mask():
    m = torch.tensor([[True, False]])
    assert torch.equal(to_torch_attn_mask(m), torch.tensor([[False, True]]))
    with pytest.raises(ValueError, match="boolean"):
        to_torch_attn_mask(torch.ones(2, 2))
