"""``attnlab.nn.grouped_query_attention``: h query heads sharing g key/value heads (chapter 05).

References: PyTorch's ``F.scaled_dot_product_attention(..., enable_gqa=True)`` and a float64
loop over batch elements and heads written here, which is also the reference for fully masked
query rows (zero weights, zero output: the book's mask convention). Bad input is checked by
hand and with the generated cases of the error contract (``tests/_contract.py``).
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from _contract import FAST, Spec, bad_cases, check, dims, torch_dtype, torch_values_checked
from hypothesis import given
from hypothesis import strategies as st
from test_nn_devices import META, FactoriesWithoutDevice

import attnlab.nn as ann
from attnlab.nn import grouped_query_attention

F64 = torch.float64
HEADS = [(1, 1), (4, 1), (4, 2), (4, 4), (6, 3), (6, 2), (8, 2)]  # (h, g); g = 1 is MQA


def _qkv(b=2, h=4, g=2, s_q=3, s_k=5, d_k=4, d_v=3, seed=0, dtype=F64, grad=False):
    gen = torch.Generator().manual_seed(seed)
    shapes = ((b, h, s_q, d_k), (b, g, s_k, d_k), (b, g, s_k, d_v))
    return tuple(
        torch.randn(shape, generator=gen, dtype=dtype).requires_grad_(grad) for shape in shapes
    )


def naive(q, k, v, mask=None, scale=None):
    """A float64 loop: query head i uses key/value head i // (h // g); all-masked rows are 0."""
    b, h, s_q, d_k = q.shape
    g, s_k, d_v = k.shape[1], k.shape[2], v.shape[-1]
    scale = 1.0 / math.sqrt(d_k) if scale is None else scale
    allowed = torch.ones(b, h, s_q, s_k, dtype=torch.bool)
    if mask is not None:
        allowed = mask.expand(b, h, s_q, s_k)  # every book mask broadcasts this way
    out = torch.zeros(b, h, s_q, d_v, dtype=F64)
    weights = torch.zeros(b, h, s_q, s_k, dtype=F64)
    for n in range(b):
        for i in range(h):
            j = i // (h // g)
            for t in range(s_q):
                keep = allowed[n, i, t]
                if not keep.any():
                    continue  # no key allowed: zero weights, zero output
                logits = (q[n, i, t].double() @ k[n, j].double().T) * scale
                e = torch.exp(logits - logits[keep].max()) * keep
                weights[n, i, t] = e / e.sum()
                out[n, i, t] = weights[n, i, t] @ v[n, j].double()
    return out, weights


def _masks(b, h, s_q, s_k, seed=1):
    """Boolean masks of every broadcast layout, each with one fully masked query row."""
    gen = torch.Generator().manual_seed(seed)
    full = torch.rand(b, h, s_q, s_k, generator=gen) < 0.6
    full[0, -1, 0] = False  # query 0 of the last head of batch 0 may attend nowhere
    per_batch = torch.rand(b, 1, s_q, s_k, generator=gen) < 0.6
    per_batch[-1, 0, -1] = False
    square = torch.rand(s_q, s_k, generator=gen) < 0.6
    square[1] = False
    padding = torch.arange(s_k) < torch.tensor([2, 0])[:b, None]  # (b, s_k); 2nd: all padding
    return {
        "(b, h, s_q, s_k)": full,
        "(b, 1, s_q, s_k)": per_batch,
        "(s_q, s_k)": square,
        "(b, 1, 1, s_k) padding": padding[:, None, None, :],
    }


# ----------------------------------------------------------------------------- references


@pytest.mark.parametrize(("h", "g"), HEADS)
def test_matches_torch_enable_gqa_and_the_loop(h, g):
    q, k, v = _qkv(h=h, g=g, seed=h * 10 + g)
    ours, w = grouped_query_attention(q, k, v, need_weights=True)
    theirs = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    loop, w_loop = naive(q, k, v)
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-12)
    torch.testing.assert_close(ours, loop, rtol=0, atol=1e-12)
    torch.testing.assert_close(w, w_loop, rtol=0, atol=1e-12)
    assert ours.shape == (2, h, 3, 3) and w.shape == (2, h, 3, 5)


@pytest.mark.parametrize(("h", "g"), HEADS)
@pytest.mark.parametrize("layout", list(_masks(2, 1, 3, 5)))
def test_masks_including_fully_masked_rows(h, g, layout):
    q, k, v = _qkv(h=h, g=g, seed=3)
    mask = _masks(2, h, 3, 5)[layout]
    ours, w = grouped_query_attention(q, k, v, mask, need_weights=True)
    loop, w_loop = naive(q, k, v, mask)
    torch.testing.assert_close(ours, loop, rtol=0, atol=1e-12)
    torch.testing.assert_close(w, w_loop, rtol=0, atol=1e-12)
    allowed = mask.expand(2, h, 3, 5)
    assert torch.all(w[~allowed] == 0)  # exactly zero where masked
    dead = ~allowed.any(-1)  # (b, h, s_q): rows with no allowed key
    assert dead.any(), "each layout has a fully masked row"
    assert torch.all(ours[dead] == 0) and torch.all(w[dead] == 0)
    # PyTorch 2.13 on the CPU agrees on every row, fully masked ones included (zeros there)
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    torch.testing.assert_close(ours[~dead], theirs[~dead], rtol=0, atol=1e-12)
    assert torch.all(theirs[dead] == 0)


def test_g_equal_h_is_multi_head_attention_and_g_smaller_repeats_the_heads():
    q, k, v = _qkv(h=4, g=4, seed=5)
    mask = _masks(2, 4, 3, 5)["(s_q, s_k)"]
    mha, w_mha = ann.scaled_dot_product_attention(q, k, v, mask)
    out, w = grouped_query_attention(q, k, v, mask, need_weights=True)
    torch.testing.assert_close(out, mha, rtol=0, atol=1e-12)
    torch.testing.assert_close(w, w_mha, rtol=0, atol=1e-12)
    q, k, v = _qkv(h=6, g=2, seed=6)
    repeated, _ = ann.scaled_dot_product_attention(
        q, k.repeat_interleave(3, dim=1), v.repeat_interleave(3, dim=1), mask
    )
    torch.testing.assert_close(grouped_query_attention(q, k, v, mask), repeated, rtol=0, atol=1e-12)
    # the grouping is consecutive: heads 0-2 read key head 0, not heads 0, 2, 4
    tiled, _ = ann.scaled_dot_product_attention(q, k.repeat(1, 3, 1, 1), v.repeat(1, 3, 1, 1))
    assert not torch.allclose(grouped_query_attention(q, k, v), tiled)


def test_scale_and_need_weights():
    q, k, v = _qkv(h=6, g=3, seed=7)
    out = grouped_query_attention(q, k, v, scale=0.3)
    torch.testing.assert_close(
        out, F.scaled_dot_product_attention(q, k, v, scale=0.3, enable_gqa=True), rtol=0, atol=1e-12
    )
    pair = grouped_query_attention(q, k, v, scale=0.3, need_weights=True)
    assert isinstance(out, torch.Tensor) and isinstance(pair, tuple) and len(pair) == 2
    torch.testing.assert_close(pair[0], out, rtol=0, atol=0)
    torch.testing.assert_close(pair[1].sum(-1), torch.ones(2, 6, 3, dtype=F64))


def test_inputs_are_untouched():
    q, k, v = _qkv(h=8, g=2, seed=8)
    before = [t.clone() for t in (q, k, v)]
    grouped_query_attention(q, k, v)
    assert all(torch.equal(a, b) for a, b in zip(before, (q, k, v), strict=True))


def test_empty_batch_and_float32():
    q, k, v = _qkv(b=0, h=4, g=2)
    assert grouped_query_attention(q, k, v).shape == (0, 4, 3, 3)
    q, k, v = _qkv(h=4, g=2, dtype=torch.float32, seed=9)
    out = grouped_query_attention(q, k, v)
    assert out.dtype == torch.float32
    torch.testing.assert_close(
        out, F.scaled_dot_product_attention(q, k, v, enable_gqa=True), rtol=1e-5, atol=1e-6
    )


# ----------------------------------------------------------------------------- gradients


@pytest.mark.parametrize(("h", "g"), [(4, 1), (4, 2), (3, 3)])
def test_gradients_match_torch(h, g):
    mask = _masks(2, h, 3, 5)["(b, h, s_q, s_k)"]
    grads = []
    for fn in (
        lambda q, k, v: grouped_query_attention(q, k, v, mask),
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True),
    ):
        q, k, v = _qkv(h=h, g=g, seed=11, grad=True)
        weight = torch.randn(2, h, 3, 3, generator=torch.Generator().manual_seed(12), dtype=F64)
        (fn(q, k, v) * weight).sum().backward()
        grads.append([t.grad for t in (q, k, v)])
    for ours, theirs in zip(*grads, strict=True):
        assert torch.isfinite(ours).all()
        torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-12)


def test_gradcheck_with_a_fully_masked_row():
    q, k, v = _qkv(b=1, h=4, g=2, s_q=2, s_k=3, d_k=2, d_v=2, seed=13, grad=True)
    mask = torch.tensor([[True, False, True], [False, False, False]])
    assert torch.autograd.gradcheck(lambda *t: grouped_query_attention(*t, mask), (q, k, v))
    grouped_query_attention(q, k, v, mask).sum().backward()
    assert torch.all(q.grad[:, :, 1] == 0)  # the dead row passes no gradient to its query


# ----------------------------------------------------------------------------- bad input


def _raises(error, match, *args, **kwargs):
    with pytest.raises(error, match=match):
        grouped_query_attention(*args, **kwargs)


def test_g_must_divide_h():
    _raises(ValueError, r"g = 3 .* must divide the h = 4", *_qkv(h=4, g=3))
    _raises(ValueError, r"g = 4 .* must divide the h = 2", *_qkv(h=2, g=4))


def test_wrong_number_of_axes():
    q, k, v = _qkv()
    _raises(ValueError, r"^q must have shape \(batch, h, s_q, d_k\)", q[0], k, v)
    _raises(ValueError, r"^k must have shape \(batch, g, s_k, d_k\)", q, k[:, None], v)
    _raises(ValueError, r"^v must have shape \(batch, g, s_k, d_v\)", q, k, v[0, 0])


def test_mismatched_sizes():
    q, k, v = _qkv(b=2, h=4, g=2)
    _raises(ValueError, "same batch size", q, k[:1], v[:1])
    _raises(ValueError, "same batch size", q[:1], k, v)
    _raises(ValueError, "k and v must have the same number g", q, k, v[:, :1])
    _raises(ValueError, "share d_k", q, k[..., :3], v)
    _raises(ValueError, "same length s_k", q, k, v[:, :, :4])


def test_empty_axes():
    q, k, v = _qkv(h=4, g=2)
    _raises(ValueError, "empty head axis", q[:, :0], k, v)
    _raises(ValueError, "empty head axis", q, k[:, :0], v[:, :0])
    _raises(ValueError, "empty sequence", q[:, :, :0], k, v)
    _raises(ValueError, "empty sequence", q, k[:, :, :0], v[:, :, :0])
    _raises(ValueError, "d_k = 0", q[..., :0], k[..., :0], v)


@pytest.mark.parametrize("which", ["q", "k", "v"])
def test_wrong_types_and_dtypes(which):
    args = dict(zip("qkv", _qkv(), strict=True))
    for bad, error, match in [
        (args[which].numpy(), TypeError, "must be a torch.Tensor"),
        (args[which].tolist(), TypeError, "must be a torch.Tensor"),
        (args[which] > 0, ValueError, "floating-point tensor, got dtype torch.bool"),
        (args[which].long(), ValueError, "floating-point tensor, got dtype torch.int64"),
    ]:
        with pytest.raises(error, match=f"^{which} .*{match}"):
            grouped_query_attention(**{**args, which: bad})
    if which != "q":
        with pytest.raises(ValueError, match=f"^{which} is torch.float32 .* must match"):
            grouped_query_attention(**{**args, which: args[which].float()})


def test_bad_masks():
    q, k, v = _qkv(b=2, h=4, g=2, s_q=3, s_k=5)
    ok = torch.ones(3, 5, dtype=torch.bool)
    _raises(TypeError, "^mask must be a torch.Tensor", q, k, v, ok.numpy())
    _raises(ValueError, "^mask must be boolean", q, k, v, ok.long())
    _raises(ValueError, "^mask must be boolean", q, k, v, ok.double())
    for shape in [(5, 3), (2, 2, 3, 5), (3, 2, 3, 5), (1, 2, 4, 3, 5), (4,)]:
        _raises(ValueError, r"^mask of shape .* does not broadcast to .* \(2, 4, 3, 5\)", q, k, v,
                torch.ones(shape, dtype=torch.bool))  # fmt: skip


def test_bad_scale_and_need_weights():
    q, k, v = _qkv()
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        _raises(ValueError, "^scale", q, k, v, scale=bad)
    _raises(TypeError, "^scale", q, k, v, scale="1")
    _raises(TypeError, "^scale", q, k, v, scale=True)
    _raises(TypeError, "^need_weights", q, k, v, need_weights=1)


def test_non_finite_values_only_when_checked():
    """The contract of attnlab.nn: values are checked while check_values is on."""
    q, k, v = _qkv()
    k = k.clone()
    k[0, 1, 2, 0] = float("nan")
    assert torch.isnan(grouped_query_attention(q, k, v)).any()  # off: NaN, like torch
    with ann.check_values(), pytest.raises(ValueError, match="^k contains NaN"):
        grouped_query_attention(q, k, v)
    q16, k16, v16 = (torch.full(t.shape, 300.0, dtype=torch.float16) for t in _qkv())
    with ann.check_values(), pytest.raises(ValueError, match="overflowed in float16"):
        grouped_query_attention(q16, k16, v16)


def _gqa_call(a, p):
    torch_dtype(p)
    return grouped_query_attention(a["q"], a["k"], a["v"], a["mask"], **p)


def _grouped_dims(draw):
    g, per_group = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    sizes = dims(b=(0, 2), sq=(1, 3), sk=(1, 3), dk=(1, 3), dv=(1, 2))(draw)
    return {**sizes, "g": g, "h": g * per_group}


GQA_SPEC = Spec(
    "nn.grouped_query_attention",
    {
        "q": ("b", "h", "sq", "dk"),
        "k": ("b", "g", "sk", "dk"),
        "v": ("b", "g", "sk", "dv"),
        "mask": ("sq", "sk"),
    },
    _grouped_dims,
    _gqa_call,
    backend="torch",
    floats={"scale": None},
    free=("dv",),
    empty=("sq", "sk", "dk", "h", "g"),
    exact_rank=("q", "k", "v"),
    bool_args=("mask",),
    no_rank=("mask",),
)


@FAST
@given(data=st.data())
def test_meets_the_error_contract(data):
    with torch_values_checked():
        check(data.draw(bad_cases(GQA_SPEC)))


# ----------------------------------------------------------------------------- devices


def test_runs_on_the_meta_device_and_creates_no_tensor_without_a_device():
    q, k, v = (t.to(META) for t in _qkv(dtype=torch.float32))
    mask = torch.ones(2, 1, 3, 5, dtype=torch.bool)
    out, w = grouped_query_attention(q, k, v, mask.to(META), need_weights=True)
    assert out.device == META and w.device == META
    q, k, v = _qkv(dtype=torch.float32)
    with FactoriesWithoutDevice() as mode:
        grouped_query_attention(q, k, v, mask, need_weights=True)
    assert not mode.calls, mode.calls
