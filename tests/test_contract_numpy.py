"""The error contract of the numpy core, under generated bad input (see ``tests/_contract.py``).

Every public function of ``softmax``, ``conv``, ``attention``, ``multihead`` and ``luong``
either raises an attnlab ``ValueError``/``TypeError`` naming the argument, or returns a
finite result equal to a float64 reference; nothing else escapes.
"""

from __future__ import annotations

import numpy as np
import pytest
from _contract import Spec, contract_test, dims, numpy_params, sdpa_spec
from hypothesis import strategies as st

import attnlab as al


def _conv_dims(draw):
    s = draw(st.integers(1, 5))
    c = draw(st.integers(0, (s - 1) // 2))
    return {"s": s, "o": 2 * c + 1, "din": draw(st.integers(1, 3)), "dout": draw(st.integers(1, 3))}


def _split_dims(draw):
    return {"n": draw(st.integers(1, 3)), "w": 2 * draw(st.integers(1, 3))}  # h = 2 heads


def _mha_dims(draw):
    size = dims(s=(1, 4), d=(1, 4), h=(1, 3), dk=(1, 3), dv=(1, 3), dout=(1, 3))(draw)
    return {**size, "hdv": size["h"] * size["dv"]}


def _concat_dims(draw):
    size = dims(dq=(1, 3), dk=(1, 3), da=(1, 3), n=(1, 3), m=(1, 3), dv=(1, 3))(draw)
    return {**size, "dqk": size["dq"] + size["dk"]}


SIZES = dims(sq=(1, 4), sk=(1, 4), dk=(1, 4), dv=(1, 3))

SPECS = [
    Spec(
        "softmax",
        {"x": ("n",)},
        dims(n=(1, 5)),
        lambda a, p: al.softmax(a["x"], **numpy_params(p)),
        ints={"axis": -1},
        empty=("n",),
        nonfinite=(np.nan, np.inf),  # -inf is a masked logit, allowed
        skip=("range",),  # every small integer is an axis of some array; see the test below
    ),
    Spec(
        "local_context",
        {"x": ("s", "din"), "kernel": ("o", "din", "dout")},
        _conv_dims,
        lambda a, p: al.local_context(a["x"], a["kernel"]),
        free=("dout", "o", "s"),
        empty=("s",),
        exact_rank=("x", "kernel"),
    ),
    sdpa_spec(
        "scaled_dot_product_attention",
        SIZES,
        lambda a, p: al.scaled_dot_product_attention(
            a["q"], a["k"], a["v"], mask=a["mask"], **numpy_params(p)
        ),
    ),
    Spec(
        "self_attention",
        {"x": ("s", "d"), "w_q": ("d", "dk"), "w_k": ("d", "dk"), "w_v": ("d", "dv")},
        dims(s=(1, 4), d=(1, 3), dk=(1, 3), dv=(1, 3)),
        lambda a, p: al.self_attention(a["x"], a["w_q"], a["w_k"], a["w_v"], **numpy_params(p)),
        floats={"scale": None},
        free=("dv",),
        empty=("s", "dk"),
        exact_rank=("w_q", "w_k", "w_v"),
    ),
    Spec(
        "split_heads",
        {"a": ("n", "w")},
        _split_dims,
        lambda a, p: al.split_heads(a["a"], **numpy_params(p)),
        ints={"h": 2},
        free=("n", "w"),
        skip=("nonfinite",),  # a pure reshape: NaN is carried, not computed
    ),
    Spec(
        "merge_heads",
        {"a": ("h", "n", "k")},
        dims(h=(1, 3), n=(1, 3), k=(1, 3)),
        lambda a, p: al.merge_heads(a["a"]),
        free=("h", "n", "k"),
        skip=("nonfinite",),
    ),
    Spec(
        "multi_head_attention",
        {
            "x": ("s", "d"),
            "w_q": ("h", "d", "dk"),
            "w_k": ("h", "d", "dk"),
            "w_v": ("h", "d", "dv"),
            "w_o": ("hdv", "dout"),
            "mask": ("s", "s"),
        },
        _mha_dims,
        lambda a, p: al.multi_head_attention(
            a["x"], a["w_q"], a["w_k"], a["w_v"], a["w_o"], mask=a["mask"]
        ),
        free=("dout", "dv"),
        derived=("hdv",),
        empty=("s", "h", "dk"),
        exact_rank=("x", "w_q", "w_k", "w_v", "w_o", "mask"),
        bool_args=("mask",),
    ),
    Spec(
        "column_to_row",
        {"matrix 0": ("d", "n")},
        dims(d=(1, 3), n=(1, 3)),
        lambda a, p: al.column_to_row(a["matrix 0"]),
        free=("d", "n"),
        skip=("nonfinite",),
        exact_rank=("matrix 0",),
    ),
    Spec(
        "row_to_column",
        {"out": ("n", "dv"), "weights": ("n", "m")},
        dims(n=(1, 3), dv=(1, 3), m=(1, 3)),
        lambda a, p: al.row_to_column(a["out"], a["weights"]),
        free=("dv", "m"),
        skip=("nonfinite",),
        exact_rank=("out", "weights"),
    ),
]

for function in ("luong_scores", "luong_attention"):
    with_v = function == "luong_attention"
    v_arg = {"v": ("dv", "m")} if with_v else {}

    def call(score, function=function, with_v=with_v):
        f = getattr(al, function)

        def run(a, p):
            extra = {k: a[k] for k in ("w", "v_a") if k in a}
            args = (a["q"], a["k"], a["v"]) if with_v else (a["q"], a["k"])
            return f(*args, score, **extra)

        return run

    cols = dims(d=(1, 3), n=(1, 3), m=(1, 3), dv=(1, 3))
    exact = ("q", "k", "v", "w", "v_a")
    SPECS += [
        Spec(
            f"{function}[dot]",
            {"q": ("d", "n"), "k": ("d", "m"), **v_arg},
            cols,
            call("dot"),
            free=("dv",),
            empty=("n", "m", "d"),
            exact_rank=exact,
        ),
        Spec(
            f"{function}[general]",
            {"q": ("dq", "n"), "k": ("dk", "m"), "w": ("dk", "dq"), **v_arg},
            dims(dq=(1, 3), dk=(1, 3), n=(1, 3), m=(1, 3), dv=(1, 3)),
            call("general"),
            free=("dv",),
            empty=("n", "m"),
            exact_rank=exact,
        ),
        Spec(
            f"{function}[concat]",
            {"q": ("dq", "n"), "k": ("dk", "m"), "w": ("da", "dqk"), "v_a": ("da",), **v_arg},
            _concat_dims,
            call("concat"),
            free=("dv",),
            derived=("dqk",),
            empty=("n", "m"),
            exact_rank=exact,
        ),
    ]

BY_NAME = {spec.name: spec for spec in SPECS}


test_numpy_function_meets_the_contract = contract_test(BY_NAME)


def test_softmax_axis_out_of_range_or_not_an_integer():
    x = np.zeros((2, 3))
    for axis, error in ((2, ValueError), (-3, ValueError), (True, TypeError), (1.0, TypeError)):
        with pytest.raises(error, match="axis"):
            al.softmax(x, axis=axis)


def test_booleans_are_not_integers():
    """``split_heads(x, True)`` used to be one head; a bool is now a TypeError naming ``h``."""
    with pytest.raises(TypeError, match=r"h must be a positive integer, got True of type bool"):
        al.split_heads(np.zeros((2, 4)), True)
    with pytest.raises(TypeError, match="scale"):
        al.scaled_dot_product_attention(
            np.ones((1, 2)), np.ones((1, 2)), np.ones((1, 1)), None, True
        )


def test_zero_heads_are_rejected_not_zeros():
    """h = 0 used to return an all-zero output."""
    w = np.zeros((0, 3, 2))
    with pytest.raises(ValueError, match=r"h >= 1 heads, got w_q of shape \(0, 3, 2\)"):
        al.multi_head_attention(np.ones((2, 3)), w, w, w, np.zeros((0, 3)))


def test_float16_projection_overflow_is_named():
    """Projections that overflow float16 are reported as such, not as a NaN in ``q``."""
    x = np.full((2, 2), 300, np.float16)
    w = np.full((1, 2, 2), 300, np.float16)
    with pytest.raises(ValueError, match="projection x @ w_q overflowed in float16"):
        al.multi_head_attention(x, w, w, w, np.ones((2, 2), np.float16))
    with pytest.raises(ValueError, match="projection x @ w_q overflowed in float16"):
        al.self_attention(x, w[0], w[0], w[0])
    with pytest.raises(ValueError, match="scores overflowed in float16"):
        al.luong_scores(x, x, "dot")
    with pytest.raises(ValueError, match="output overflowed in float16"):
        al.local_context(x, np.full((1, 2, 1), 300, np.float16))


def test_luong_scores_rejects_an_empty_sequence():
    with pytest.raises(ValueError, match=r"empty sequence: q has shape \(2, 0\)"):
        al.luong_scores(np.zeros((2, 0)), np.zeros((2, 3)), "dot")


def test_torch_tensor_given_to_numpy_says_how_to_convert():
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match=r"x must be a numpy array.*detach\(\)\.cpu\(\)\.numpy"):
        al.softmax(torch.zeros(3, requires_grad=True))


# Issue 22, item 4: the last gaps, each raised from inside numpy before.


@pytest.mark.parametrize(
    ("grid", "error", "match"),
    [
        ((-2, -3), ValueError, r"grid\[0\] \(rows\) must be a positive integer, got -2"),
        ((2, -3), ValueError, r"grid\[1\] \(cols\) must be a positive integer, got -3"),
        ((0, 6), ValueError, r"grid\[0\] \(rows\) must be a positive integer, got 0"),
        ((2, 3, 1), ValueError, r"grid must be a pair \(rows, cols\), got \(2, 3, 1\)"),
        ((6,), ValueError, r"grid must be a pair \(rows, cols\), got \(6,\)"),
        (
            (2.0, 3.0),
            TypeError,
            r"grid\[0\] \(rows\) must be a positive integer, got 2.0 of type float",
        ),
        ((True, 6), TypeError, r"grid\[0\] \(rows\) must be a positive integer, got True"),
        (6, TypeError, r"grid must be a pair \(rows, cols\) of integers, got 6 of type int"),
        ("23", TypeError, r"grid must be a pair \(rows, cols\) of integers, got '23' of type str"),
    ],
)
def test_patches_to_image_checks_its_grid(grid, error, match):
    tokens = al.image_to_patches(np.zeros((8, 12, 3)))  # a (2, 3) grid of 4x4 patches
    with pytest.raises(error, match=match):
        al.patches_to_image(tokens, grid)
    assert al.patches_to_image(tokens, np.array([2, 3])).shape == (8, 12, 3)  # numpy ints do
