"""Tests of attnlab.study: the models train, the adapters compute what they claim, the runner
writes a well-formed CSV and resumes from it."""

from __future__ import annotations

import csv
import math
from dataclasses import replace

import pytest
import torch
from torch import nn

from attnlab.data.tasks import shift_task
from attnlab.nn import GeneralizedAttention, MultiHeadAttention, ShawRelativeAttention
from attnlab.study import (
    ATTENTIONS,
    COLUMNS,
    CURVE_POINTS,
    LuongSelfAttention,
    RunConfig,
    StudyModel,
    build_model,
    grid,
    make_attention,
    read_results,
    run_grid,
    run_one,
    task_loss,
)
from attnlab.study.grids import EDGE_SPECS, LONG_STEPS, RECALL_STEPS, full_blocks
from attnlab.train import train

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize("positions", ["abs", "rel"])
@pytest.mark.parametrize("attention", list(ATTENTIONS))
def test_every_variant_trains_with_falling_loss(attention, positions):
    """48 Adam steps on a tiny copy task (y_i = x_(i-1), 5 tokens, length 6): about 1 s."""
    torch.manual_seed(0)
    task = shift_task(512, n=6, vocab=5, offset=1, seed=0)
    model = StudyModel(task.vocab_in, task.vocab_out, task.n, attention, positions, d=16)
    inputs, targets = torch.as_tensor(task.inputs), torch.as_tensor(task.targets)
    batches = [(inputs[i : i + 64], targets[i : i + 64]) for i in range(0, 512, 64)]
    attention_params = [p for p in model.blocks[0].attention.parameters() if p.requires_grad]
    before = [p.detach().clone() for p in attention_params]
    history = train(model, lambda epoch: batches, task_loss, epochs=6, lr=1e-2, progress=False)
    assert all(math.isfinite(v) for v in history)
    start, end = sum(history[:4]) / 4, sum(history[-4:]) / 4
    assert abs(start - math.log(5)) < 0.3  # chance level at the start: ln 5 for 5 labels
    assert end < 0.9 * start, f"{attention}/{positions}: loss {start:.3f} -> {end:.3f}"
    # Every weight of the attention layer was trained (gradients reach it), except GAM's
    # mixing logits with one brain: softmax of a single logit is constant, gradient zero.
    moved = [not torch.equal(a, b) for a, b in zip(attention_params, before, strict=True)]
    one_brain = ATTENTIONS[attention].kind == "gam" and ATTENTIONS[attention].n_brains == 1
    assert sum(moved) >= len(moved) - (2 if one_brain else 0)


def test_slots_hold_the_book_modules():
    def inner(name, rel):
        return make_attention(name, d=8, h=2, n=6, relative=rel).inner

    assert isinstance(inner("sdpa", False), MultiHeadAttention)
    assert isinstance(inner("sdpa", True), ShawRelativeAttention)
    gam = inner("gam-p2-b2", False)
    assert isinstance(gam, GeneralizedAttention) and (gam.n1, gam.n_brains) == (2.0, 2)
    assert inner("gam-poly", False).coeffs.shape[0] == 2
    with pytest.raises(ValueError, match="unknown attention"):
        make_attention("bahdanau", d=8, h=2, n=6, relative=False)


def test_abs_positions_only_without_relative_ones():
    absolute = StudyModel(10, 10, 6, "gam-p1", "abs", d=8)
    relative = StudyModel(10, 10, 6, "gam-p1", "rel", d=8)
    assert absolute.pos is not None and relative.pos is None
    with pytest.raises(ValueError, match="positions"):
        StudyModel(10, 10, 6, "gam-p1", "both", d=8)


def test_luong_self_attention_equals_one_brain_gam_with_the_same_weights():
    """Luong's general score as self-attention is GAM with n1 = 1 and one brain: W_a = B."""
    torch.manual_seed(1)
    d, h = 8, 2
    gam = GeneralizedAttention(d, h, n_brains=1, n1=1.0)
    luong = LuongSelfAttention(d, h)
    with torch.no_grad():
        for a, head in enumerate(luong.heads):
            head.w.weight.copy_(gam.b[a, 0])  # score x_i · (W_a x_j) = x_i B x_jᵀ
        luong.value.load_state_dict(gam.value.state_dict())
        luong.out_proj.load_state_dict(gam.out_proj.state_dict())
    x = torch.randn(3, 5, d)
    assert torch.allclose(luong(x), gam(x), atol=1e-5)


def test_luong_self_attention_against_a_float64_loop():
    torch.manual_seed(2)
    d, h, k, s = 4, 2, 1, 4
    layer = LuongSelfAttention(d, h, rel_k=k).double()
    x = torch.randn(1, s, d, dtype=torch.float64)
    v = layer.value(x)[0]
    heads = []
    for a, head in enumerate(layer.heads):
        w_a = head.w.weight
        z = torch.zeros(s, d // h, dtype=torch.float64)
        for i in range(s):
            logits = torch.zeros(s, dtype=torch.float64)
            for j in range(s):
                rel = max(-k, min(k, j - i)) + k
                logits[j] = x[0, i] @ w_a @ (x[0, j] + layer.rel_k_table.weight[rel])
            p = torch.exp(logits - logits.max())
            p = p / p.sum()
            for j in range(s):
                rel = max(-k, min(k, j - i)) + k
                z[i] += p[j] * (
                    v[j, a * (d // h) : (a + 1) * (d // h)] + layer.rel_v_table.weight[rel]
                )
        heads.append(z)
    expected = layer.out_proj(torch.cat(heads, dim=-1))
    assert torch.allclose(layer(x)[0], expected, atol=1e-10)


def test_luong_self_attention_mask_and_errors():
    layer = LuongSelfAttention(8, 2)
    x = torch.randn(2, 4, 8)
    causal = torch.tril(torch.ones(4, 4, dtype=torch.bool))
    out = layer(x, mask=causal)
    # The first token sees only itself, so changing later tokens must not change it.
    y = x.clone()
    y[:, 1:] = torch.randn(2, 3, 8)
    assert torch.allclose(layer(y, mask=causal)[:, 0], out[:, 0], atol=1e-6)
    with pytest.raises(ValueError, match="divisor"):
        LuongSelfAttention(8, 3)
    with pytest.raises(ValueError, match="shape"):
        layer(torch.randn(2, 4, 6))


def test_model_rejects_wrong_length():
    model = StudyModel(10, 10, 6, "sdpa", d=8)
    with pytest.raises(ValueError, match="tokens must have shape"):
        model(torch.zeros(2, 5, dtype=torch.long))


def _fast(task="shift", attention="sdpa", positions="abs", seed=0):
    return RunConfig(task, attention, positions, seed, steps=20, batch_size=8, d=8)


def test_run_one_row_is_well_formed():
    row = run_one(_fast(), chunk=10)
    assert tuple(row) == COLUMNS
    assert 0.0 <= float(row["test_accuracy"]) <= 1.0
    assert float(row["test_loss"]) > 0 and float(row["ms_per_step"]) > 0
    assert len(row["curve"].split()) == CURVE_POINTS
    torch.manual_seed(0)
    model = StudyModel(10, 10, 16, "sdpa", "abs", d=8)
    assert int(row["parameters"]) == sum(p.numel() for p in model.parameters())


def test_run_one_is_reproducible():
    a, b = run_one(_fast(seed=3), chunk=10), run_one(_fast(seed=3), chunk=10)
    assert a["curve"] == b["curve"] and a["test_accuracy"] == b["test_accuracy"]


def test_grid_writes_csv_and_resumes_after_an_interruption(tmp_path):
    configs = [_fast(attention=a, seed=s) for a in ("sdpa", "gam-p1") for s in (0, 1)]
    path = tmp_path / "results.csv"
    calls = []

    def runner(config):
        calls.append(config)
        if len(calls) == 3:
            raise KeyboardInterrupt  # the user presses Ctrl-C during the third run
        return run_one(config, chunk=10)

    with pytest.raises(KeyboardInterrupt):
        run_grid(configs, path, progress=False, runner=runner)
    with path.open(newline="") as handle:
        first = list(csv.DictReader(handle))
    assert len(first) == 2 and tuple(first[0]) == COLUMNS

    calls.clear()
    rows = run_grid(configs, path, progress=False, runner=runner)
    assert calls == configs[2:], "only the unfinished runs are repeated"
    with path.open(newline="") as handle:
        stored = list(csv.DictReader(handle))
    assert stored[:2] == first, "finished rows are kept unchanged"
    assert len(stored) == 4 and len({tuple(r[c] for c in COLUMNS[:10]) for r in stored}) == 4
    assert [r["attention"] for r in rows] == [c.attention for c in configs]
    assert [r["seed"] for r in rows] == [str(c.seed) for c in configs]

    calls.clear()
    run_grid(configs, path, progress=False, runner=runner)
    assert calls == [], "a finished grid runs nothing"


def test_a_half_written_last_line_is_dropped_and_rerun(tmp_path):
    path = tmp_path / "results.csv"
    configs = [_fast(seed=0), _fast(seed=1)]
    run_grid(configs[:1], path, progress=False, runner=lambda c: run_one(c, chunk=10))
    with path.open("a") as handle:
        handle.write("shift,sdpa,abs,1,20,8,0.003")  # killed while writing the second row
    assert len(read_results(path)) == 1
    rows = run_grid(configs, path, progress=False, runner=lambda c: run_one(c, chunk=10))
    assert [r["seed"] for r in read_results(path)] == ["0", "1"] == [r["seed"] for r in rows]


@pytest.mark.parametrize("text", ["a,b\n1,2\n", "a,b\n1,2", "not a csv at all"])
def test_read_results_rejects_a_foreign_csv_and_leaves_it_untouched(tmp_path, text):
    path = tmp_path / "other.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match="not a results CSV of this study"):
        read_results(path)
    assert path.read_text() == text  # not even the "repair" of a last line touches it


def test_shaw_clipping_distance_is_a_run_setting():
    """``shaw_k`` reaches Shaw's tables (2 k_max + 1 rows each) and is checked on input."""
    for k in (8, 12):
        model = build_model(RunConfig("gapped-far", "sdpa", "rel", 0, shaw_k=k))
        assert [m.clip for m in model.modules() if hasattr(m, "clip")] == [k]
        shaw = model.blocks[0].attention.inner
        assert shaw.rel_k.weight.shape[0] == shaw.rel_v.weight.shape[0] == 2 * k + 1
    assert RunConfig("gapped", "sdpa", "rel", 0).shaw_k == 8  # the default of every block
    for bad, error in ((0, ValueError), (-3, ValueError), (2.5, TypeError), (True, TypeError),
                       ("12", TypeError)):  # the error contract: a wrong type is a TypeError
        with pytest.raises(error, match="shaw_k"):
            RunConfig("gapped", "sdpa", "rel", 0, shaw_k=bad)


def test_named_grids():
    full, reduced = grid("full"), grid("reduced")
    assert len(set(full)) == len(full) == 940 and len(set(reduced)) == len(reduced) == 8
    groups = {}
    for c in full:
        groups.setdefault(replace(c, seed=0), []).append(c.seed)
    assert all(sorted(seeds) == [0, 1, 2, 3, 4] for seeds in groups.values())  # >= 5 seeds
    # Recall trains longer (its curves were still falling at 800 steps); the rest 800 steps,
    # but for the block gapped-long (GAM-relative on gapped, LONG_STEPS = 2000 steps).
    blocks = full_blocks()
    assert {c.steps for c in full if c.task == "recall"} == {RECALL_STEPS} == {4000}
    long = blocks["gapped-long"]
    assert {c.steps for c in full if c.task != "recall" and c not in long} == {800}
    assert {c.steps for c in long} == {LONG_STEPS} == {2000} and len(long) == 3 * 45
    assert {replace(c, steps=800) for c in long if c.lr == 3e-3} == set(blocks["ablation"])
    assert {c.steps for c in reduced} == {200}
    # Every configuration has its rate chosen on validation among at least the three rates;
    # the 32 that chose an end (second pass) also have the next rate beyond it (third pass).
    rates = {}
    for c in full:
        rates.setdefault(replace(c, seed=0, lr=0), set()).add(c.lr)
    assert all(r >= {1e-3, 3e-3, 1e-2} for r in rates.values()), rates
    extended = {k: r - {1e-3, 3e-3, 1e-2} for k, r in rates.items() if len(r) > 3}
    assert len(extended) == len(EDGE_SPECS) == 32
    assert all(r in ({3e-4}, {3e-2}) for r in extended.values())
    # Shaw's tables at k_max = 12 beyond the far task's distance 10, at the three rates.
    k12 = [c for c in full if c.shaw_k != 8]
    assert k12 == blocks["far-k12"] and {(c.task, c.attention, c.shaw_k) for c in k12} == {
        ("gapped-far", "sdpa", 12)
    }
    assert {c.lr for c in k12} == {1e-3, 3e-3, 1e-2}
    # The embedding ablation comes first: every GAM-relative variant × every embedding.
    first = {(c.attention, c.embedding) for c in full[:45]}
    assert first == {(a, e) for a in ("gam-p1", "gam-p2", "gam-poly")
                     for e in ("none", "layernorm", "scaled")}  # fmt: skip
    assert {c.task for c in full[:45]} == {"gapped"}
    assert {c.layers for c in full} == {1, 2} and {c.lr for c in full} == {
        3e-4,
        1e-3,
        3e-3,
        1e-2,
        3e-2,
    }
    assert {c.task for c in full} == {"gapped", "gapped-far", "shift", "recall", "reverse"}
    saturated = {c.task for c in full if c.positions == "abs" and c.task in ("shift", "reverse")}
    assert saturated == {"shift"}, "at most one task that every method saturates"
    assert all(c.long_n == 32 for c in full if c.task == "shift" and c.positions == "rel")
    with pytest.raises(ValueError, match="unknown grid"):
        grid("huge")


def test_parameter_counts_differ_as_expected():
    """GAM's B is d×d per head and brain; Luong's W_a too; MHA has 4 d×d projections."""
    d, h = 8, 2

    def attn_params(name):
        return sum(p.numel() for p in make_attention(name, d, h, 6, False).parameters())

    linear = d * d + d
    assert attn_params("sdpa") == 4 * linear
    assert attn_params("gam-p1") == h * d * d + h + 2 * linear  # B, mixing logits, W_V, W_O
    assert attn_params("gam-p1-b2") == 2 * h * d * d + 2 * h + 2 * linear
    assert attn_params("luong") == h * d * d + 2 * linear
    assert isinstance(make_attention("luong", d, h, 6, False).inner.heads[0].w, nn.Linear)


def test_read_results_raises_on_a_missing_file_unless_asked(tmp_path):
    # Issue 28: a missing CSV silently read as [] left chapter 10 with empty tables.
    path = tmp_path / "results.csv"
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_results(path)
    assert read_results(path, missing_ok=True) == []  # a grid that has not started
    path.write_text("")
    with pytest.raises(ValueError, match="is empty"):
        read_results(path)
    assert read_results(path, missing_ok=True) == []
    assert not (tmp_path / "other").exists()
    with pytest.raises(ValueError, match="is not a file"):
        read_results(tmp_path, missing_ok=True)  # a folder is never "no results"


def test_run_grid_starts_a_new_csv(tmp_path):
    path = tmp_path / "new" / "results.csv"
    rows = run_grid([_fast(seed=0)], path, progress=False, runner=lambda c: run_one(c, chunk=10))
    assert len(rows) == 1 and read_results(path) == rows
