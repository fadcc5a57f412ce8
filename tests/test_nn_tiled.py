"""Tests of attnlab.nn.tiled: tiled attention (online softmax, backward from the log-sum-exp)
against PyTorch's built-in attention in float64, gradcheck, what it keeps, and bad input."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from _autograd import saved_bytes
from torch.overrides import TorchFunctionMode

import attnlab.nn as ann
from attnlab.nn import tiled_attention

F64 = torch.float64


def _qkv(lead=(2, 3), s_q=11, s_k=13, d_k=5, d_v=7, seed=0, dtype=F64, k_lead=None):
    g = torch.Generator().manual_seed(seed)
    k_lead = lead if k_lead is None else k_lead

    def make(*shape):
        return torch.randn(*shape, generator=g, dtype=dtype).requires_grad_()

    return make(*lead, s_q, d_k), make(*k_lead, s_k, d_k), make(*k_lead, s_k, d_v)


def _reference(q, k, v, mask, is_causal, scale=None):
    """The built-in on every row that has a key; zero output (and no gradient) on the others.

    A row with no allowed key is given every key in the built-in's call and then multiplied
    by 0, so the reference never depends on what the built-in does with an empty row.
    """
    s_q, s_k = q.shape[-2], k.shape[-2]
    allowed = torch.ones(s_q, s_k, dtype=torch.bool)
    if is_causal:
        allowed = allowed.tril()
    if mask is not None:
        allowed = allowed & mask
    has_key = allowed.any(dim=-1, keepdim=True)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed | ~has_key, scale=scale)
    return out * has_key, has_key


def _masks(lead, s_q, s_k):
    g = torch.Generator().manual_seed(7)
    padding = torch.ones(lead[0], 1, 1, s_k, dtype=torch.bool)
    padding[0, ..., s_k - 4 :] = False  # the last four keys of sequence 0 are padding
    rand = torch.rand(*lead, s_q, s_k, generator=g) > 0.5
    rand[0, 0, 2] = False  # query 2 of the first sequence and head sees no key
    rand[-1, -1, -1] = False
    return {"none": None, "padding": padding, "random, empty rows": rand}


CASES = [  # (lead, s_q, s_k, q_tile, k_tile): tiles that do and do not divide the lengths
    ((2, 3), 11, 13, 4, 3),
    ((2, 3), 13, 13, 5, 5),
    ((2, 3), 8, 8, 4, 4),
    ((2, 3), 9, 6, 16, 16),  # one tile as big as the sequence: the explicit computation
    ((2, 3), 7, 12, 1, 1),  # one query and one key per tile
]


@pytest.mark.parametrize(("lead", "s_q", "s_k", "q_tile", "k_tile"), CASES)
@pytest.mark.parametrize("mask_name", ["none", "padding", "random, empty rows"])
@pytest.mark.parametrize("is_causal", [False, True])
def test_outputs_and_gradients_match_the_builtin_in_float64(
    lead, s_q, s_k, q_tile, k_tile, mask_name, is_causal
):
    q, k, v = _qkv(lead, s_q, s_k, d_k=5, d_v=7)  # d_v = 7, d_k = 5
    mask = _masks(lead, s_q, s_k)[mask_name]
    got = tiled_attention(q, k, v, mask, is_causal=is_causal, q_tile=q_tile, k_tile=k_tile)
    ref, has_key = _reference(q, k, v, mask, is_causal)
    assert got.shape == (*lead, s_q, 7)
    torch.testing.assert_close(got, ref, rtol=0, atol=1e-12)
    cot = torch.randn(got.shape, generator=torch.Generator().manual_seed(1), dtype=F64)
    mine = torch.autograd.grad((got * cot).sum(), (q, k, v))
    theirs = torch.autograd.grad((ref * cot).sum(), (q, k, v))
    for name, a, b in zip("qkv", mine, theirs, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-11, msg=f"d{name}")
    empty = ~has_key.expand(*lead, s_q, 1)[..., 0]
    if empty.any():  # the book's contract: zero output, zero gradient, exactly
        assert torch.all(got[empty] == 0)
        assert torch.all(mine[0][empty] == 0)


def test_causal_with_more_keys_than_queries_is_top_left_aligned_like_the_builtin():
    q, k, v = _qkv((2,), s_q=5, s_k=9)
    got = tiled_attention(q, k, v, is_causal=True, q_tile=2, k_tile=4)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(got, ref, rtol=0, atol=1e-12)


def test_scale_and_broadcast_leading_axes_match_the_builtin():
    q, k, v = _qkv((2, 3), s_q=6, s_k=10, k_lead=(1, 3))  # keys and values shared by the batch
    mask = torch.rand(6, 10, generator=torch.Generator().manual_seed(3)) > 0.3
    mask[:, 0] = True  # every query has a key
    got = tiled_attention(q, k, v, mask, scale=0.3, q_tile=4, k_tile=3)
    ref = F.scaled_dot_product_attention(
        q, k.expand(2, 3, 10, 5), v.expand(2, 3, 10, 7), attn_mask=mask, scale=0.3
    )
    torch.testing.assert_close(got, ref, rtol=0, atol=1e-12)
    mine = torch.autograd.grad(got.square().sum(), (q, k, v))
    theirs = torch.autograd.grad(ref.square().sum(), (q, k, v))
    for a, b, x in zip(mine, theirs, (q, k, v), strict=True):
        assert a.shape == x.shape  # summed over the broadcast batch axis
        torch.testing.assert_close(a, b, rtol=0, atol=1e-11)


def test_queries_and_keys_shared_by_a_batch_of_values():
    """Logits of batch 1 meet values (and a mask) of batch 3: the blocks broadcast."""
    g = torch.Generator().manual_seed(12)
    q, k = (torch.randn(1, 7, 4, generator=g, dtype=F64, requires_grad=True) for _ in range(2))
    v = torch.randn(3, 7, 2, generator=g, dtype=F64, requires_grad=True)
    mask = torch.rand(3, 7, 7, generator=g) > 0.3
    mask[:, :, 0] = True
    got = tiled_attention(q, k, v, mask, q_tile=3, k_tile=2)
    ref = F.scaled_dot_product_attention(q.expand(3, 7, 4), k.expand(3, 7, 4), v, attn_mask=mask)
    torch.testing.assert_close(got, ref, rtol=0, atol=1e-12)
    mine = torch.autograd.grad(got.square().sum(), (q, k, v))
    theirs = torch.autograd.grad(ref.square().sum(), (q, k, v))
    for a, b in zip(mine, theirs, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-11)


@pytest.mark.parametrize("is_causal", [False, True])
def test_gradcheck_at_small_sizes_with_a_mask_and_an_empty_row(is_causal):
    q, k, v = _qkv((2,), s_q=5, s_k=6, d_k=3, d_v=2, seed=4)
    mask = torch.rand(2, 5, 6, generator=torch.Generator().manual_seed(5)) > 0.3
    mask[1, 3] = False
    assert torch.autograd.gradcheck(
        lambda q, k, v: tiled_attention(q, k, v, mask, is_causal, q_tile=2, k_tile=4), (q, k, v)
    )


def test_the_running_maximum_is_rescaled_exactly_when_it_grows_or_falls():
    """Keys in increasing (then decreasing) order of score: the running maximum of every query
    changes in every tile, so each tile rescales what came before. Logits up to ~600 would
    overflow a naive exp in float32; the online softmax stays finite and exact."""
    s = 512  # neighbouring logits 2.3 apart: the weights are spread over a few keys
    k = torch.linspace(-1, 1, s, dtype=torch.float32).reshape(s, 1) * 30
    q = torch.full((4, 1), 20.0, dtype=torch.float32)  # logits q·k from -600 to 600
    v = torch.randn(s, 3, generator=torch.Generator().manual_seed(6))
    for k_, v_ in ((k, v), (k.flip(0), v.flip(0))):
        got = tiled_attention(q, k_, v_, scale=1.0, q_tile=2, k_tile=32)
        ref = torch.softmax(q.double() @ k_.double().T, -1) @ v_.double()
        assert torch.isfinite(got).all()
        torch.testing.assert_close(got.double(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_lower_precisions_are_close_to_float64(dtype):
    q, k, v = _qkv((2,), s_q=40, s_k=50, seed=8)
    ref = tiled_attention(q, k, v, is_causal=True, q_tile=16, k_tile=16)
    got = tiled_attention(
        q.to(dtype), k.to(dtype), v.to(dtype), is_causal=True, q_tile=16, k_tile=16
    )
    assert got.dtype == dtype
    tol = 1e-5 if dtype == torch.float32 else 5e-2
    torch.testing.assert_close(got.double(), ref, rtol=tol, atol=tol)


def test_what_the_backward_pass_keeps_is_q_k_v_out_and_the_log_sum_exp():
    """Exactly the inputs, the output and one log-sum-exp per query: linear in n."""
    batch, d_k, d_v = 2, 8, 4
    kept, explicit = {}, {}
    tiled = {"is_causal": True, "q_tile": 32, "k_tile": 32}
    for n in (128, 256, 512):
        q, k, v = _qkv((batch,), s_q=n, s_k=n, d_k=d_k, d_v=d_v, dtype=torch.float32)
        kept[n] = saved_bytes(lambda q=q, k=k, v=v: tiled_attention(q, k, v, **tiled))
        explicit[n] = saved_bytes(lambda q=q, k=k, v=v: ann.scaled_dot_product_attention(q, k, v))
        numbers = batch * n * (2 * d_k + d_v + d_v + 1)  # q, k, v, out, log-sum-exp
        assert kept[n] == 4 * numbers
    assert kept[512] / kept[128] == 4.0  # n × 4: memory × 4
    assert explicit[512] / explicit[128] > 12  # the weights: n × 4, memory × 16
    assert kept[512] < explicit[512] / 10


class _LargestTensor(TorchFunctionMode):
    """The largest number of elements of any tensor a torch function returns."""

    def __init__(self) -> None:
        super().__init__()
        self.largest = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, tuple) else (out,):
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
        return out


def test_no_tensor_as_large_as_the_weights_is_ever_made():
    """Forward and backward work on (q_tile, k_tile) blocks: no (s_q, s_k) matrix exists."""
    n, d = 256, 2
    q, k, v = _qkv((1,), s_q=n, s_k=n, d_k=d, d_v=d)
    with _LargestTensor() as mode:
        tiled_attention(q, k, v, q_tile=64, k_tile=16).sum().backward()
    assert mode.largest == 64 * 16  # one block; the inputs have n·d = 512 elements
    with _LargestTensor() as mode:
        ann.scaled_dot_product_attention(q, k, v)[0].sum().backward()
    assert mode.largest == n * n  # the explicit path, for contrast


def test_under_no_grad_it_keeps_nothing_and_gives_the_same_output():
    q, k, v = _qkv((2,), s_q=9, s_k=9)
    with torch.no_grad():
        assert saved_bytes(lambda: tiled_attention(q, k, v, q_tile=4, k_tile=4)) == 0
        out = tiled_attention(q, k, v, q_tile=4, k_tile=4)
    assert not out.requires_grad
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v).detach())


# ---- bad input -----------------------------------------------------------------------------


def _args():
    g = torch.Generator().manual_seed(9)
    return {
        "q": torch.randn(2, 5, 4, generator=g),
        "k": torch.randn(2, 6, 4, generator=g),
        "v": torch.randn(2, 6, 3, generator=g),
    }


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"k": torch.randn(2, 6, 3)}, "share d_k"),
        ({"v": torch.randn(2, 5, 3)}, "same length s_k"),
        ({"q": torch.randn(2, 0, 4)}, "empty sequence"),
        ({"k": torch.randn(2, 0, 4), "v": torch.randn(2, 0, 3)}, "empty sequence"),
        ({"q": torch.randn(2, 5, 0), "k": torch.randn(2, 6, 0)}, "d_k = 0"),
        ({"q": torch.randn(3, 5, 4)}, "do not broadcast"),
        ({"q": torch.ones(2, 5, 4, dtype=torch.long)}, "floating-point"),
        ({"v": torch.randn(2, 6, 3, dtype=F64)}, "one dtype"),
        ({"q": torch.randn(5)}, "q must have shape"),
        ({"mask": torch.ones(2, 5, 6)}, "mask must be boolean"),
        ({"mask": torch.ones(2, 5, 5, dtype=torch.bool)}, "does not broadcast to the logits"),
        ({"mask": torch.ones(3, 2, 5, 6, dtype=torch.bool)}, "does not broadcast to the logits"),
        ({"mask": torch.ones(5, 6, dtype=torch.bool, device="meta")}, "mask is on meta"),
        ({"scale": 0.0}, "scale must be a positive finite"),
        ({"scale": math.nan}, "scale must be a positive finite"),
        ({"q_tile": 0}, "q_tile must be a positive integer"),
        ({"k_tile": -3}, "k_tile must be a positive integer"),
    ],
)
def test_bad_input_is_a_value_error_naming_it(change, message):
    args = {**_args(), **change}
    with pytest.raises(ValueError, match=message):
        tiled_attention(**args)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"q": [[1.0, 2.0]]}, "q must be a torch.Tensor"),
        ({"mask": [[True]]}, "mask must be a torch.Tensor"),
        ({"is_causal": 1}, "is_causal must be True or False"),
        ({"is_causal": None}, "is_causal must be True or False"),
        ({"q_tile": 2.0}, "q_tile must be a positive integer"),
        ({"k_tile": True}, "k_tile must be a positive integer"),
        ({"scale": "0.5"}, "scale must be a positive finite"),
    ],
)
def test_wrong_types_are_type_errors_naming_the_argument(change, message):
    args = {**_args(), **change}
    with pytest.raises(TypeError, match=message):
        tiled_attention(**args)


def test_with_value_checks_on_nonfinite_inputs_and_overflowing_logits_are_refused():
    args = _args()
    args["k"][0, 2, 1] = math.nan
    with ann.check_values(), pytest.raises(ValueError, match="k contains NaN"):
        tiled_attention(**args)
    big = torch.full((1, 4, 2), 300.0, dtype=torch.float16)  # 300 · 300 · 2 > 65504
    with ann.check_values(), pytest.raises(ValueError, match="overflowed in float16"):
        tiled_attention(big, big, big, scale=1.0, q_tile=2, k_tile=2)
