"""Tests of attnlab.nn.luong: the torch LuongAttention and the GRU encoder–decoder."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnlab import luong_attention
from attnlab.data import date_task
from attnlab.nn import LuongAttention, LuongSeq2Seq
from attnlab.nn.luong import exact_match, seq2seq_loss, task_tensors
from attnlab.train import count_parameters

SIZES = {"dot": (4, 4), "scaled": (4, 4), "general": (3, 5), "concat": (3, 5)}


def make(score: str) -> tuple[LuongAttention, torch.Tensor, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    d_q, d_k = SIZES[score]
    attn = LuongAttention(score, d_q, d_k, attn_size=6).double()
    query = torch.randn(2, 3, d_q, dtype=torch.float64)
    keys = torch.randn(2, 7, d_k, dtype=torch.float64)
    values = torch.randn(2, 7, 2, dtype=torch.float64)
    return attn, query, keys, values


@pytest.mark.parametrize("score", ["dot", "scaled", "general", "concat"])
def test_module_matches_numpy_column_convention(score):
    attn, query, keys, values = make(score)
    out, weights = attn(query, keys, values)
    for b in range(2):
        # The numpy function takes one token per column: transpose each batch element.
        ref_out, ref_w = luong_attention(
            query[b].numpy().T,
            keys[b].numpy().T,
            values[b].numpy().T,
            score,
            **attn.column_weights(),
        )
        np.testing.assert_allclose(out[b].detach().numpy(), ref_out.T, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(weights[b].detach().numpy(), ref_w.T, rtol=1e-10, atol=1e-12)


def test_scaled_matches_torch_builtin():
    attn, query, keys, values = make("scaled")
    out, _ = attn(query, keys, values)
    ref = torch.nn.functional.scaled_dot_product_attention(query, keys, values)
    torch.testing.assert_close(out, ref)


def test_general_weight_is_luongs_w_a():
    attn, query, keys, _ = make("general")
    w_a = attn.w.weight  # (d_q, d_k)
    expected = torch.einsum("bnq,qk,bmk->bnm", query, w_a, keys)  # h_tᵀ W_a h̄_s
    torch.testing.assert_close(attn.scores(query, keys), expected)


def test_concat_splits_into_bahdanau():
    attn, query, keys, _ = make("concat")
    d_q = query.shape[-1]
    w, u = attn.w.weight[:, :d_q], attn.w.weight[:, d_q:]
    expected = torch.empty(2, 3, 7, dtype=torch.float64)
    for b in range(2):
        for j in range(3):
            for i in range(7):
                expected[b, j, i] = attn.v_a @ torch.tanh(w @ query[b, j] + u @ keys[b, i])
    torch.testing.assert_close(attn.scores(query, keys), expected)
    # ... and the stacked form of Luong's paper gives the same numbers.
    stacked = torch.cat([query[0, 1], keys[0, 4]])
    torch.testing.assert_close(
        attn.v_a @ torch.tanh(attn.w.weight @ stacked), attn.scores(query, keys)[0, 1, 4]
    )


def test_key_mask_ignores_padding_and_zeroes_empty_rows():
    attn, query, keys, values = make("dot")
    mask = torch.ones(2, 7, dtype=torch.bool)
    mask[0, 4:] = False
    mask[1] = False
    out, weights = attn(query, keys, values, key_mask=mask)
    ref_out, ref_w = attn(query[:1], keys[:1, :4], values[:1, :4])
    torch.testing.assert_close(weights[0, :, :4], ref_w[0])
    assert torch.all(weights[0, :, 4:] == 0)
    torch.testing.assert_close(out[0], ref_out[0])
    assert torch.all(weights[1] == 0) and torch.all(out[1] == 0)


def test_errors_name_scores_and_shapes():
    with pytest.raises(ValueError, match="unknown score 'bilinear'"):
        LuongAttention("bilinear")
    with pytest.raises(ValueError, match="needs query_size and key_size"):
        LuongAttention("general", query_size=3)
    with pytest.raises(ValueError, match=r"d_q = d_k.*\(1, 2, 3\).*\(1, 4, 5\)"):
        LuongAttention("dot")(torch.zeros(1, 2, 3), torch.zeros(1, 4, 5))
    with pytest.raises(ValueError, match=r"d_q=3, d_k=5.*\(1, 2, 5\)"):
        LuongAttention("general", 3, 5)(torch.zeros(1, 2, 5), torch.zeros(1, 4, 5))
    with pytest.raises(ValueError, match=r"key_mask.*\(1, 4\)"):
        LuongAttention("dot")(torch.zeros(1, 2, 3), torch.zeros(1, 4, 3), key_mask=torch.ones(1, 5))


def test_seq2seq_shapes_gradients_and_padding():
    torch.manual_seed(0)
    task = date_task(6, seed=0)
    model = LuongSeq2Seq(len(task.src_vocab), len(task.tgt_vocab), "concat", hidden=8, embed=4)
    src, src_lengths, tgt_in, tgt_out = task_tensors(task)
    assert torch.all(tgt_in[:, 0] == 1) and torch.equal(tgt_in[:, 1:], tgt_out[:, :-1])
    logits, weights = model(src, src_lengths, tgt_in)
    assert logits.shape == (6, 10, len(task.tgt_vocab)) and weights.shape == (6, 10, src.shape[1])
    torch.testing.assert_close(weights.sum(-1), torch.ones(6, 10))
    for b in range(6):
        assert torch.all(weights[b, :, src_lengths[b] :] == 0)
    seq2seq_loss(model, (src, src_lengths, tgt_in, tgt_out)).backward()
    assert all(p.grad is not None for p in model.parameters())
    # Padding does not change the prediction: the same example alone, unpadded, agrees.
    n = int(src_lengths[0])
    alone, _ = model(src[:1, :n], src_lengths[:1], tgt_in[:1])
    torch.testing.assert_close(alone, logits[:1])


def test_greedy_decoding_agrees_with_teacher_forcing_on_its_own_output():
    torch.manual_seed(1)
    task = date_task(4, seed=1)
    model = LuongSeq2Seq(len(task.src_vocab), len(task.tgt_vocab), "general", hidden=8, embed=4)
    src, src_lengths, _, _ = task_tensors(task)
    tokens, weights = model.greedy(src, src_lengths, steps=5)
    fed = torch.cat([torch.ones(4, 1, dtype=torch.long), tokens[:, :-1]], dim=1)
    logits, tf_weights = model(src, src_lengths, fed)
    assert torch.equal(logits.argmax(-1), tokens)
    torch.testing.assert_close(weights, tf_weights)
    assert 0.0 <= exact_match(model, task) <= 1.0


def test_parameter_counts_follow_the_formulas():
    v_src, v_tgt, h, e = 20, 12, 8, 4
    base = (
        (v_src + v_tgt) * e  # the two embeddings
        + 2 * (3 * (e * h + h * h) + 6 * h)  # two GRUs: 3 gates, input+hidden weights, 2 biases
        + (2 * h * h + h)  # W_c
        + (h * v_tgt + v_tgt)  # the output layer
    )
    counts = {s: count_parameters(LuongSeq2Seq(v_src, v_tgt, s, h, e)) for s in SIZES}
    assert counts["dot"] == counts["scaled"] == base
    assert counts["general"] == base + h * h
    assert counts["concat"] == base + h * 2 * h + h


@pytest.mark.parametrize("score", ["dot", "scaled", "general", "concat"])
def test_training_reduces_the_loss_for_every_score(score, one_torch_thread, train_date_seq2seq):
    history, _ = train_date_seq2seq(256, score, batch_size=32, epochs=4, seed=0)
    start, end = sum(history[:2]) / 2, sum(history[-2:]) / 2
    # Untrained: near chance, ln 13 ≈ 2.56 over the 13 target tokens. After 32 steps the last
    # two average 0.42-0.48 of the first two for seeds 0-2 and every score; 0.65 leaves room
    # for other CPUs and still fails if a score's gradients do not reach its parameters.
    assert start > 2.2
    assert end < 0.65 * start


class _FixedDecoder:
    """Stands in for a model: its greedy decoding is a fixed tensor of tokens."""

    def __init__(self, tokens: torch.Tensor) -> None:
        self.tokens = tokens

    def greedy(self, src, src_lengths, steps):
        assert steps == self.tokens.shape[1]
        return self.tokens, None


def test_exact_match_counts_whole_sequences_and_ignores_padding():
    task = date_task(8, seed=3)
    _, _, _, tgt_out = task_tensors(task)
    assert exact_match(_FixedDecoder(tgt_out.clone()), task) == 1.0
    tokens = tgt_out.clone()
    tokens[0, -1] = (tokens[0, -1] + 1) % len(
        task.tgt_vocab
    )  # one wrong character spoils example 0
    tokens[1, 0] = (tokens[1, 0] + 1) % len(task.tgt_vocab)  # ... and example 1
    assert exact_match(_FixedDecoder(tokens), task) == 6 / 8
    # A target padded on the right is right whatever is decoded at the padding positions.
    padded = task.subset(np.arange(8))
    padded.tgt[2, -1] = 0
    tokens = task_tensors(padded)[3].clone()
    tokens[2, -1] = 5
    assert exact_match(_FixedDecoder(tokens), padded) == 1.0


@pytest.mark.parametrize("score", ["dot", "general", "concat"])
def test_inputs_of_another_dtype_are_named_with_the_input_they_must_match(score):
    layer = LuongAttention(score, 4, 4, 4)
    q, k = torch.randn(1, 2, 4), torch.randn(1, 3, 4)
    with pytest.raises(ValueError, match=r"^keys is torch.float64 .* \(query\)"):
        layer(q, k.double())
    with pytest.raises(ValueError, match=r"^values is torch.float64 .* \(keys\)"):
        layer(q, k, k.double())
