"""Tests of attnlab.nn.positions: Shaw's layer against a float64 loop, GAM's branch vs numpy."""

import math

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from attnlab import gam_relative_attention
from attnlab import gam_relative_vectors as np_gam_relative_vectors
from attnlab.nn import GAMRelativeAttention, ShawRelativeAttention
from attnlab.nn.positions import combine_geometric, gam_relative_vectors
from attnlab.nn.positions.gam_relative import REL_EMBEDDINGS


def shaw_loop(layer: ShawRelativeAttention, x: np.ndarray, mask=None) -> np.ndarray:
    """Shaw et al. eq. 2-4 per head in float64 loops, then concat and W_O (no biases)."""
    w_q, w_k, w_v, w_o = (
        m.weight.detach().double().numpy().T for m in (layer.w_q, layer.w_k, layer.w_v, layer.w_o)
    )
    a_k = layer.rel_k.weight.detach().double().numpy()
    a_v = layer.rel_v.weight.detach().double().numpy()
    s, d = x.shape
    h, d_k, clip = layer.h, layer.d_k, layer.k_max
    heads = []
    for a in range(h):
        cols = slice(a * d_k, (a + 1) * d_k)
        q, k, v = (x @ w_q)[:, cols], (x @ w_k)[:, cols], (x @ w_v)[:, cols]
        z = np.zeros((s, d_k))
        for i in range(s):
            allowed = [j for j in range(s) if mask is None or mask[i, j]]
            if not allowed:
                continue
            idx = {j: max(-clip, min(clip, j - i)) + clip for j in allowed}
            e = np.array([q[i] @ (k[j] + a_k[idx[j]]) / math.sqrt(d_k) for j in allowed])
            alpha = np.exp(e - e.max())
            alpha /= alpha.sum()
            for weight, j in zip(alpha, allowed, strict=True):
                z[i] += weight * (v[j] + a_v[idx[j]])
        heads.append(z)
    return np.concatenate(heads, axis=1) @ w_o


@pytest.mark.parametrize(("d", "h", "k_max", "s"), [(6, 2, 2, 7), (4, 1, 0, 3), (8, 4, 5, 4)])
def test_shaw_module_matches_loop(d, h, k_max, s):
    torch.manual_seed(0)
    layer = ShawRelativeAttention(d, h, k_max=k_max).double()
    x = torch.randn(2, s, d, dtype=torch.float64)
    mask = torch.rand(s, s) < 0.7
    mask[0] = False  # one fully-masked query: zero output
    for m in (None, mask):
        out, weights = layer(x, m, need_weights=True)
        for b in range(2):
            expected = shaw_loop(layer, x[b].numpy(), None if m is None else m.numpy())
            np.testing.assert_allclose(out[b].detach().numpy(), expected, atol=1e-10)
    assert torch.all(weights[:, :, 0] == 0) and torch.all(out[:, 0] == 0)


def test_shaw_k_max_0_without_value_table_is_multihead_attention():
    # With k_max = 0 every key gets the same a^K: it shifts each row's logits by a constant, which
    # softmax ignores. With a^V = 0 the layer is plain multi-head attention.
    torch.manual_seed(1)
    d, h = 8, 2
    layer = ShawRelativeAttention(d, h, k_max=0)
    with torch.no_grad():
        layer.rel_v.weight.zero_()
    mha = nn.MultiheadAttention(d, h, bias=False, batch_first=True)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([layer.w_q.weight, layer.w_k.weight, layer.w_v.weight]))
        mha.out_proj.weight.copy_(layer.w_o.weight)
    x = torch.randn(3, 6, d)
    ours, w_ours = layer(x, need_weights=True)
    theirs, w_theirs = mha(x, x, x, average_attn_weights=False)
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w_ours, w_theirs, atol=1e-5, rtol=1e-5)


def test_shaw_any_length_and_masks():
    torch.manual_seed(2)
    layer = ShawRelativeAttention(4, 2, k_max=2)
    for s in (1, 3, 40):
        out, weights = layer(torch.randn(2, s, 4), need_weights=True)
        assert out.shape == (2, s, 4) and torch.allclose(weights.sum(-1), torch.ones(2, 2, s))
    causal = torch.tril(torch.ones(5, 5, dtype=torch.bool))
    _, w2 = layer(torch.randn(2, 5, 4), causal, need_weights=True)
    _, w3 = layer(torch.randn(2, 5, 4), causal.expand(2, 5, 5), need_weights=True)
    assert torch.all(w2[..., ~causal] == 0) and torch.all(w3[..., ~causal] == 0)


def test_shaw_bad_input():
    with pytest.raises(ValueError, match="divisor"):
        ShawRelativeAttention(6, 4, 1)
    with pytest.raises(
        ValueError, match=r"k_max \(the clipping distance\) must be an integer >= 0"
    ):
        ShawRelativeAttention(4, 2, -1)
    with pytest.raises(TypeError, match="integer"):
        ShawRelativeAttention(4, 2, 1.5)
    layer = ShawRelativeAttention(4, 2, 1)
    with pytest.raises(ValueError, match="shape"):
        layer(torch.randn(3, 4))
    with pytest.raises(ValueError, match="boolean"):
        layer(torch.randn(1, 3, 4), torch.ones(3, 3))
    with pytest.raises(ValueError, match="mask of shape"):
        layer(torch.randn(1, 3, 4), torch.ones(4, 4, dtype=torch.bool))


# ---- GAM ------------------------------------------------------------------------------------


def test_torch_relative_vectors_match_numpy_and_paper():
    positions = torch.tensor([[0, 1, 2], [0, 1, 3]])
    r = gam_relative_vectors(positions)
    assert r[1].tolist() == [[1, 2, 4], [2, 1, 3], [4, 3, 1]]
    np.testing.assert_array_equal(r[0].numpy(), np_gam_relative_vectors([0, 1, 2]))
    for bad in (torch.tensor([0, 2, 2]), torch.tensor([3, 1]), torch.tensor([0.0, 1.0])):
        with pytest.raises(ValueError, match="positions"):
            gam_relative_vectors(bad)


@pytest.mark.parametrize(("combine", "n1", "h"), [("linear", 1.0, 1), ("geometric", 2.0, 2)])
def test_gam_relative_module_matches_numpy(combine, n1, h):
    torch.manual_seed(3)
    d, n = 4, 5
    layer = GAMRelativeAttention(d, n, h=h, n_brains=2, n1=n1, combine=combine, c1=0.3)
    layer = layer.double()
    y = torch.randn(2, n, d, dtype=torch.float64)
    positions = torch.tensor([1, 2, 5, 6, 11])
    out, (phi, theta) = layer(y, positions, need_weights=True)
    p = layer.embedded_positions(positions).detach().numpy()
    w_v = layer.content.value.weight.detach().numpy().T
    b_v = layer.content.value.bias.detach().numpy()
    w_o = layer.content.out_proj.weight.detach().numpy().T
    b_o = layer.content.out_proj.bias.detach().numpy()
    d_v = d // h
    for b in range(2):
        yb = y[b].numpy()
        heads = []
        for a in range(h):
            cols = slice(a * d_v, (a + 1) * d_v)
            # The value bias as an extra input column of ones (its brain rows/columns are
            # zero, so the logits are unchanged); rows of Φ and Θ sum to one.
            w_aug = np.vstack([w_v[:, cols], b_v[cols]])
            y_aug = np.hstack([yb, np.ones((n, 1))])
            p_aug = np.hstack([p, np.zeros((n, 1))])
            pad = np.zeros((2, d + 1, d + 1))
            b_c, b_p = pad.copy(), pad.copy()
            b_c[:, :d, :d] = layer.content.b[a].detach().numpy()
            b_p[:, :d, :d] = layer.b_p[a].detach().numpy()
            z, phi_np, theta_np = gam_relative_attention(
                y_aug,
                p_aug,
                b_c,
                b_p,
                w_aug,
                combine=combine,
                c1=0.3,
                n1=n1,
                mix=layer.content.mix_weights[a].detach().numpy(),
                mix_s=layer.mix_s_weights[a].detach().numpy(),
            )
            np.testing.assert_allclose(phi[b, a].detach().numpy(), phi_np, atol=1e-10)
            np.testing.assert_allclose(theta[b, a].detach().numpy(), theta_np, atol=1e-10)
            heads.append(z)
        expected = np.concatenate(heads, axis=1) @ w_o + b_o
        np.testing.assert_allclose(out[b].detach().numpy(), expected, atol=1e-10)


def test_gam_relative_module_gradients_finite():
    torch.manual_seed(4)
    layer = GAMRelativeAttention(4, 3, combine="geometric")
    y = torch.randn(2, 3, 4)
    for out in (layer(y), layer(y, need_weights=True)[0]):  # the fused and the explicit path
        layer.zero_grad()
        out.sum().backward()
        for param in layer.parameters():
            assert param.grad is not None and torch.all(torch.isfinite(param.grad))
    z = torch.tensor([1.0, -2.0, 0.0], requires_grad=True)
    combine_geometric(z, torch.tensor([-1.0, -8.0, 3.0])).sum().backward()
    assert torch.all(torch.isfinite(z.grad))


def test_gam_relative_module_fixes_n_and_validates():
    layer = GAMRelativeAttention(4, 3)
    with pytest.raises(ValueError, match="n=3"):
        layer(torch.randn(1, 4, 4))
    with pytest.raises(ValueError, match="length n=3"):
        layer(torch.randn(1, 3, 4), positions=torch.tensor([0, 1, 2, 3]))
    with pytest.raises(ValueError, match="strictly increasing"):
        layer(torch.randn(1, 3, 4), positions=torch.tensor([0, 2, 1]))
    for c1 in (0.0, 1.0, 1.2, -0.1):
        with pytest.raises(ValueError, match="c1"):
            GAMRelativeAttention(4, 3, c1=c1)
    with pytest.raises(ValueError, match="combine"):
        GAMRelativeAttention(4, 3, combine="mean")
    with pytest.raises(ValueError, match="rel_embedding must be one of 'none', 'scaled', 'layer"):
        GAMRelativeAttention(4, 3, rel_embedding="layer_norm")


def test_gam_relative_module_mask():
    torch.manual_seed(5)
    layer = GAMRelativeAttention(4, 4, h=2, n_brains=2)
    causal = torch.tril(torch.ones(4, 4, dtype=torch.bool))
    _, (phi, theta) = layer(torch.randn(3, 4, 4), mask=causal.expand(3, 4, 4), need_weights=True)
    for weights in (phi, theta):
        assert torch.all(weights[..., ~causal] == 0)
        torch.testing.assert_close(weights.sum(-1), torch.ones(3, 2, 4))


def test_gam_relative_module_batched_positions_match_numpy():
    # One set of corpus positions per batch row: Θ of row b must be GAM's eq. 22-24 applied to
    # p = r(positions[b]) W^R + b^R, with r from the numpy closed form (f = identity here).
    torch.manual_seed(6)
    layer = GAMRelativeAttention(4, 3, h=1, n_brains=2).double()
    positions = torch.tensor([[0, 1, 2], [0, 4, 5]])
    _, (_, theta) = layer(torch.randn(2, 3, 4, dtype=torch.float64), positions, need_weights=True)
    w_r = layer.embed.weight.detach().numpy().T
    b_r = layer.embed.bias.detach().numpy()
    b_p = layer.b_p[0].detach().numpy()
    w_s = layer.mix_s_weights[0].detach().numpy()
    for b in range(2):
        p = np_gam_relative_vectors(positions[b].numpy()) @ w_r + b_r
        xi = []
        for brain in b_p:
            logits = p @ brain @ p.T
            e = np.exp(logits - logits.max(axis=1, keepdims=True))
            xi.append(e / e.sum(axis=1, keepdims=True))
        expected = w_s[0] * xi[0] + w_s[1] * xi[1]
        np.testing.assert_allclose(theta[b, 0].detach().numpy(), expected, atol=1e-10)
    assert not np.allclose(theta[0].detach().numpy(), theta[1].detach().numpy())


@pytest.mark.parametrize(
    ("combine", "f", "n1", "degree", "rel_embedding"),
    [
        ("linear", "power", 1.0, None, "none"),
        ("geometric", "power", 2.0, None, "layernorm"),
        ("linear", "power", 1.5, None, "scaled"),
        ("geometric", "poly", 1.0, 3, "none"),
    ],
)
@pytest.mark.parametrize("path", [{}, {"recompute": True}, {"tiled": True}])
def test_gam_relative_fused_path_equals_explicit_path(combine, f, n1, degree, rel_embedding, path):
    # need_weights=False runs both branches through the fused kernel (eq. 20 and 25 combine
    # head outputs, not weights); it must give the explicit path's output, masks included,
    # also when every brain is recomputed in the backward pass, or runs through
    # attnlab.nn.tiled_attention (the tiled path, both branches).
    torch.manual_seed(8)
    d, n, batch = 6, 5, 3
    layer = GAMRelativeAttention(
        d, n, h=2, n_brains=2, f=f, n1=n1, degree=degree, combine=combine,
        rel_embedding=rel_embedding, **path,
    ).double()  # fmt: skip
    y = torch.randn(batch, n, d, dtype=torch.float64, requires_grad=True)
    positions = torch.tensor([[0, 2, 3, 7, 9], [1, 2, 3, 4, 5], [0, 5, 6, 8, 20]])
    mask = torch.rand(batch, n, n, generator=torch.Generator().manual_seed(1)) < 0.6
    mask[:, 1] = False  # a query that sees no key: zero output on both paths
    for m in (None, mask):
        explicit, _ = layer(y, positions, mask=m, need_weights=True)
        fused = layer(y, positions, mask=m, need_weights=False)
        torch.testing.assert_close(fused, explicit, atol=1e-12, rtol=0)
        wrt = [y, *layer.parameters()]
        g_explicit = torch.autograd.grad(explicit.square().sum(), wrt, allow_unused=True)
        g_fused = torch.autograd.grad(fused.square().sum(), wrt, allow_unused=True)
        for a, b in zip(g_fused, g_explicit, strict=True):
            assert (a is None) == (b is None)
            if a is not None:
                torch.testing.assert_close(a, b, atol=1e-9, rtol=1e-9)


# ---- GAM: how r^α is embedded (rel_embedding) ------------------------------------------------


def test_rel_embedding_choices_are_the_three_documented():
    assert set(REL_EMBEDDINGS) == {"none", "scaled", "layernorm"}
    assert GAMRelativeAttention(4, 3).rel_embedding == "none"  # chapter 09's default


@pytest.mark.parametrize("rel_embedding", ["none", "scaled", "layernorm"])
def test_rel_embedding_shapes_and_no_extra_parameters(rel_embedding):
    torch.manual_seed(7)
    layer = GAMRelativeAttention(6, 4, h=2, n_brains=2, rel_embedding=rel_embedding)
    baseline = GAMRelativeAttention(6, 4, h=2, n_brains=2)
    positions = torch.tensor([[0, 2, 3, 9]] * 3)
    out, (phi, theta) = layer(torch.randn(3, 4, 6), positions=positions, need_weights=True)
    assert out.shape == (3, 4, 6) and phi.shape == theta.shape == (3, 2, 4, 4)
    assert layer.embedded_positions(torch.tensor([0, 1, 2, 3])).shape == (4, 6)
    torch.testing.assert_close(theta.sum(-1), torch.ones(3, 2, 4), atol=1e-6, rtol=0)
    count = sum(p.numel() for p in layer.parameters())
    assert count == sum(p.numel() for p in baseline.parameters())


def test_rel_embedding_scaled_is_none_on_r_over_n():
    # Independent reference: r from numpy's closed form, divided by n, through W^R and b^R.
    torch.manual_seed(8)
    n, d = 5, 4
    scaled = GAMRelativeAttention(d, n, rel_embedding="scaled").double()
    positions = torch.tensor([1, 2, 5, 6, 11])
    r = np_gam_relative_vectors(positions.numpy()).astype(np.float64)
    w_r = scaled.embed.weight.detach().numpy().T
    b_r = scaled.embed.bias.detach().numpy()
    p = scaled.embedded_positions(positions).detach().numpy()
    np.testing.assert_allclose(p, (r / n) @ w_r + b_r, atol=1e-12)
    # and "none" with the same weights on r / n, i.e. on positions scaled down by n
    none = GAMRelativeAttention(d, n).double()
    none.load_state_dict(scaled.state_dict())
    np.testing.assert_allclose(none.embed(torch.as_tensor(r / n)).detach().numpy(), p, atol=1e-12)
    assert not np.allclose(none.embedded_positions(positions).detach().numpy(), p)


def test_rel_embedding_layernorm_rows_have_mean_0_variance_1():
    torch.manual_seed(9)
    n, d = 6, 8
    layer = GAMRelativeAttention(d, n, rel_embedding="layernorm").double()
    positions = torch.tensor([[0, 1, 2, 3, 4, 5], [2, 3, 7, 8, 20, 40]])
    p = layer.embedded_positions(positions).detach().numpy()
    np.testing.assert_allclose(p.mean(axis=-1), 0.0, atol=1e-12)
    np.testing.assert_allclose(p.var(axis=-1), 1.0, atol=1e-3)  # LayerNorm's eps = 1e-5
    raw = layer.embed(gam_relative_vectors(positions).double()).detach().numpy()
    expected = (raw - raw.mean(-1, keepdims=True)) / np.sqrt(raw.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(p, expected, atol=1e-12)
    # "none" does not have that property: its rows are far from unit variance
    none = GAMRelativeAttention(d, n).double()
    none.load_state_dict(layer.state_dict())
    assert none.embedded_positions(positions).detach().numpy().var(axis=-1).max() > 2.0


@pytest.mark.parametrize("rel_embedding", ["none", "scaled", "layernorm"])
def test_rel_embedding_training_smoke(rel_embedding):
    # A few Adam steps on a fixed regression target lower the loss and keep every value finite.
    torch.manual_seed(10)
    layer = GAMRelativeAttention(4, 5, h=2, n_brains=2, n1=2.0, rel_embedding=rel_embedding)
    y, target = torch.randn(8, 5, 4), torch.randn(8, 5, 4)
    opt = torch.optim.Adam(layer.parameters(), lr=1e-2)
    losses = []
    for _ in range(30):
        opt.zero_grad()
        loss = F.mse_loss(layer(y), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert all(math.isfinite(v) for v in losses) and losses[-1] < 0.9 * losses[0]


DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
def test_modules_run_on_the_input_device(device):
    # CPU is the reference; on a GPU (when there is one) the same weights give the same output.
    torch.manual_seed(11)
    shaw = ShawRelativeAttention(8, 2, k_max=2).double()
    gam = GAMRelativeAttention(8, 5, h=2, n_brains=2, rel_embedding="scaled").double()
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    positions = torch.tensor([0, 2, 3, 7, 8])  # corpus positions may stay on the CPU
    ref_shaw, ref_gam = shaw(x), gam(x, positions)
    out_shaw = shaw.to(device)(x.to(device))
    out_gam = gam.to(device)(x.to(device), positions)
    assert out_shaw.device.type == out_gam.device.type == device
    torch.testing.assert_close(out_shaw.cpu(), ref_shaw, atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(out_gam.cpu(), ref_gam, atol=1e-10, rtol=1e-10)
