"""The character transformer of chapter 11 (attnlab.lm.blocks, .model, .training)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attnlab.lm.blocks import GELUMLP, CausalSelfAttention, RMSNorm, SwiGLU, causal_mask
from attnlab.lm.model import CharTransformer, LMConfig
from attnlab.lm.training import bits_per_char, generate, random_windows, train_lm

POSITIONS = ["learned", "sinusoidal", "rotary"]

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _model(**kw) -> CharTransformer:
    torch.manual_seed(0)
    cfg = dict(vocab_size=11, d=32, layers=2, heads=4, context=16)
    cfg.update(kw)
    return CharTransformer(LMConfig(**cfg))


def test_the_book_causal_path_equals_sdpa_is_causal():
    """Same weights, the book's boolean mask vs F.sdpa(is_causal=True), forward and grads."""
    torch.manual_seed(1)
    book = CausalSelfAttention(24, 3, attention="book").double()
    fused = CausalSelfAttention(24, 3, attention="sdpa").double()
    fused.load_state_dict(book.state_dict())
    x = torch.randn(2, 9, 24, dtype=torch.float64, requires_grad=True)
    a, b = book(x), fused(x)
    torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    ga = torch.autograd.grad(a.square().sum(), x)[0]
    gb = torch.autograd.grad(b.square().sum(), x)[0]
    torch.testing.assert_close(ga, gb, rtol=1e-10, atol=1e-12)


def test_the_boolean_causal_mask_gives_what_is_causal_gives():
    from attnlab.nn import scaled_dot_product_attention

    torch.manual_seed(3)
    q, k, v = torch.randn(3, 2, 4, 7, 5, dtype=torch.float64).unbind(0)
    ours, w = scaled_dot_product_attention(q, k, v, mask=causal_mask(7))
    torch.testing.assert_close(ours, F.scaled_dot_product_attention(q, k, v, is_causal=True))
    assert (w.triu(1) == 0).all()


def test_the_attention_heads_equal_a_float64_naive_loop():
    torch.manual_seed(2)
    attn = CausalSelfAttention(8, 2).double()
    x = torch.randn(1, 5, 8, dtype=torch.float64)
    out, w = attn(x, need_weights=True)
    wq, wk, wv = attn.qkv.weight.detach().T.split(8, dim=1)  # (d, d) each, row convention
    q, k, v = x[0] @ wq, x[0] @ wk, x[0] @ wv
    heads = []
    for h in range(2):
        cols = slice(4 * h, 4 * h + 4)
        rows = []
        for i in range(5):
            logits = torch.stack([q[i, cols] @ k[j, cols] / 2.0 for j in range(i + 1)])
            p = torch.softmax(logits, 0)
            torch.testing.assert_close(w[0, h, i, : i + 1], p)
            assert (w[0, h, i, i + 1 :] == 0).all()
            rows.append(sum(p[j] * v[j, cols] for j in range(i + 1)))
        heads.append(torch.stack(rows))
    want = torch.cat(heads, dim=1) @ attn.out.weight.detach().T
    torch.testing.assert_close(out[0], want)


def test_causal_mask_is_lower_triangular():
    m = causal_mask(4)
    i, j = np.indices((4, 4))
    assert m.dtype == torch.bool and (m.numpy() == (j <= i)).all()


@pytest.mark.parametrize("positions", POSITIONS)
@pytest.mark.parametrize("attention", ["book", "sdpa"])
def test_no_information_flows_from_the_future(positions, attention):
    """d logits[t] / d embedding[s] is exactly zero for every s > t."""
    model = _model(positions=positions, attention=attention).double()
    ids = torch.randint(0, 11, (1, 12))
    emb = model.embed(ids).detach().requires_grad_(True)
    model.embed.forward = lambda _ids: emb  # feed the leaf tensor in as the embeddings
    logits = model(ids)
    for t in range(12):
        grad = torch.autograd.grad(logits[0, t].sum(), emb, retain_graph=True)[0][0]
        assert (grad[t + 1 :] == 0).all(), f"position {t} sees the future"
        assert grad[: t + 1].abs().sum() > 0  # and it does see the past


@pytest.mark.parametrize("positions", POSITIONS)
def test_changing_a_later_character_leaves_earlier_logits_unchanged(positions):
    model = _model(positions=positions)
    ids = torch.randint(0, 11, (2, 16))
    other = ids.clone()
    other[:, 10:] = (other[:, 10:] + 3) % 11
    torch.testing.assert_close(model(ids)[:, :10], model(other)[:, :10])


@pytest.mark.parametrize(
    "kw", [dict(norm="rmsnorm", mlp="swiglu"), dict(norm="layernorm", mlp="gelu"), {}]
)
def test_shapes_and_no_biases(kw):
    model = _model(**kw)
    logits, weights = model(torch.zeros(3, 7, dtype=torch.long), need_weights=True)
    assert logits.shape == (3, 7, 11)
    assert [tuple(w.shape) for w in weights] == [(3, 4, 7, 7)] * 2
    assert not [n for n, _ in model.named_parameters() if n.endswith("bias")]


def test_rmsnorm_swiglu_and_gelu_match_their_formulas():
    torch.manual_seed(0)
    x = torch.randn(3, 6, dtype=torch.float64)
    norm = RMSNorm(6).double()
    want = x / torch.sqrt((x**2).mean(-1, keepdim=True) + 1e-6)
    torch.testing.assert_close(norm(x), want)
    sw = SwiGLU(6, 10).double()
    w1, w3, w2 = sw.gate.weight.T, sw.up.weight.T, sw.down.weight.T
    a = x @ w1
    torch.testing.assert_close(sw(x), ((a * torch.sigmoid(a)) * (x @ w3)) @ w2)
    ge = GELUMLP(6, 10).double()
    h = x @ ge.up.weight.T
    gelu = 0.5 * h * (1 + torch.erf(h / math.sqrt(2)))
    torch.testing.assert_close(ge(x), gelu @ ge.down.weight.T)


@pytest.mark.parametrize("mlp", ["gelu", "swiglu"])
def test_mlp_hidden_sets_the_hidden_width_and_the_parameter_count(mlp):
    d, hidden = 16, 24
    model = CharTransformer(LMConfig(vocab_size=5, d=d, layers=1, heads=2, mlp=mlp,
                                     mlp_hidden=hidden))
    matrices = 2 if mlp == "gelu" else 3  # up and down; SwiGLU has a gate as well
    assert sum(p.numel() for p in model.blocks[0].mlp.parameters()) == matrices * d * hidden
    default = LMConfig(vocab_size=5, d=d, mlp=mlp)
    assert default.hidden == (4 * d if mlp == "gelu" else 48)  # 8 * ceil(8 * 16 / 3 / 8)
    assert LMConfig.from_dict(default.to_dict()) == default  # a stored config round-trips


def test_swiglu_has_the_parameters_of_a_4d_gelu_mlp_roughly():
    cfg = LMConfig(vocab_size=5, d=96, mlp="swiglu")
    assert cfg.hidden == 256 and abs(3 * 96 * 256 - 2 * 96 * 384) / (2 * 96 * 384) < 0.01


def test_loss_is_cross_entropy_and_an_untrained_model_is_near_uniform():
    model = _model()
    ids = torch.randint(0, 11, (4, 16))
    y = torch.randint(0, 11, (4, 16))
    logits = model(ids)
    want = -torch.log_softmax(logits, -1).gather(-1, y[..., None]).mean()
    torch.testing.assert_close(model.loss(ids, y), want)
    assert abs(float(want.detach()) - math.log(11)) < 0.05  # small init: almost uniform


def test_bits_per_char_scores_every_character_once():
    """Against a brute-force loop that scores ids[t] from the last `context` ids."""
    model = _model(context=8)
    ids = torch.randint(0, 11, (30,))
    for stride in (1, 3, 8):
        got = bits_per_char(model, ids, batch=4, stride=stride)
        total = 0.0
        covered = 0
        starts = list(range(0, 30 - 1 - 8 + 1, stride))
        if starts[-1] != 21:
            starts.append(21)
        for s in starts:
            with torch.no_grad():
                logp = torch.log_softmax(model(ids[None, s : s + 8]), -1)[0]
            for t in range(max(covered, s) + 1, s + 9):
                total -= float(logp[t - s - 1, ids[t]])
            covered = s + 8
        assert got == pytest.approx(total / 29 / math.log(2), rel=1e-6)


def test_training_is_deterministic_and_learns_a_periodic_text():
    # period 8; without context its characters carry 2.25 bits (1, 3, 5 at 1/4; 2, 4 at 1/8)
    ids = torch.tensor([1, 2, 3, 4, 5, 1, 3, 5] * 50)
    runs = []
    for _ in range(2):
        model = _model(d=16, heads=2, context=12, positions="sinusoidal")
        log = train_lm(model, ids, steps=60, batch=4, lr=2e-2, warmup=4, progress=False)
        runs.append((log, model.state_dict()))
    assert [r["train_bpc"] for r in runs[0][0]] == [r["train_bpc"] for r in runs[1][0]]
    for k, v in runs[0][1].items():
        assert torch.equal(v, runs[1][1][k]), k
    assert runs[0][0][-1]["train_bpc"] < 1.0 < 3.0 < runs[0][0][0]["train_bpc"]
    assert runs[0][0][-1]["chars"] == 60 * 4 * 12


def test_each_parameter_moves_by_its_own_peak_rate_on_the_first_step():
    # Adam's first step is rate * g / (|g| + eps): entries with |g| >> eps move by the rate
    ids = torch.arange(400) % 11
    model = _model()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    slow = "blocks.0.attn.qkv.weight"
    with pytest.raises(_OneStep):  # the callback stops training after the first update
        train_lm(model, ids, steps=5, batch=4, lr=1e-2, warmup=1, weight_decay=0.0,
                 progress=False, rates={slow: 1e-4}, on_step=_stop_after_one)  # fmt: skip
    for name, p in model.named_parameters():
        moved = (p.detach() - before[name]).abs().max().item()
        assert moved == pytest.approx(1e-4 if name == slow else 1e-2, rel=1e-3), name


class _OneStep(Exception):
    pass


def _stop_after_one(row: dict) -> None:
    raise _OneStep


def test_rates_equal_to_lr_change_nothing():
    ids = torch.tensor([1, 2, 3, 4, 5, 1, 3, 5] * 50)
    runs = []
    for rates in (None, {}, {n: 2e-2 for n, _ in _model().named_parameters()}):
        model = _model(d=16, heads=2, context=12)
        log = train_lm(model, ids, steps=8, batch=4, lr=2e-2, warmup=2, progress=False,
                       rates=rates)  # fmt: skip
        runs.append(([r["train_bpc"] for r in log], model.state_dict()))
    for log, state in runs[1:]:  # the same updates, whatever the grouping
        assert log == runs[0][0]
        assert all(torch.equal(v, runs[0][1][k]) for k, v in state.items())


@pytest.mark.parametrize(
    ("rates", "error", "match"),
    [
        ({"blocks.0.attn.brain": 1e-3}, ValueError, "names no parameter"),
        ({"embed.weight": float("nan")}, ValueError, "rates"),
        ({"embed.weight": -1e-3}, ValueError, "rates"),
        ({"embed.weight": 0.0}, ValueError, "rates"),
        ({"embed.weight": True}, TypeError, "rates"),
        ({"embed.weight": "1e-3"}, TypeError, "rates"),
    ],
)
def test_bad_rates_are_refused_before_a_step(rates, error, match):
    model = _model()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    with pytest.raises(error, match=match):
        train_lm(model, torch.arange(40) % 11, steps=1, progress=False, rates=rates)
    assert all(torch.equal(p, before[n]) for n, p in model.named_parameters())


def test_generation_is_reproducible_with_a_seeded_generator():
    model = _model()
    a = generate(model, torch.tensor([1, 2]), 8, 0.8, torch.Generator().manual_seed(3))
    b = generate(model, torch.tensor([1, 2]), 8, 0.8, torch.Generator().manual_seed(3))
    assert a.shape == (10,) and torch.equal(a, b) and a[:2].tolist() == [1, 2]


def test_random_windows_are_shifted_by_one():
    ids = torch.arange(50)
    x, y = random_windows(ids, 7, 5, torch.Generator().manual_seed(0))
    assert torch.equal(y, x + 1)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: LMConfig(vocab_size=5, d=30, heads=4), ValueError, "heads"),
        (lambda: LMConfig(vocab_size=5, d=True), TypeError, "d"),
        (lambda: LMConfig(vocab_size=5, layers=0), ValueError, "layers"),
        (lambda: LMConfig(vocab_size=5, context=2.0), TypeError, "context"),
        (lambda: LMConfig(vocab_size=5, positions="alibi"), ValueError, "positions"),
        (lambda: LMConfig(vocab_size=5, norm="batchnorm"), ValueError, "norm"),
        (lambda: LMConfig(vocab_size=5, mlp="relu"), ValueError, "mlp"),
        (lambda: LMConfig(vocab_size=5, mlp_hidden=0), ValueError, "mlp_hidden"),
        (lambda: LMConfig(vocab_size=5, mlp_hidden=8.0), TypeError, "mlp_hidden"),
        (lambda: LMConfig(vocab_size=5, attention="flash"), ValueError, "attention"),
        (lambda: LMConfig(vocab_size=5, d=12, heads=4, positions="rotary"), ValueError, "d_k"),
        (lambda: LMConfig.from_dict({"vocab_size": 5, "width": 3}), ValueError, "width"),
        (lambda: CharTransformer({"vocab_size": 5}), TypeError, "config"),
        (lambda: _model()(torch.zeros(1, 17, dtype=torch.long)), ValueError, "context"),
        (lambda: _model()(torch.zeros(1, 3)), ValueError, "int64"),
        (lambda: _model()(torch.zeros(3, dtype=torch.long)), ValueError, r"\(b, n\)"),
        (lambda: _model()(torch.full((1, 3), 11)), ValueError, "0 … 10"),
        (lambda: _model()([[1, 2]]), TypeError, "ids"),
        (lambda: CausalSelfAttention(8, 3), ValueError, "divide"),
        (lambda: CausalSelfAttention(8, 2, attention="sdpa")(torch.zeros(1, 2, 8),
                                                             need_weights=True), ValueError,
         "need_weights"),
        (lambda: CausalSelfAttention(8, 2)(torch.zeros(1, 2, 4)), ValueError, "d=8"),
        (lambda: train_lm(_model(), torch.arange(40) % 11, steps=0), ValueError, "steps"),
        (lambda: train_lm(_model(), torch.arange(40) % 11, steps=1, lr=-1.0), ValueError, "lr"),
        (lambda: random_windows(torch.arange(5), 8, 1, torch.Generator()), ValueError,
         "context"),
        (lambda: bits_per_char(_model(), torch.tensor([1])), ValueError, "two"),
        (lambda: bits_per_char(_model(), torch.arange(30) % 11, stride=17), ValueError,
         "stride"),
        (lambda: generate(_model(), torch.tensor([1]), 3, temperature=0.0), ValueError,
         "temperature"),
        (lambda: generate(_model(), torch.tensor([], dtype=torch.long), 3), ValueError,
         "prompt"),
    ],
)
def test_bad_arguments(call, error, match):
    with pytest.raises(error, match=match):
        call()
