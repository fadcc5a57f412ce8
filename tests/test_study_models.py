"""The study's models on gapped windows and other lengths, and GAM's embedding axis."""

from __future__ import annotations

import math

import pytest
import torch

import attnlab.nn.positions.gam_relative as gam_relative_module
from attnlab.nn import GAMRelativeAttention, GeneralizedAttention, ShawRelativeAttention
from attnlab.study import (
    CorpusShawAttention,
    LuongSelfAttention,
    RunConfig,
    StudyModel,
    make_attention,
    run_one,
    uses_embedding,
)
from attnlab.study.slots import corpus_relative_index

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_corpus_index_by_hand():
    index = corpus_relative_index(torch.tensor([[0, 2, 3], [1, 5, 6]]), k_max=2)
    # [b, i, j] = clip(p_j - p_i, -2, 2) + 2
    assert index.tolist() == [[[2, 4, 4], [0, 2, 3], [0, 1, 2]], [[2, 4, 4], [0, 2, 3], [0, 1, 2]]]


def test_corpus_shaw_equals_shaw_on_consecutive_windows():
    torch.manual_seed(0)
    layer = CorpusShawAttention(8, 2, 3, bias=True)
    assert isinstance(layer, ShawRelativeAttention)
    x = torch.randn(2, 6, 8)
    plain = layer(x)
    consecutive = layer(x, positions=torch.arange(6).expand(2, 6))
    assert plain.shape == consecutive.shape == (2, 6, 8)
    assert torch.allclose(plain, consecutive, atol=1e-6)
    out, weights = layer(x, positions=torch.arange(6), need_weights=True)  # Shaw's convention
    assert torch.equal(out, consecutive) and weights.shape == (2, 2, 6, 6)


def test_corpus_shaw_against_a_float64_loop_on_gapped_positions():
    torch.manual_seed(1)
    d, h, k_max = 4, 2, 2
    layer = CorpusShawAttention(d, h, k_max).double()
    x = torch.randn(1, 4, d, dtype=torch.float64)
    p = torch.tensor([[0, 3, 4, 9]])
    d_k = d // h
    q, k, v = layer.w_q(x)[0], layer.w_k(x)[0], layer.w_v(x)[0]
    heads = []
    for a in range(h):
        cols = slice(a * d_k, (a + 1) * d_k)
        z = torch.zeros(4, d_k, dtype=torch.float64)
        for i in range(4):
            rel = [max(-k_max, min(k_max, int(p[0, j] - p[0, i]))) + k_max for j in range(4)]
            logits = torch.stack(
                [q[i, cols] @ (k[j, cols] + layer.rel_k.weight[rel[j]]) for j in range(4)]
            ) / math.sqrt(d_k)
            w = torch.softmax(logits, dim=0)
            for j in range(4):
                z[i] += w[j] * (v[j, cols] + layer.rel_v.weight[rel[j]])
        heads.append(z)
    expected = layer.w_o(torch.cat(heads, dim=-1))
    assert torch.allclose(layer(x, positions=p)[0], expected, atol=1e-10)


def test_luong_reads_corpus_distances():
    torch.manual_seed(2)
    layer = LuongSelfAttention(8, 2, rel_k=2)
    x = torch.randn(1, 4, 8)
    gapped, shifted = torch.tensor([[0, 3, 4, 9]]), torch.tensor([[5, 8, 9, 14]])
    assert torch.allclose(layer(x, positions=gapped), layer(x, positions=shifted), atol=1e-6)
    assert not torch.allclose(layer(x, positions=gapped), layer(x), atol=1e-4)


def test_gam_relative_gets_the_embedding_axis():
    for embedding in ("none", "layernorm", "scaled"):
        inner = make_attention("gam-p2", 8, 2, 6, relative=True, embedding=embedding).inner
        assert isinstance(inner, GAMRelativeAttention) and inner.rel_embedding == embedding
    with pytest.raises(ValueError, match="applies to GAM's relative branch only"):
        make_attention("sdpa", 8, 2, 6, relative=True, embedding="layernorm")
    with pytest.raises(ValueError, match="embedding must be one of"):
        make_attention("gam-p2", 8, 2, 6, relative=True, embedding="sqrt")
    assert uses_embedding("gam-poly", "rel") and not uses_embedding("gam-poly", "abs")


def test_run_config_normalises_and_checks_the_embedding():
    assert RunConfig("gapped", "sdpa", "rel", 0).embedding == "-"
    assert RunConfig("gapped", "gam-p1", "rel", 0).embedding == "none"
    with pytest.raises(ValueError, match="relative positions only"):
        RunConfig("gapped", "gam-p1", "abs", 0, embedding="layernorm")
    with pytest.raises(ValueError, match="unknown task"):
        RunConfig("sort", "gam-p1", "abs", 0)


def test_which_models_accept_another_length():
    """Shaw's tables work at any length; absolute positions and GAM's r embedding do not."""
    torch.manual_seed(0)
    shaw = StudyModel(10, 10, 6, "sdpa", "rel", d=8)
    luong = StudyModel(10, 10, 6, "luong", "rel", d=8)
    assert not shaw.fixed_length and not luong.fixed_length
    assert shaw(torch.zeros(2, 11, dtype=torch.long)).shape == (2, 11, 10)
    for attention, positions in (("sdpa", "abs"), ("gam-p1", "rel"), ("gam-p2", "abs")):
        model = StudyModel(10, 10, 6, attention, positions, d=8)
        assert model.fixed_length
        with pytest.raises(ValueError, match="tokens must have shape"):
            model(torch.zeros(2, 11, dtype=torch.long))


def test_absolute_positions_use_the_corpus_span():
    model = StudyModel(10, 10, 4, "sdpa", "abs", d=8, span=10)
    assert model.pos.num_embeddings == 10
    tokens = torch.zeros(1, 4, dtype=torch.long)
    a = model(tokens, torch.tensor([[0, 1, 2, 3]]))
    b = model(tokens, torch.tensor([[0, 4, 5, 9]]))
    assert not torch.allclose(a, b)
    with pytest.raises(ValueError, match=r"lie in \[0, 10\)"):
        model(tokens, torch.tensor([[0, 4, 5, 10]]))


def test_run_one_measures_validation_test_and_length():
    fast = dict(steps=10, batch_size=8, d=8)
    shaw = run_one(RunConfig("shift", "sdpa", "rel", 0, long_n=24, **fast), chunk=10)
    assert 0 <= float(shaw["long_accuracy"]) <= 1 and shaw["device"] == "cpu"
    assert shaw["val_accuracy"] != "" and 0 <= float(shaw["val_accuracy"]) <= 1
    fixed = run_one(RunConfig("shift", "gam-p1", "rel", 0, long_n=24, **fast), chunk=10)
    assert math.isnan(float(fixed["long_accuracy"]))  # built for n = 16: not measured
    gapped = run_one(
        RunConfig("gapped", "gam-p2", "rel", 0, embedding="layernorm", **fast), chunk=10
    )
    assert gapped["embedding"] == "layernorm" and math.isfinite(float(gapped["test_loss"]))
    with pytest.raises(ValueError, match="long_n needs"):
        run_one(RunConfig("recall", "sdpa", "rel", 0, long_n=24, **fast), chunk=10)


def test_gam_relative_slot_keeps_the_explicit_path_the_study_ran(monkeypatch):
    # Chapter 10's GAM-relative rows were trained when GAMRelativeAttention returned its
    # weights by default, i.e. on its explicit path; the slot keeps that path although the
    # module's default is now the fused one (the two agree to rounding, not to the bit).
    torch.manual_seed(3)
    slot = make_attention("gam-p2-b2", 8, 2, 6, relative=True, embedding="layernorm")
    x, positions = torch.randn(3, 6, 8), torch.tensor([0, 2, 3, 5, 8, 9])
    expected, _ = slot.inner(x, positions=positions, need_weights=True)

    def refuse(*args, **kwargs):
        raise AssertionError("the fused path ran")

    monkeypatch.setattr(gam_relative_module, "gam_fused_heads", refuse)
    monkeypatch.setattr(GeneralizedAttention, "_fused_heads", refuse)
    with pytest.raises(AssertionError, match="the fused path ran"):
        slot.inner(x, positions=positions)  # the module's default: the patch is in force
    assert torch.equal(slot(x, positions=positions), expected)
    # The other slots call their module's default and get one tensor back.
    for name, relative in (("sdpa", True), ("sdpa", False), ("luong", True)):
        other = make_attention(name, 8, 2, 6, relative=relative)
        assert not other.explicit and other(x).shape == (3, 6, 8)


def test_corpus_shaw_needs_a_bool_need_weights_with_and_without_positions():
    from attnlab.study.slots import CorpusShawAttention

    layer = CorpusShawAttention(8, 2, 3)
    x = torch.randn(2, 5, 8)
    for positions in (None, torch.tensor([0, 2, 3, 7, 9])):
        with pytest.raises(TypeError, match="need_weights"):
            layer(x, positions=positions, need_weights=1)
