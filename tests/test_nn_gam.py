"""Tests of attnlab.nn.gam: the torch GAM against numpy, nn.MultiheadAttention and gradcheck."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from _autograd import saved_bytes
from _benchmarks import load_benchmark
from torch import nn
from torch.func import functional_call

from attnlab import gam_attention
from attnlab import gam_logits as np_gam_logits
from attnlab.nn import GeneralizedAttention, gam_logits, signed_power
from attnlab.nn.gam_fused import _checked_mask


def _naive_torch_logits(y, b, f, n1, coeffs):
    """(batch, n, n, M, M) products, f applied to each, contracted with every brain."""
    prod = y[:, :, None, :, None] * y[:, None, :, None, :]
    if f == "power":
        if float(n1).is_integer():
            feat = prod ** int(n1)
        else:
            feat = torch.sign(prod) * prod.abs() ** n1
    else:
        feat = sum(a * prod**k for k, a in enumerate(coeffs.tolist(), start=1))
    return torch.einsum("bnkrt,irt->bink", feat, b)


@pytest.mark.parametrize(
    ("f", "n1", "coeffs"),
    [("power", 1.0, None), ("power", 2.0, None), ("power", 1.5, None), ("poly", 1.0, (0.5, -1.0))],
)
def test_torch_logits_match_naive_and_numpy(f, n1, coeffs):
    g = torch.Generator().manual_seed(0)
    y = torch.randn(2, 5, 4, generator=g, dtype=torch.float64)
    b = torch.randn(3, 4, 4, generator=g, dtype=torch.float64)
    c = None if coeffs is None else torch.tensor(coeffs, dtype=torch.float64)
    got = gam_logits(y, b, f=f, n1=n1, coeffs=c)
    assert got.shape == (2, 3, 5, 5)
    torch.testing.assert_close(got, _naive_torch_logits(y, b, f, n1, c), rtol=1e-10, atol=1e-10)
    for i in range(2):
        ref = np_gam_logits(y[i].numpy(), b.numpy(), f=f, n1=n1, coeffs=coeffs)
        np.testing.assert_allclose(got[i].numpy(), ref, rtol=1e-12, atol=1e-12)


def test_torch_logits_keep_leading_axes_and_per_head_coeffs():
    g = torch.Generator().manual_seed(1)
    y = torch.randn(2, 4, 3, generator=g, dtype=torch.float64)
    b = torch.randn(2, 3, 3, 3, generator=g, dtype=torch.float64)  # (h, N_B, M, M)
    coeffs = torch.randn(2, 2, 1, generator=g, dtype=torch.float64)  # (L, h, 1)
    got = gam_logits(y, b, f="poly", coeffs=coeffs)
    assert got.shape == (2, 2, 3, 4, 4)
    for a in range(2):
        per_head = gam_logits(y, b[a], f="poly", coeffs=coeffs[:, a, 0])
        torch.testing.assert_close(got[:, a], per_head)


def test_torch_signed_power_matches_numpy_and_has_finite_gradient_at_zero():
    x = torch.tensor([-2.0, -0.5, 0.0, 0.5, 3.0], dtype=torch.float64, requires_grad=True)
    for p in (0.5, 1.5, 2.0, 3.0):
        from attnlab import signed_power as np_signed_power

        np.testing.assert_allclose(
            signed_power(x, p).detach().numpy(), np_signed_power(x.detach().numpy(), p)
        )
    signed_power(x, 0.5).sum().backward()
    assert torch.isfinite(x.grad).all() and x.grad[2] == 0
    with pytest.raises(ValueError, match="positive"):
        signed_power(x, 0.0)


@pytest.mark.parametrize("bias", [False, True])
def test_loaded_multihead_attention_gives_identical_outputs(bias):
    torch.manual_seed(2)
    d, h, n = 8, 2, 6
    mha = nn.MultiheadAttention(d, h, bias=bias, batch_first=True, dtype=torch.float64)
    if bias:
        with torch.no_grad():
            mha.in_proj_bias.normal_()
            mha.in_proj_bias[: 2 * d] = 0  # y B yᵀ has no room for query/key biases
            mha.out_proj.bias.normal_()
    gam = GeneralizedAttention(d, h, bias=bias).double()
    gam.load_multihead_attention(mha)
    y = torch.randn(3, n, d, dtype=torch.float64)
    allowed = torch.tril(torch.ones(n, n, dtype=torch.bool))
    for mask in (None, allowed):
        torch_mask = None if mask is None else ~mask  # MHA's bool mask: True = may NOT attend
        ref, ref_w = mha(y, y, y, attn_mask=torch_mask, average_attn_weights=False)
        out, w = gam(y, mask=mask, need_weights=True)
        torch.testing.assert_close(out, ref, rtol=0, atol=1e-10)
        torch.testing.assert_close(gam(y, mask=mask, need_weights=False), ref, rtol=0, atol=1e-10)
        torch.testing.assert_close(w, ref_w, rtol=0, atol=1e-10)


def test_load_rejects_query_key_bias_and_brains():
    mha = nn.MultiheadAttention(4, 2, batch_first=True)
    with torch.no_grad():
        mha.in_proj_bias.fill_(1.0)
    with pytest.raises(ValueError, match="biases"):
        GeneralizedAttention(4, 2).load_multihead_attention(mha)
    with pytest.raises(ValueError, match="one-brain"):
        GeneralizedAttention(4, 2, n_brains=2).load_multihead_attention(mha)


@pytest.mark.parametrize(("f", "n1", "degree"), [("power", 2.0, None), ("poly", 1.0, 3)])
def test_module_matches_numpy_gam_attention_per_head(f, n1, degree):
    torch.manual_seed(3)
    d, h, n_b, n = 6, 3, 2, 5
    gam = GeneralizedAttention(d, h, n_brains=n_b, f=f, n1=n1, degree=degree).double()
    with torch.no_grad():
        gam.mix_logits.normal_()
    y = torch.randn(2, n, d, dtype=torch.float64)
    mask = torch.rand(2, n, n) > 0.3
    out, w = gam(y, mask=mask, need_weights=True)
    torch.testing.assert_close(gam(y, mask=mask, need_weights=False), out, rtol=0, atol=1e-12)
    d_v = d // h
    w_v = gam.value.weight.detach().T.numpy()  # (in, out)
    mix = gam.mix_weights.detach().numpy()
    for s in range(2):
        ys = y[s].numpy()
        heads = []
        for a in range(h):
            coeffs = None if degree is None else gam.coeffs[:, a, 0].detach().numpy()
            z, phi = gam_attention(
                ys,
                gam.b[a].detach().numpy(),
                w_v[:, a * d_v : (a + 1) * d_v],
                f=f,
                n1=n1,
                coeffs=coeffs,
                mix=mix[a],
                mask=mask[s].numpy(),
            )
            np.testing.assert_allclose(w[s, a].detach().numpy(), phi, atol=1e-12)
            heads.append(
                z
                + (
                    phi.sum(-1, keepdims=True)
                    * gam.value.bias.detach().numpy()[a * d_v : (a + 1) * d_v]
                )
            )
        concat = np.concatenate(heads, axis=-1)
        ref = concat @ gam.out_proj.weight.detach().T.numpy() + gam.out_proj.bias.detach().numpy()
        np.testing.assert_allclose(out[s].detach().numpy(), ref, atol=1e-12)


def test_fully_masked_row_gets_zero_weights():
    gam = GeneralizedAttention(4, 2, n_brains=2, bias=False)
    mask = torch.ones(3, 3, dtype=torch.bool)
    mask[1] = False
    y = torch.randn(1, 3, 4)
    out, w = gam(y, mask=mask, need_weights=True)
    assert torch.all(w[:, :, 1] == 0) and torch.all(out[:, 1] == 0)
    assert torch.all(gam(y, mask=mask, need_weights=False)[:, 1] == 0)  # the fused path too
    torch.testing.assert_close(w[:, :, [0, 2]].sum(-1), torch.ones(1, 2, 2))


def test_gradcheck_small_case():
    torch.manual_seed(4)
    gam = GeneralizedAttention(4, 2, n_brains=2, f="poly", degree=2).double()
    names = ["b", "mix_logits", "coeffs", "value.weight", "out_proj.weight"]
    params = {k: v.detach().clone().requires_grad_(True) for k, v in gam.named_parameters()}
    y = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[True, True, False], [True, True, True], [False, True, True]])

    def fn(y, need_weights, *tensors):
        state = dict(params)
        state.update(zip(names, tensors, strict=True))
        return functional_call(gam, state, (y,), {"mask": mask, "need_weights": need_weights})

    tensors = [params[k] for k in names]
    # explicit path (output and weights), then the fused path (output)
    assert torch.autograd.gradcheck(lambda y, *t: fn(y, True, *t), (y, *tensors))
    assert torch.autograd.gradcheck(lambda y, *t: fn(y, False, *t), (y, *tensors))

    gam15 = GeneralizedAttention(4, 1, n_brains=1, n1=1.5).double()
    assert torch.autograd.gradcheck(lambda y: gam15(y, need_weights=True)[0], (y,))
    assert torch.autograd.gradcheck(lambda y: gam15(y, need_weights=False), (y,))


def test_learned_mix_stays_on_simplex_and_uniform_mix_is_fixed():
    torch.manual_seed(5)
    gam = GeneralizedAttention(4, 2, n_brains=3)
    opt = torch.optim.SGD(gam.parameters(), lr=50.0)
    for _ in range(3):
        out = gam(torch.randn(2, 5, 4), need_weights=False)
        opt.zero_grad()
        out.pow(2).mean().backward()
        opt.step()
    w = gam.mix_weights
    assert torch.all(w >= 0) and torch.allclose(w.sum(-1), torch.ones(2))
    assert not torch.allclose(w, torch.full_like(w, 1 / 3))  # it did learn
    fixed = GeneralizedAttention(4, 2, n_brains=3, mix="uniform")
    assert "mix_logits" not in dict(fixed.named_parameters())
    torch.testing.assert_close(fixed.mix_weights, torch.full((2, 3), 1 / 3))


def test_every_parameter_gets_a_gradient_and_counts():
    d, h, n_b, L = 8, 2, 3, 2
    gam = GeneralizedAttention(d, h, n_brains=n_b, f="poly", degree=L)
    out = gam(torch.randn(2, 5, d), need_weights=False)
    out.sum().backward()
    for name, p in gam.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    expected = h * n_b * d * d + L * h + h * n_b + 2 * (d * d + d)
    assert sum(p.numel() for p in gam.parameters()) == expected


@pytest.mark.parametrize(
    ("f", "n1", "degree"), [("power", 1.0, None), ("power", 2.0, None), ("poly", 1.0, 3)]
)
def test_initial_logits_have_unit_variance(f, n1, degree):
    torch.manual_seed(6)
    d, n = 32, 32
    gam = GeneralizedAttention(d, 4, n_brains=4, f=f, n1=n1, degree=degree)
    with torch.no_grad():
        eps = gam.logits(torch.randn(64, n, d))
    off = ~torch.eye(n, dtype=torch.bool)
    var = eps[..., off].var().item()
    assert 0.8 < var < 1.2, var


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"d": 6, "h": 4}, "divide"),
        ({"f": "exp"}, "f must be"),
        ({"degree": 2}, "only used"),
        ({"f": "poly"}, "degree"),
        ({"n1": -1.0}, "positive"),
        ({"n_brains": 0}, "n_brains"),
        ({"mix": "free"}, "mix must be"),
    ],
)
def test_constructor_rejects_bad_arguments(kwargs, message):
    args = {"d": 4, "h": 2}
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        GeneralizedAttention(**args)


def test_forward_rejects_bad_input():
    gam = GeneralizedAttention(4, 2)
    with pytest.raises(ValueError, match=r"\(batch, n, 4\)"):
        gam(torch.randn(2, 3, 5))
    with pytest.raises(ValueError, match="boolean"):
        gam(torch.randn(2, 3, 4), mask=torch.ones(3, 3))
    with pytest.raises(ValueError, match="does not broadcast"):
        gam(torch.randn(2, 3, 4), mask=torch.ones(4, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="M=4"):
        gam_logits(torch.randn(2, 3, 4), torch.randn(2, 3, 3))
    assert math.isclose(gam.mix_weights.sum().item(), 2.0, rel_tol=1e-6)


# ---- the fused path: GAM is attention on features (issue 18) ---------------------------------

FUSED_CASES = [
    ("power", 1.0, None, 1),
    ("power", 2.0, None, 2),
    ("power", 3.0, None, 3),  # odd power: signed features
    ("power", 1.5, None, 2),  # non-integer: the signed power
    ("power", 0.5, None, 1),
    ("poly", 1.0, 3, 2),
]


def _masks(batch: int, n: int) -> list[torch.Tensor | None]:
    """No mask, a causal (n, n) mask, and a random (batch, n, n) one with fully masked rows."""
    g = torch.Generator().manual_seed(11)
    rand = torch.rand(batch, n, n, generator=g) > 0.4
    rand[0, 2] = False  # query 2 of sequence 0 may attend to nothing
    rand[-1, 0] = False
    return [None, torch.tril(torch.ones(n, n, dtype=torch.bool)), rand]


@pytest.mark.parametrize(("f", "n1", "degree", "n_b"), FUSED_CASES)
def test_fused_path_equals_explicit_path_in_float64(f, n1, degree, n_b):
    torch.manual_seed(12)
    d, h, batch, n = 8, 2, 3, 7
    gam = GeneralizedAttention(d, h, n_brains=n_b, f=f, n1=n1, degree=degree).double()
    with torch.no_grad():
        gam.mix_logits.normal_()
        if gam.coeffs is not None:
            gam.coeffs.normal_()  # per-head coefficients of either sign
    y = torch.randn(batch, n, d, dtype=torch.float64)
    for mask in _masks(batch, n):
        z_exp, phi = gam.heads(y, mask, need_weights=True)
        z_fused, none = gam.heads(y, mask)
        assert none is None and z_fused.shape == (batch, h, n, d // h)
        torch.testing.assert_close(z_fused, z_exp, rtol=0, atol=1e-12)
        out, _ = gam(y, mask, need_weights=True)
        torch.testing.assert_close(gam(y, mask, need_weights=False), out, rtol=0, atol=1e-12)
        if mask is not None:  # fully masked rows: zero weights and zero head outputs
            dead = ~mask.expand(batch, n, n).any(-1)  # (batch, n)
            assert dead.any() or mask.dim() == 2
            assert torch.all(z_fused.transpose(1, 2)[dead] == 0)
            assert torch.all(phi.transpose(1, 2)[dead] == 0)


@pytest.mark.parametrize(
    ("f", "n1", "degree", "n_b"), [FUSED_CASES[1], FUSED_CASES[3], FUSED_CASES[5]]
)
def test_fused_path_gradients_equal_explicit_ones(f, n1, degree, n_b):
    torch.manual_seed(13)
    gam = GeneralizedAttention(8, 2, n_brains=n_b, f=f, n1=n1, degree=degree).double()
    y = torch.randn(2, 6, 8, dtype=torch.float64)
    mask = _masks(2, 6)[2][:, :6, :6]
    grads = []
    for need_weights in (True, False):
        gam.zero_grad()
        yy = y.clone().requires_grad_(True)
        out = gam(yy, mask, need_weights=need_weights)
        out = out[0] if need_weights else out
        (out * torch.linspace(-1, 1, out.numel()).reshape(out.shape)).sum().backward()
        grads.append([yy.grad] + [p.grad for p in gam.parameters()])
    for explicit, fused in zip(*grads, strict=True):
        torch.testing.assert_close(fused, explicit, rtol=0, atol=1e-11)
        assert torch.isfinite(fused).all()


@pytest.mark.parametrize(
    ("f", "n1", "degree", "n_b"), [FUSED_CASES[1], FUSED_CASES[3], FUSED_CASES[5]]
)
def test_fused_path_matches_numpy_gam_attention(f, n1, degree, n_b):
    """The fused head outputs against attnlab.gam_attention (numpy, float64), head by head."""
    torch.manual_seed(14)
    d, h, n = 6, 3, 5
    gam = GeneralizedAttention(d, h, n_brains=n_b, f=f, n1=n1, degree=degree, bias=False).double()
    with torch.no_grad():
        gam.mix_logits.normal_()
    y = torch.randn(2, n, d, dtype=torch.float64)
    mask = _masks(2, n)[2]
    z, _ = gam.heads(y, mask)
    w_v, d_v = gam.value.weight.detach().T.numpy(), d // h
    for s in range(2):
        for a in range(h):
            coeffs = None if degree is None else gam.coeffs[:, a, 0].detach().numpy()
            ref, _ = gam_attention(
                y[s].numpy(),
                gam.b[a].detach().numpy(),
                w_v[:, a * d_v : (a + 1) * d_v],
                f=f,
                n1=n1,
                coeffs=coeffs,
                mix=gam.mix_weights[a].detach().numpy(),
                mask=mask[s].numpy(),
            )
            np.testing.assert_allclose(z[s, a].detach().numpy(), ref, rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    ("f", "n1", "degree"), [("power", 2.0, None), ("power", 1.5, None), ("poly", 1.0, 3)]
)
def test_features_dot_product_is_the_logits(f, n1, degree):
    from attnlab.nn.gam import gam_features

    g = torch.Generator().manual_seed(15)
    y = torch.randn(2, 5, 4, generator=g, dtype=torch.float64)
    b = torch.randn(3, 2, 4, 4, generator=g, dtype=torch.float64)  # (h, N_B, M, M)
    coeffs = None if degree is None else torch.randn(degree, 3, 1, generator=g, dtype=torch.float64)
    q, k = gam_features(y, b, f=f, n1=n1, coeffs=coeffs)
    width = 4 * (degree or 1)
    assert q.shape == (2, 3, 2, 5, width) and k.shape == (2, 5, width)
    eps = q @ k[:, None, None].transpose(-1, -2)
    if coeffs is None:  # against the pairwise products, f applied to each (not factorised)
        ref = _naive_torch_logits(y, b.reshape(6, 4, 4), f, n1, None)
        torch.testing.assert_close(eps.reshape(2, 6, 5, 5), ref, rtol=0, atol=1e-12)
    torch.testing.assert_close(eps, gam_logits(y, b, f=f, n1=n1, coeffs=coeffs), rtol=0, atol=1e-12)


def test_fused_path_never_builds_an_n_by_n_float_tensor():
    """Every tensor an operator returns on the fused path is O(n) wide (the mask aside)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Shapes(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.seen: list[tuple[str, tuple[int, ...], torch.dtype]] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in out if isinstance(out, (tuple, list)) else (out,):
                if isinstance(t, torch.Tensor):
                    self.seen.append((str(func), tuple(t.shape), t.dtype))
            return out

    n, batch = 40, 3
    gam = GeneralizedAttention(8, 2, n_brains=2, n1=2)
    y, mask = torch.randn(batch, n, 8), torch.rand(batch, n, n) > 0.5
    for m in (None, mask):
        for need_weights in (True, False):
            with torch.no_grad(), Shapes() as mode:
                gam(y, m, need_weights=need_weights)
            square = [s for s in mode.seen if s[1][-2:] == (n, n) and s[2] != torch.bool]
            per_head = [s for s in square if math.prod(s[1]) > batch * n * n]
            if need_weights:  # logits of every head and brain: (batch, h, N_B, n, n)
                assert any(s[1] == (batch, 2, 2, n, n) for s in per_head), square
            elif m is None:
                assert not square, square
            else:  # only SDPA's additive copy of the mask, one per sequence
                assert not per_head, square


# ---- the multiply-add formulas of the Performance page (benchmarks/flops.py) -----------------


def _load_flops():
    return load_benchmark("flops")


def _counted_macs(fn) -> int:
    """Multiply-adds that torch.utils.flop_counter counts (it counts 2 flops per MAC)."""
    from torch.utils.flop_counter import FlopCounterMode

    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops() // 2


@pytest.mark.parametrize(("n", "d", "h", "n_b", "degree"), [(12, 16, 4, 2, None), (9, 8, 2, 3, 3)])
def test_multiply_add_formulas_match_torch_flop_counter(n, d, h, n_b, degree):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from attnlab.nn import MultiHeadAttention

    flops = _load_flops()
    x = torch.randn(2, n, d)
    terms = degree or 1
    kw = {"n1": 2.0} if degree is None else {"f": "poly", "degree": degree}
    gam = GeneralizedAttention(d, h, n_brains=n_b, **kw)
    mha = MultiHeadAttention(d, h)
    # The counter sees matrix products only when SDPA runs as products (its math backend).
    with sdpa_kernel(SDPBackend.MATH):
        assert _counted_macs(lambda: mha(x)) == 2 * flops.mha_macs(n, d, h)
        fused = _counted_macs(lambda: gam(x, need_weights=False))
        assert fused == 2 * flops.gam_fused_cpu_macs(n, d, h, n_b, terms)
    assert _counted_macs(lambda: mha(x, need_weights=True)) == 2 * flops.mha_macs(n, d, h)
    explicit = _counted_macs(lambda: gam(x, need_weights=True))
    assert explicit == 2 * flops.gam_explicit_macs(n, d, h, n_b, terms)
    # The algorithm's count: the explicit path's, with one weights-times-values product per brain
    # (N_B n² d) in place of the mixing (h N_B n²) and one product per head (n² d).
    algorithm = flops.gam_explicit_macs(n, d, h, n_b, terms) - h * n_b * n * n - n * n * d
    assert flops.gam_macs(n, d, h, n_b, terms) == algorithm + n_b * n * n * d
    # issue 18's formula for the power law: h N_B (n d² + n² d + n² d / h) + 2 n d²
    if degree is None:
        issue = h * n_b * (n * d * d + n * n * d + n * n * d / h) + 2 * n * d * d
        assert flops.gam_macs(n, d, h, n_b) == issue


@pytest.mark.parametrize("pad", [True, False])
def test_fused_path_with_and_without_padded_values(pad):
    """The CPU layout (values padded to L·d) and the narrow one (d_v per head, for CUDA)."""
    torch.manual_seed(16)
    gam = GeneralizedAttention(8, 2, n_brains=3, f="poly", degree=2).double()
    with torch.no_grad():
        gam.mix_logits.normal_()
    y = torch.randn(3, 7, 8, dtype=torch.float64)
    for mask in _masks(3, 7):
        checked = _checked_mask(mask, 3, 7, y.device)
        z = gam._fused_heads(y, checked, gam.value(y), pad=pad)
        z_exp, _ = gam.heads(y, mask, need_weights=True)
        torch.testing.assert_close(z, z_exp, rtol=0, atol=1e-12)


@pytest.mark.parametrize("pad", [True, False])
def test_gam_fused_heads_broadcasts_one_feature_sequence_over_the_batch(pad):
    """The position branch of GAMRelativeAttention: one (1, n, d) feature sequence, batched V."""
    from attnlab.nn.gam import gam_fused_heads

    g = torch.Generator().manual_seed(17)
    p = torch.randn(1, 6, 4, generator=g, dtype=torch.float64)
    b = torch.randn(2, 3, 4, 4, generator=g, dtype=torch.float64) / 4
    mix = torch.softmax(torch.randn(2, 3, generator=g, dtype=torch.float64), -1)
    values = torch.randn(5, 6, 4, generator=g, dtype=torch.float64)
    mask = torch.tril(torch.ones(1, 6, 6, dtype=torch.bool))
    mask[0, 3] = False  # a query with no key
    got = gam_fused_heads(p, b, mix, values, mask, n1=1.5, pad=pad)
    psi = torch.softmax(gam_logits(p, b, n1=1.5).masked_fill(~mask[:, None, None], -torch.inf), -1)
    theta = torch.einsum("bhinm,hi->bhnm", psi.nan_to_num(0.0), mix)  # (1, h, n, n)
    ref = theta @ values.reshape(5, 6, 2, 2).transpose(1, 2)  # (5, h, n, d_v)
    assert got.shape == (5, 2, 6, 2)
    torch.testing.assert_close(got, ref, rtol=0, atol=1e-12)
    assert torch.all(got[:, :, 3] == 0)


# ---- recompute (torch.utils.checkpoint per brain) and what the backward pass keeps -----------


@pytest.mark.parametrize("pad", [True, False])
@pytest.mark.parametrize(("f", "n1", "degree"), [("power", 2.0, None), ("poly", 1.0, 2)])
def test_recomputed_brains_give_the_explicit_outputs_and_gradients(pad, f, n1, degree):
    torch.manual_seed(18)
    kw = {"n1": n1} if degree is None else {"f": f, "degree": degree}
    gam = GeneralizedAttention(8, 2, n_brains=3, recompute=True, **kw).double()
    with torch.no_grad():
        gam.mix_logits.normal_()
    y = torch.randn(3, 7, 8, dtype=torch.float64)
    for mask in _masks(3, 7):
        fused = gam._fused_heads(y, _checked_mask(mask, 3, 7, y.device), gam.value(y), pad=pad)
        explicit, _ = gam.heads(y, mask, need_weights=True)
        torch.testing.assert_close(fused, explicit, rtol=0, atol=1e-12)
        cot = torch.randn_like(fused)  # the same upstream gradient for both paths
        used = [p for name, p in gam.named_parameters() if not name.startswith("out_proj")]
        g_fused = torch.autograd.grad((fused * cot).sum(), used)
        g_explicit = torch.autograd.grad((explicit * cot).sum(), used)
        for a, b in zip(g_fused, g_explicit, strict=True):
            torch.testing.assert_close(a, b, rtol=0, atol=1e-11)


def test_recompute_must_be_a_bool():
    with pytest.raises(TypeError, match="recompute"):
        GeneralizedAttention(8, 2, recompute="yes")


def test_fused_path_keeps_o_n_for_the_backward_pass_the_explicit_one_o_n_squared():
    """What the backward pass keeps: linear in n on the fused path, quadratic on the explicit."""
    torch.manual_seed(19)
    gam = GeneralizedAttention(8, 2, n_brains=2, n1=2)
    kept = {}
    for n in (128, 256):
        y = torch.randn(1, n, 8, requires_grad=True)
        kept["fused", n] = saved_bytes(lambda y=y: gam(y))
        kept["explicit", n] = saved_bytes(lambda y=y: gam(y, need_weights=True))
    assert kept["fused", 256] / kept["fused", 128] < 2.2  # n doubles, memory doubles
    assert kept["explicit", 256] / kept["explicit", 128] > 3.5  # n doubles, memory × 4
    assert kept["fused", 256] < kept["explicit", 256] / 4


@pytest.mark.parametrize(("f", "degree"), [("power", None), ("poly", 2), ("poly", 3)])
def test_fused_path_keeps_two_feature_rows_per_brain_and_token(f, degree):
    """What the backward pass keeps per token: each brain's queries and output (L·d each),
    plus a few shared rows (keys, values, the input): the Performance page's 2 h N_B L d."""
    torch.manual_seed(20)
    d, h, n_b = 16, 2, 2
    kw = {"n1": 2.0} if degree is None else {"f": f, "degree": degree}
    gam = GeneralizedAttention(d, h, n_brains=n_b, **kw)
    kept = {}
    for n in (64, 128):
        y = torch.randn(1, n, d, requires_grad=True)
        kept[n] = saved_bytes(lambda y=y: gam(y))
    per_token = (kept[128] - kept[64]) / 64 / 4  # float32 numbers per token
    width = (degree or 1) * d  # L·d
    assert 2 * h * n_b * width <= per_token <= 2 * h * n_b * width + 6 * width


def _fused_args():
    g = torch.Generator().manual_seed(21)
    y = torch.randn(2, 5, 4, generator=g)
    return {
        "y": y,
        "b": torch.randn(2, 3, 4, 4, generator=g),
        "mix": torch.full((2, 3), 1 / 3),
        "values": torch.randn(2, 5, 4, generator=g),
        "mask": torch.ones(2, 5, 5, dtype=torch.bool),
    }


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"b": torch.randn(3, 4, 4)}, "b must have shape \\(h, N_B, d, d\\)"),
        ({"mix": torch.full((3, 2), 0.5)}, "mix must have shape \\(h, N_B\\) = \\(2, 3\\)"),
        ({"values": torch.randn(2, 5, 6)}, "values must have shape \\(batch, n, d\\)"),
        ({"values": torch.randn(2, 4, 4)}, "values must have shape \\(batch, n, d\\)"),
        ({"b": torch.randn(3, 1, 4, 4), "mix": torch.ones(3, 1)}, "h = 3 must divide d = 4"),
        ({"mask": torch.ones(2, 5, 5)}, "mask must be boolean"),
        ({"mask": torch.ones(2, 5, 4, dtype=torch.bool)}, "does not broadcast to"),
        ({"mask": torch.ones(5, dtype=torch.bool)}, "mask must have shape \\(n, n\\) or"),
        ({"y": torch.randn(3, 5, 4)}, "y must have batch 1 or the batch of values"),
    ],
)
def test_gam_fused_heads_refuses_arguments_that_do_not_fit(change, message):
    from attnlab.nn.gam import gam_fused_heads

    args = {**_fused_args(), **change}
    with pytest.raises(ValueError, match=message):
        gam_fused_heads(args["y"], args["b"], args["mix"], args["values"], args["mask"], n1=2.0)


def test_gam_fused_heads_accepts_its_documented_layouts():
    from attnlab.nn.gam import gam_fused_heads

    args = _fused_args()
    out = gam_fused_heads(args["y"][:1], args["b"], args["mix"], args["values"], None, n1=2.0)
    assert out.shape == (2, 2, 5, 2)


def test_a_mask_on_another_device_is_named_in_the_error():
    gam = GeneralizedAttention(4, 2)
    mask = torch.ones(5, 5, dtype=torch.bool, device="meta")
    with pytest.raises(ValueError, match="mask is on meta but y is on cpu"):
        gam(torch.randn(1, 5, 4), mask)


@pytest.mark.parametrize(("n", "d", "h", "n_b", "degree"), [(12, 16, 4, 2, None), (9, 8, 2, 3, 3)])
def test_recompute_costs_one_more_forward_pass_of_every_brain(n, d, h, n_b, degree):
    """The Performance page's count for recompute: the fused count, plus each brain's part of
    it once more in the backward pass (the projections are not recomputed)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    flops = _load_flops()
    terms = degree or 1
    kw = {"n1": 2.0} if degree is None else {"f": "poly", "degree": degree}
    x = torch.randn(2, n, d)
    counts = {}
    for recompute in (False, True):
        torch.manual_seed(22)
        gam = GeneralizedAttention(d, h, n_brains=n_b, recompute=recompute, **kw)
        with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
            gam(x).sum().backward()
        counts[recompute] = counter.get_total_flops() // 2
    brains = flops.gam_fused_cpu_macs(n, d, h, n_b, terms) - 2 * n * d * d  # h N_B (...) only
    assert counts[True] - counts[False] == 2 * brains  # batch 2
    assert flops.gam_recompute_macs(n, d, h, n_b, terms) == (
        flops.gam_fused_cpu_macs(n, d, h, n_b, terms) + brains
    )


def test_a_numpy_mask_gets_the_contracts_type_error_on_both_paths():
    import numpy as np

    from attnlab.nn.gam import gam_fused_heads

    gam = GeneralizedAttention(4, 2)
    mask = np.ones((5, 5), dtype=bool)
    for need_weights in (False, True):
        with pytest.raises(TypeError, match="torch.from_numpy"):
            gam(torch.randn(1, 5, 4), mask, need_weights=need_weights)
    args = _fused_args()
    with pytest.raises(TypeError, match="torch.from_numpy"):
        gam_fused_heads(args["y"], args["b"], args["mix"], args["values"], mask, n1=2.0)


@pytest.mark.parametrize(("name", "value"), [("pad", "yes"), ("pad", 1), ("recompute", 1)])
def test_gam_fused_heads_flags_must_be_bools(name, value):
    from attnlab.nn.gam import gam_fused_heads

    args = _fused_args()
    with pytest.raises(TypeError, match=name):
        gam_fused_heads(
            args["y"], args["b"], args["mix"], args["values"], None, n1=2.0, **{name: value}
        )


def test_an_empty_width_is_refused_like_numpy_refuses_it():
    """M = 0 gave all-zero logits on the torch side; numpy refuses it (found by hypothesis)."""
    import attnlab

    with pytest.raises(ValueError, match="non-empty sequence"):
        attnlab.gam_logits(np.zeros((2, 0)), np.zeros((1, 0, 0)))
    with pytest.raises(ValueError, match=r"y must be a non-empty sequence \(batch, n, M\)"):
        gam_logits(torch.zeros(1, 2, 0), torch.zeros(1, 0, 0))
    from attnlab.nn.gam import gam_features

    with pytest.raises(ValueError, match="non-empty sequence"):
        gam_features(torch.zeros(1, 2, 0), torch.zeros(1, 0, 0))


# ---- the tiled path (attnlab.nn.tiled_attention per brain, appendix A1) ----------------------


@pytest.mark.parametrize(("f", "n1", "degree", "n_b"), FUSED_CASES)
@pytest.mark.parametrize("tiles", [None, (3, 2), (16, 4)])
def test_tiled_path_equals_explicit_path_in_float64(f, n1, degree, n_b, tiles):
    """Outputs and every parameter's gradient, with and without masks (empty rows included),
    with tiles that divide the length 7, do not, or cover it whole; None: gam_tiles(7)."""
    torch.manual_seed(25)
    d, h, batch, n = 8, 2, 3, 7
    gam = GeneralizedAttention(
        d, h, n_brains=n_b, f=f, n1=n1, degree=degree, tiled=True, tiles=tiles
    ).double()
    with torch.no_grad():
        gam.mix_logits.normal_()
        if gam.coeffs is not None:
            gam.coeffs.normal_()
    y = torch.randn(batch, n, d, dtype=torch.float64, requires_grad=True)
    for mask in _masks(batch, n):
        tiled = gam(y, mask)
        explicit, _ = gam(y, mask, need_weights=True)
        torch.testing.assert_close(tiled, explicit, rtol=0, atol=1e-12)
        cot = torch.randn_like(tiled)
        wrt = [y, *gam.parameters()]
        g_tiled = torch.autograd.grad((tiled * cot).sum(), wrt)
        g_explicit = torch.autograd.grad((explicit * cot).sum(), wrt)
        for a, b in zip(g_tiled, g_explicit, strict=True):
            torch.testing.assert_close(a, b, rtol=0, atol=1e-11)


def test_tiled_path_gradcheck_at_a_small_size():
    torch.manual_seed(26)
    gam = GeneralizedAttention(4, 2, n_brains=2, n1=2, tiled=True, tiles=(2, 3)).double()
    y = torch.randn(2, 5, 4, dtype=torch.float64, requires_grad=True)
    mask = torch.rand(2, 5, 5, generator=torch.Generator().manual_seed(2)) > 0.3
    mask[0, 1] = False
    assert torch.autograd.gradcheck(lambda y: gam(y, mask), (y,))


def test_tiled_path_keeps_each_brains_narrow_output_not_its_queries():
    """What the backward pass keeps per token on the tiled path: the shared keys, values and
    input (d each, plus the values' head slices sharing the values' storage), and per brain
    its d/h-wide output and one log-sum-exp; the queries (d wide) are rebuilt instead.
    The fused path keeps 2 d per brain (queries and padded output)."""
    torch.manual_seed(27)
    d, h, n_b = 16, 2, 2
    tiled = GeneralizedAttention(d, h, n_brains=n_b, n1=2.0, tiled=True, tiles=(16, 16))
    fused = GeneralizedAttention(d, h, n_brains=n_b, n1=2.0)
    kept = {}
    for n in (64, 128, 256):
        y = torch.randn(1, n, d, requires_grad=True)
        kept["tiled", n] = saved_bytes(lambda y=y: tiled(y))
        kept["fused", n] = saved_bytes(lambda y=y: fused(y))
    per_token = (kept["tiled", 256] - kept["tiled", 128]) / 128 / 4  # float32 numbers per token
    brains = h * n_b * (d // h + 1)  # output and log-sum-exp of every brain
    assert brains <= per_token <= brains + 6 * d
    growth = kept["tiled", 256] - kept["tiled", 128]  # 128 more tokens
    assert growth == 2 * (kept["tiled", 128] - kept["tiled", 64])  # twice 64 more: linear
    fused_per_token = (kept["fused", 256] - kept["fused", 128]) / 128 / 4
    assert fused_per_token >= 2 * h * n_b * d > per_token


def test_tiled_recomputed_queries_give_the_stored_queries_gradients():
    """The queries rebuilt in the backward pass are the forward's: same gradients as a tiled
    call that keeps them (the hooks off: attnlab.nn.tiled_attention on the same features)."""
    from attnlab.nn import tiled_attention
    from attnlab.nn.gam import gam_features

    torch.manual_seed(28)
    gam = GeneralizedAttention(6, 1, n_brains=1, n1=2, mix="uniform", tiled=True, tiles=(3, 4))
    gam = gam.double()
    y = torch.randn(2, 9, 6, dtype=torch.float64, requires_grad=True)
    z, _ = gam.heads(y)
    q, k = gam_features(y, gam.b[0, 0], n1=2.0)
    kept = tiled_attention(q, k, gam.value(y), scale=1.0, q_tile=3, k_tile=4).unsqueeze(1)
    torch.testing.assert_close(z, kept, rtol=0, atol=0)
    wrt = [y, gam.b]
    got, want = torch.autograd.grad(z.sum(), wrt), torch.autograd.grad(kept.sum(), wrt)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-13)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"tiled": 1}, TypeError, "tiled must be True or False"),
        ({"tiled": True, "recompute": True}, ValueError, "pick one"),
        ({"tiles": (4, 4)}, ValueError, "pass tiled=True"),
        ({"tiled": True, "tiles": 4}, TypeError, "tiles must be a tuple"),
        ({"tiled": True, "tiles": (4, 4, 4)}, TypeError, "tiles must be a tuple"),
        ({"tiled": True, "tiles": (0, 4)}, ValueError, "q_tile"),
        ({"tiled": True, "tiles": (4, 2.0)}, TypeError, "k_tile"),
    ],
)
def test_tiled_options_are_checked(kwargs, error, message):
    with pytest.raises(error, match=message):
        GeneralizedAttention(8, 2, **kwargs)


def test_gam_tiles_rule():
    from attnlab.nn.gam import MAX_TILE, gam_tiles

    for n in (1, 7, 8, 9, 100, 1024, 4096, 4097, 10**5):
        q_tile, k_tile = gam_tiles(n)
        assert 1 <= k_tile <= max(1, n / 8) and k_tile <= MAX_TILE
        assert math.ceil(n / k_tile) >= min(8, n)  # at least eight key tiles (n >= 8)
        assert q_tile == min(n, MAX_TILE)
