"""Issue 16's error contract for the positions code, under generated bad input.

The machinery is ``tests/_contract.py``: each :class:`Spec` below describes one public
function or module of ``attnlab.positions`` / ``attnlab.nn.positions``; the test draws valid
calls broken in one way (rank, size, empty, non-finite, dtype, type, bool, range, float16)
and asserts an attnlab ``ValueError``/``TypeError`` naming the argument, or a finite result
equal to the float64 reference. Hyperparameters whose 0 is legal (``k_max``) or that belong
to another module's contract are covered by the hand-written cases of
``tests/test_positions_errors.py`` instead.
"""

from __future__ import annotations

import dataclasses

from _contract import (
    Spec,
    contract_test,
    dims,
    module_call,
    numpy_params,
    self_attention_spec,
)
from hypothesis import strategies as st

import attnlab as al
import attnlab.nn as ann
from attnlab.nn import GAMRelativeAttention, ShawRelativeAttention


def _shaw_dims(draw):
    size = dims(s=(1, 4), dk=(1, 3), dv=(1, 3), kmax=(0, 2))(draw)
    return {**size, "r": 2 * size.pop("kmax") + 1}


def _conv_dims(draw):
    s = draw(st.integers(1, 5))
    c = draw(st.integers(0, (s - 1) // 2))
    return {"s": s, "o": 2 * c + 1, "din": draw(st.integers(1, 3)), "dout": draw(st.integers(1, 3))}


def _rotary_dims(draw):
    """Sizes for RoPE: any batch, heads and length, an even width ``d`` (pairs)."""
    return {**dims(b=(1, 2), h=(1, 2), n=(1, 4))(draw), "d": 2 * draw(st.integers(1, 3))}


def _gam_dims(draw):
    return dims(n=(1, 4), m=(1, 3), nb=(1, 2), ns=(1, 2), dv=(1, 3))(draw)


#: c1 must lie strictly between 0 and 1 (eq. 20): both ends, beyond them, NaN, inf, a string.
C1_BAD = (0.0, 1.0, -1.0, -0.5, 1.5, float("nan"), float("inf"), "1")


def _with_and_without_mask(spec: Spec) -> list[Spec]:
    """``spec`` (its optional ``mask`` given) and the same call without it (``mask=None``)."""
    args = {name: shape for name, shape in spec.args.items() if name != "mask"}
    return [spec, dataclasses.replace(spec, name=f"{spec.name}[mask=None]", args=args)]


NUMPY_SPECS = [
    *_with_and_without_mask(
        Spec(
            "shaw_attention",
            {
                "q": ("s", "dk"),
                "k": ("s", "dk"),
                "v": ("s", "dv"),
                "a_k": ("r", "dk"),
                "a_v": ("r", "dv"),
                "mask": ("s", "s"),
            },
            _shaw_dims,
            lambda a, p: al.shaw_attention(
                a["q"], a["k"], a["v"], a["a_k"], a["a_v"], a.get("mask")
            ),
            empty=("s", "dk"),
            exact_rank=("a_k", "a_v"),
            bool_args=("mask",),
            no_rank=("mask",),
        )
    ),
    *_with_and_without_mask(
        Spec(
            "gam_position_weights",
            {"p": ("n", "m"), "b_p": ("nb", "m", "m"), "mask": ("n", "n")},
            _gam_dims,
            lambda a, p: al.gam_position_weights(
                a["p"], a["b_p"], mask=a.get("mask"), **numpy_params(p)
            ),
            floats={"n1": 1.0},
            free=("nb",),
            empty=("n", "m", "nb"),
            exact_rank=("p",),
            bool_args=("mask",),
            no_rank=("mask",),
        )
    ),
    *_with_and_without_mask(
        Spec(
            "gam_relative_attention",
            {
                "y": ("n", "m"),
                "p": ("n", "m"),
                "b": ("nb", "m", "m"),
                "b_p": ("ns", "m", "m"),
                "w_v": ("m", "dv"),
                "mask": ("n", "n"),
            },
            _gam_dims,
            lambda a, p: al.gam_relative_attention(
                a["y"], a["p"], a["b"], a["b_p"], a["w_v"], mask=a.get("mask"), **numpy_params(p)
            ),
            floats={"c1": 0.5},
            bad_values={"c1": C1_BAD},
            free=("nb", "ns", "dv"),
            empty=("n", "m", "ns"),
            exact_rank=("y", "p", "w_v"),
            bool_args=("mask",),
            no_rank=("mask",),
        )
    ),
    Spec(
        "combine_linear",
        {"z": ("n", "d"), "pi": ("n", "d")},
        dims(n=(1, 3), d=(1, 3)),
        lambda a, p: al.combine_linear(a["z"], a["pi"], **numpy_params(p)),
        floats={"c1": 0.5},
        bad_values={"c1": C1_BAD},
        exact_rank=("z", "pi"),
    ),
    Spec(
        "combine_geometric",
        {"z": ("n", "d"), "pi": ("n", "d")},
        dims(n=(1, 3), d=(1, 3)),
        lambda a, p: al.combine_geometric(a["z"], a["pi"]),
        exact_rank=("z", "pi"),
    ),
    Spec(
        "apply_rotary",
        {"x": ("b", "n", "d")},
        _rotary_dims,
        lambda a, p: al.apply_rotary(a["x"], **numpy_params(p)),
        floats={"base": 10000.0},
        empty=("d",),  # n = 0 rotates nothing and is legal, as sinusoidal_positions(0, d)
    ),
    Spec(
        "convolution_as_attention",
        {"x": ("s", "din"), "kernel": ("o", "din", "dout")},
        _conv_dims,
        lambda a, p: al.convolution_as_attention(a["x"], a["kernel"], **numpy_params(p)),
        floats={"alpha": 5.0},
        free=("dout", "o", "s"),
        empty=("s",),
        exact_rank=("x", "kernel"),
    ),
]


def _width(x, axis: int, default: int = 2) -> int:
    """Size ``axis`` of a rank-3 input, else ``default`` (a module for a rank-broken input)."""
    return x.shape[axis] if hasattr(x, "shape") and len(x.shape) == 3 else default


_shaw_module = module_call(
    lambda a, p: ShawRelativeAttention(_width(a["x"], -1), p["h"], k_max=1),
    lambda layer, a: layer(a["x"], a["mask"], need_weights=True),
)
_gam_module = module_call(
    lambda a, p: GAMRelativeAttention(
        _width(a["y"], 2), _width(a["y"], 1), c1=p["c1"], rel_embedding="layernorm"
    ),
    lambda layer, a: layer(a["y"], mask=a["mask"], need_weights=True),
)


def _rotary_module(a, p):
    q = a["q"]
    d = q.shape[-1] if len(q.shape) == 4 and q.shape[-1] >= 2 else 2  # for a broken input
    return ann.RotaryEmbedding(d, **numpy_params(p))(a["q"], a["k"])


TORCH_SPECS = [
    Spec(
        "nn.apply_rotary",
        {"x": ("b", "n", "d")},
        _rotary_dims,
        lambda a, p: ann.apply_rotary(a["x"], **numpy_params(p)),
        backend="torch",
        floats={"base": 10000.0},
        empty=("d",),
    ),
    Spec(
        "RotaryEmbedding",
        {"q": ("b", "h", "n", "d"), "k": ("b", "h", "n", "d")},
        _rotary_dims,
        _rotary_module,
        backend="torch",
        floats={"base": 10000.0},
        free=("b", "h"),  # k may have other heads (grouped queries): RoPE does not mix them
        empty=("d",),
    ),
    self_attention_spec(
        "ShawRelativeAttention",
        dims(b=(1, 2), s=(2, 4), d=(1, 4)),  # s = 1: a (1, 1) mask broadcasts, legally
        _shaw_module,
        ints={"h": 1},
        free=("b", "d"),
        empty=("s",),
    ),
    self_attention_spec(
        "GAMRelativeAttention",
        dims(b=(1, 2), n=(1, 4), d=(1, 4)),
        _gam_module,
        x="y",
        s="n",
        floats={"c1": 0.5},
        free=("b", "d", "n"),
    ),
]

BY_NAME = {spec.name: spec for spec in NUMPY_SPECS + TORCH_SPECS}


test_positions_meet_the_contract = contract_test(BY_NAME, values_checked=lambda spec: True)


def test_specs_cover_every_array_function_of_the_package():
    """Every public function of attnlab.positions taking arrays has a spec (or a hand test)."""
    hand_tested = {  # integer-only or integer-array inputs: tests/test_positions_errors.py
        "sinusoidal_positions",
        "sinusoidal_shift_matrix",
        "relative_position_index",
        "gam_relative_vectors",
        "circular_offsets",
        "convolution_attention_params",
        "rotary_angles",  # sizes only; its bad input is in tests/test_rotary.py
    }
    import attnlab.positions as positions

    assert set(positions.__all__) == hand_tested | {s.name.split("[")[0] for s in NUMPY_SPECS}
