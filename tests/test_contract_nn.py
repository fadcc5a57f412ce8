"""The error contract of ``attnlab.nn`` (attention, multi-head, Luong), and numpy–torch agreement.

Value checks in torch are on request (``attnlab.nn.check_values``), so the generated cases run
with the switch on, except the fused fast path of ``MultiHeadAttention`` whose point is not to
compute the weights (it gets every class but the value ones, with the switch off). See
``tests/_contract.py`` for the classes of bad input and the outcomes.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from _contract import (
    FAST,
    Spec,
    bad_cases,
    check,
    classify,
    contract_test,
    dims,
    module_call,
    sdpa_spec,
    self_attention_spec,
    torch_dtype,
    torch_values_checked,
)
from hypothesis import given
from hypothesis import strategies as st
from test_contract_numpy import BY_NAME as NUMPY_SPECS

import attnlab as al
import attnlab.nn as ann


def _sdpa(a, p):
    torch_dtype(p)
    return ann.scaled_dot_product_attention(a["q"], a["k"], a["v"], mask=a["mask"], **p)


def _tiled(a, p):
    torch_dtype(p)
    return ann.tiled_attention(a["q"], a["k"], a["v"], mask=a["mask"], q_tile=2, k_tile=3, **p)


def _sdpa_module(a, p):
    torch_dtype(p)
    return ann.ScaledDotProductAttention(**p)(a["q"], a["k"], a["v"], a["mask"])


def _masked_softmax(a, p):
    torch_dtype(p)
    return ann.masked_softmax(a["logits"], a["mask"])


_head = module_call(
    lambda a, p: ann.AttentionHead(p["hidden_size"], p["head_size"]),
    lambda head, a: head(a["x"], a["mask"]),
)


def _mha(need_weights):
    return module_call(
        lambda a, p: ann.MultiHeadAttention(p["d"], p["h"]),
        lambda mha, a: mha(a["x"], mask=a["mask"], need_weights=need_weights, context=a["context"]),
    )


def _luong(score):
    def attention(a, p):
        sizes = {k: p[k] for k in ("query_size", "key_size", "attn_size") if k in p}
        return ann.LuongAttention(score, **sizes)

    return module_call(
        attention, lambda attn, a: attn(a["query"], a["keys"], a["values"], a["key_mask"])
    )


LUONG = {
    "query": ("b", "n", "dq"),
    "keys": ("b", "m", "dk"),
    "values": ("b", "m", "dv"),
    "key_mask": ("b", "m"),
}
LUONG_SIZES = dims(b=(0, 2), n=(1, 3), m=(1, 3), dq=(3, 3), dk=(2, 2), dv=(1, 3))

SPECS = [
    sdpa_spec(
        "nn.scaled_dot_product_attention",
        dims(sq=(1, 4), sk=(1, 4), dk=(1, 4), dv=(1, 3)),
        _sdpa,
        backend="torch",
    ),
    sdpa_spec(
        "nn.tiled_attention",
        dims(sq=(1, 5), sk=(1, 5), dk=(1, 4), dv=(1, 3)),
        _tiled,
        backend="torch",
    ),
    sdpa_spec(
        "nn.ScaledDotProductAttention",
        dims(sq=(1, 3), sk=(1, 3), dk=(1, 3), dv=(1, 2)),
        _sdpa_module,
        backend="torch",
    ),
    Spec(
        "nn.masked_softmax",
        {"logits": ("sq", "sk"), "mask": ("sq", "sk")},
        dims(sq=(1, 3), sk=(1, 4)),
        _masked_softmax,
        backend="torch",
        empty=("sk",),
        bool_args=("mask",),
        no_rank=("logits", "mask"),
    ),
    self_attention_spec(
        "nn.AttentionHead",
        dims(b=(0, 2), s=(1, 3), d=(3, 3)),
        _head,
        ints={"hidden_size": 3, "head_size": 2},
        derived=("d",),
        empty=("s",),
    ),
    Spec(
        "nn.LuongAttention[dot]",
        {**LUONG, "query": ("b", "n", "dk")},
        LUONG_SIZES,
        _luong("dot"),
        backend="torch",
        free=("dv",),
        empty=("n", "m"),
        exact_rank=tuple(LUONG),
        bool_args=("key_mask",),
    ),
    Spec(
        "nn.LuongAttention[general]",
        LUONG,
        LUONG_SIZES,
        _luong("general"),
        backend="torch",
        ints={"query_size": 3, "key_size": 2},
        free=("dv",),
        derived=("dq", "dk"),
        empty=("n", "m"),
        exact_rank=tuple(LUONG),
        bool_args=("key_mask",),
    ),
    Spec(
        "nn.LuongAttention[concat]",
        LUONG,
        LUONG_SIZES,
        _luong("concat"),
        backend="torch",
        ints={"query_size": 3, "key_size": 2, "attn_size": 4},
        free=("dv",),
        derived=("dq", "dk"),
        empty=("n", "m"),
        exact_rank=tuple(LUONG),
        bool_args=("key_mask",),
    ),
]
for need_weights in (True, False):
    SPECS.append(
        Spec(
            f"nn.MultiHeadAttention[need_weights={need_weights}]",
            {"x": ("b", "s", "d"), "context": ("b", "sk", "d"), "mask": ("s", "sk")},
            dims(b=(0, 2), s=(1, 3), sk=(1, 3), d=(4, 4)),
            _mha(need_weights),
            backend="torch",
            ints={"d": 4, "h": 2},
            empty=("s", "sk"),
            exact_rank=("x", "context"),  # a (1, 1, 1) mask is a legal (b, s, s_k) one
            bool_args=("mask",),
            # the fused path exists not to compute the weights: no value checks there
            skip=() if need_weights else ("nonfinite", "float16"),
        )
    )

BY_NAME = {spec.name: spec for spec in SPECS}


# the fused path of MultiHeadAttention (it skips the value classes) runs with the switch off
test_torch_module_meets_the_contract = contract_test(
    BY_NAME, values_checked=lambda spec: "nonfinite" not in spec.skip
)


# ------------------------------------------------------------------ LuongSeq2Seq


def _seq2seq_case(draw):
    """A bad call of LuongSeq2Seq.forward/greedy (ids, lengths, sizes, steps)."""
    from _contract import Case

    b, m, n = draw(st.integers(1, 3)), draw(st.integers(1, 4)), draw(st.integers(1, 3))
    inputs = {
        "src": torch.randint(1, 9, (b, m)),
        "src_lengths": torch.full((b,), m),
        "tgt_in": torch.randint(1, 6, (b, n)),
    }
    sizes = {"src_vocab_size": 9, "tgt_vocab_size": 6, "hidden": 4, "embed": 3}
    steps = 2
    kind = draw(
        st.sampled_from(["lengths", "ids", "empty", "batch", "dtype", "bool", "range", "type"])
    )
    names: tuple[str, ...]
    if kind == "lengths":
        bad = draw(st.sampled_from([0, -1, m + 1, m + 3]))
        inputs["src_lengths"] = inputs["src_lengths"].clone()
        inputs["src_lengths"][draw(st.integers(0, b - 1))] = bad
        names, detail = ("src_lengths",), f"a length of {bad} with m={m}"
    elif kind == "ids":
        which = draw(st.sampled_from(["src", "tgt_in"]))
        bad = draw(st.sampled_from([-1, 9 if which == "src" else 6, 100]))
        inputs[which].view(-1)[0] = bad
        names, detail = (which,), f"{which} holds id {bad}"
    elif kind == "empty":
        which = draw(st.sampled_from(["src", "tgt_in"]))
        inputs[which] = inputs[which][:, :0]
        if which == "src":
            inputs["src_lengths"] = torch.zeros(b, dtype=torch.long)
        names, detail = ("empty", which), f"{which} has no token"
    elif kind == "batch":
        which = draw(st.sampled_from(["src_lengths", "tgt_in"]))
        if which == "src_lengths":
            inputs[which] = torch.full((b + 1,), m)
        else:
            inputs[which] = torch.randint(1, 6, (b + 1, n))
        names, detail = (which,), f"{which} has batch {b + 1}, src {b}"
    elif kind in ("bool", "range"):
        param = draw(st.sampled_from([*sizes, "steps"]))
        bad = draw(st.booleans()) if kind == "bool" else draw(st.sampled_from([0, -1, 2.0]))
        if param == "steps":
            steps = bad
        else:
            sizes[param] = bad
        names, detail = (param,), f"{param}={bad!r}"
    else:  # dtype: a float tensor where integers belong; type: a numpy array for a tensor
        which = draw(st.sampled_from(list(inputs)))
        if kind == "dtype":
            inputs[which], detail = inputs[which].float(), f"{which} is float"
        else:
            inputs[which], detail = inputs[which].numpy(), f"{which} is a numpy array"
        names = (which,)
    greedy = names == ("steps",) or draw(st.booleans()) and "tgt_in" not in names

    def run():
        torch.manual_seed(0)
        model = ann.LuongSeq2Seq(score="general", **sizes)
        if greedy:
            return model.greedy(inputs["src"], inputs["src_lengths"], steps)
        return model(inputs["src"], inputs["src_lengths"], inputs["tgt_in"])

    return Case("nn.LuongSeq2Seq", kind, detail, run, names)


@FAST
@given(data=st.data())
def test_luong_seq2seq_meets_the_contract(data):
    check(data.draw(st.composite(lambda draw: _seq2seq_case(draw))()))


def test_luong_seq2seq_lengths_the_issue_names():
    torch.manual_seed(0)
    model = ann.LuongSeq2Seq(9, 6, hidden=4, embed=3)
    src, tgt = torch.randint(1, 9, (2, 3)), torch.ones(2, 2, dtype=torch.long)
    with pytest.raises(ValueError, match=r"src_lengths must lie in 1\.\.m = 1\.\.3.*to 4"):
        model(src, torch.tensor([3, 4]), tgt)  # used to be an IndexError
    with pytest.raises(ValueError, match=r"src_lengths must lie in 1\.\.m.*from 0"):
        model(src, torch.tensor([0, 3]), tgt)  # used to decode silently from padding


def test_luong_seq2seq_creates_its_tensors_on_the_device_of_src(monkeypatch):
    """Every tensor encode/greedy builds is asked for on src's device (issue 18 item 4)."""
    calls = []
    for name in ("arange", "full"):
        original = getattr(torch, name)

        def spy(*args, _original=original, _name=name, **kwargs):
            calls.append((_name, kwargs.get("device")))
            return _original(*args, **kwargs)

        monkeypatch.setattr(torch, name, spy)
    model = ann.LuongSeq2Seq(9, 6, hidden=4, embed=3)
    src = torch.randint(1, 9, (2, 3))
    model.greedy(src, torch.tensor([3, 2]), steps=2)
    assert calls, "encode/greedy create no tensor any more: update this test"
    assert all(device == src.device for _, device in calls), calls


def test_luong_main_has_a_device_option():
    from attnlab.nn.luong import resolve_device

    assert resolve_device("cpu") == torch.device("cpu")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    with pytest.raises(ValueError, match="device"):
        resolve_device("abacus")


# ------------------------------------------------------------------ the cases the issue names


def test_luong_attention_attn_size_zero_is_a_value_error():
    with pytest.raises(ValueError, match="attn_size must be a positive integer, got 0"):
        ann.LuongAttention("concat", 4, 4, attn_size=0)  # used to be ZeroDivisionError
    with pytest.raises(TypeError, match="query_size"):
        ann.LuongAttention("general", True, 4)


def test_multihead_mask_of_rank_one_and_context_batch_mismatch():
    mha = ann.MultiHeadAttention(4, 2)
    x = torch.zeros(1, 3, 4)
    with pytest.raises(ValueError, match=r"mask must have shape \(s, s_k\).*got shape \(3,\)"):
        mha(x, mask=torch.ones(3, dtype=torch.bool))  # used to be IndexError
    with pytest.raises(ValueError, match="same batch size.*context has shape"):
        mha(torch.zeros(2, 3, 4), context=torch.zeros(3, 3, 4))  # used to be RuntimeError


@pytest.mark.parametrize("need_weights", [False, True])
def test_multihead_empty_sequence_is_rejected_on_both_paths(need_weights):
    mha = ann.MultiHeadAttention(4, 2)
    with pytest.raises(ValueError, match=r"empty sequence: x has shape \(1, 0, 4\)"):
        mha(torch.zeros(1, 0, 4), need_weights=need_weights)


def test_to_torch_attn_mask_given_numpy_says_convert():
    with pytest.raises(TypeError, match=r"torch\.from_numpy"):
        ann.to_torch_attn_mask(np.ones((2, 2), bool))
    with pytest.raises(ValueError, match="mask must be boolean"):
        ann.to_torch_attn_mask(torch.ones(2, 2))


def test_check_values_switch_is_off_by_default_and_restored():
    q = torch.tensor([[1e30, 0.0]])  # logits 1e60: inf in float32
    assert not ann.values_checked()
    out, _ = ann.scaled_dot_product_attention(q, q, q)  # off: torch's NaN, no device sync
    assert torch.isnan(out).any()
    with ann.check_values():
        assert ann.values_checked()
        with pytest.raises(ValueError, match=r"logits overflowed in float32"):
            ann.scaled_dot_product_attention(q, q, q)
        with ann.check_values(False):
            assert not ann.values_checked()
        assert ann.values_checked()
    assert not ann.values_checked()
    with pytest.raises(TypeError, match="enabled"):
        ann.check_values(1)


def test_float16_logits_above_65504_raise_with_the_switch():
    q = torch.full((1, 2, 4), 200.0, dtype=torch.float16)
    with ann.check_values(), pytest.raises(ValueError, match="overflowed in float16"):
        ann.scaled_dot_product_attention(q, q, q)
    luong = ann.LuongAttention("dot")
    with ann.check_values(), pytest.raises(ValueError, match="overflowed in float16"):
        luong(q, q)


# ------------------------------------------------------------------ numpy and torch agree

#: Phrases a message is built from; numpy and torch must use the same ones for the same input.
KEY_PHRASES = (
    "empty sequence",
    "share d_k",
    "same length s_k",
    "contains NaN or infinite values",
    "overflowed in float16",
    "mask must be boolean",
    "does not broadcast",
    "scale must be a positive finite number",
    "d_k = 0",
    "must have shape",
    "must be a numpy array",
    "must be a torch.Tensor",
)


def _phrases(message: str) -> set[str]:
    return {p for p in KEY_PHRASES if p in message}


def _outcome(run):
    try:
        with np.errstate(all="ignore"):
            run()
    except (ValueError, TypeError) as error:
        return type(error), _phrases(str(error)), str(error)
    return None, set(), "no error"


@FAST
@given(data=st.data())
def test_numpy_and_torch_say_the_same_thing(data):
    """The same bad input to numpy's and torch's scaled_dot_product_attention: same verdict."""
    numpy_spec = NUMPY_SPECS["scaled_dot_product_attention"]
    kinds = ("rank", "size", "empty", "nonfinite", "bool", "range", "float16")
    case = data.draw(bad_cases(numpy_spec, kinds))
    with torch_values_checked():
        numpy_type, numpy_words, numpy_message = _outcome(case.run)
        params = {k: v for k, v in case.params.items() if k != "_dtype"}

        def torch_run():
            t = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in case.arrays.items()}
            return ann.scaled_dot_product_attention(t["q"], t["k"], t["v"], t["mask"], **params)

        torch_type, torch_words, torch_message = _outcome(torch_run)
    assert (numpy_type, numpy_words) == (torch_type, torch_words), (
        f"[{case.kind}: {case.detail}] numpy: {numpy_message!r} / torch: {torch_message!r}"
    )


@pytest.mark.parametrize(
    ("q", "k", "v"),
    [
        (np.zeros((2, 0)), np.zeros((2, 3)), np.zeros((1, 3))),  # n = 0 queries
        (np.zeros((2, 3)), np.zeros((2, 0)), np.zeros((1, 0))),  # m = 0 keys
        (np.full((2, 1), np.nan), np.zeros((2, 3)), np.zeros((1, 3))),
        (np.full((2, 1), 300.0, np.float16), np.full((2, 3), 300.0, np.float16), None),
    ],
)
def test_luong_numpy_and_torch_say_the_same_thing(q, k, v):
    """luong_attention (columns) and LuongAttention (rows, batch 1) on the same input."""
    v = k if v is None else v
    numpy_result = _outcome(lambda: al.luong_attention(q, k, v, "dot"))

    def torch_run():
        t = [torch.from_numpy(np.ascontiguousarray(a.T))[None] for a in (q, k, v)]
        return ann.LuongAttention("dot")(*t)

    with ann.check_values():
        torch_result = _outcome(torch_run)
    assert numpy_result[0] is ValueError
    assert numpy_result[:2] == torch_result[:2], (numpy_result[2], torch_result[2])


def test_outcomes_are_classified():
    """The classifier itself: a NaN result, an internal error and a vague message are caught."""
    from _contract import Case

    nan_case = Case("t", "nonfinite", "", lambda: np.array([np.nan]), ("x",))
    internal = Case("t", "size", "", lambda: [][1], ("x",))
    vague = Case("t", "size", "", lambda: np.zeros(2) @ np.zeros(3), ("x",))
    silent = Case("t", "empty", "", lambda: np.zeros(0), ("x",))
    assert [classify(c)[0] for c in (nan_case, internal, vague, silent)] == [
        "nan",
        "internal",
        "vague",
        "silent",
    ]
    assert re.search("ok", classify(Case("t", "rank", "", lambda: al.softmax(1.0), ("x",)))[0])
