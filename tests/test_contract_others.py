"""The error contract for the GAM and positions modules (numpy and torch).

Written by the "contract" helper for issue 16; the modules belong to other helpers. Some of
these tests are EXPECTED TO FAIL until the owners apply the fixes listed in the issue-16
report (nothing here is marked xfail, on purpose: the lead merges this file after the fixes).
The machinery and the classes of bad input are those of ``tests/_contract.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _contract import (
    Spec,
    contract_test,
    dims,
    module_call,
    numpy_params,
    self_attention_spec,
)

import attnlab as al
import attnlab.nn as ann
from attnlab.nn import positions as npos

ARRAYS = ("rank", "size", "empty", "nonfinite", "dtype", "type", "float16")


NUMPY = [
    Spec(
        "gam_attention",
        {"y": ("n", "m"), "b": ("nb", "m", "m"), "w_v": ("m", "mv")},
        dims(n=(1, 4), m=(1, 3), nb=(1, 2), mv=(1, 3)),
        lambda a, p: al.gam_attention(a["y"], a["b"], a["w_v"], **numpy_params(p)),
        floats={"n1": 1.0},
        empty=("n", "m"),
        exact_rank=("y", "w_v"),
    ),
    Spec(
        "gam_init_std",
        {},
        dims(),
        lambda a, p: al.gam_init_std(**numpy_params(p)),
        ints={"m": 4},
        floats={"n1": 1.0},
        bad_values={"n1": (0.0, -1.0, float("nan"), float("inf"), 200.0, 1e6)},
        skip=ARRAYS,
    ),
    Spec(
        "sinusoidal_positions",
        {},
        dims(),
        lambda a, p: al.sinusoidal_positions(**numpy_params(p)),
        ints={"n": 3, "d": 4},
        floats={"base": 10000.0},
        bad_values={"n": (-1, 2.0), "d": (0, -2, 3, 2.0)},  # n = 0: an empty table, allowed
        skip=ARRAYS,
    ),
    Spec(
        "sinusoidal_shift_matrix",
        {},
        dims(),
        lambda a, p: al.sinusoidal_shift_matrix(**numpy_params(p)),
        ints={"d": 4},
        floats={"k": 1.0, "base": 10000.0},
        bad_values={
            "d": (0, -2, 3, 2.0),
            "k": (float("nan"), float("inf"), "1"),
            "base": (0.0, -1.0, float("nan"), float("inf"), "1"),
        },
        skip=ARRAYS,
    ),
    Spec(
        "relative_position_index",
        {},
        dims(),
        lambda a, p: al.relative_position_index(**numpy_params(p)),
        ints={"n": 3, "k_max": 1},
        bad_values={"n": (0, -1, 2.0), "k_max": (-1, 1.0)},
        skip=ARRAYS,
    ),
]


_gam_module = module_call(
    lambda a, p: ann.GeneralizedAttention(p["d"], p["h"], n1=p["n1"]),
    lambda gam, a: gam(a["y"], a["mask"]),
)
_shaw_module = module_call(
    lambda a, p: ann.ShawRelativeAttention(p["d"], p["h"], p["k_max"]),
    lambda shaw, a: shaw(a["x"], a["mask"], need_weights=True),
)
_gam_relative_module = module_call(
    lambda a, p: ann.GAMRelativeAttention(p["d"], p["n"], h=p["h"]),
    lambda gam, a: gam(a["y"], mask=a["mask"], need_weights=True),
)


TORCH = [
    self_attention_spec(
        "nn.GeneralizedAttention",
        dims(b=(0, 2), n=(1, 3), d=(4, 4)),
        _gam_module,
        x="y",
        s="n",
        ints={"d": 4, "h": 2},
        floats={"n1": 1.0},
        derived=("d",),
        empty=("n",),
    ),
    self_attention_spec(
        "nn.ShawRelativeAttention",
        dims(b=(0, 2), s=(1, 3), d=(4, 4)),
        _shaw_module,
        ints={"d": 4, "h": 2, "k_max": 1},
        bad_values={"k_max": (-1, 1.0)},
        derived=("d",),
        empty=("s",),
    ),
    self_attention_spec(
        "nn.GAMRelativeAttention",
        dims(b=(1, 2), n=(3, 3), d=(4, 4)),
        _gam_relative_module,
        x="y",
        s="n",
        ints={"d": 4, "n": 3, "h": 2},
        derived=("d", "n"),
    ),
    Spec(
        "nn.gam_logits",
        {"y": ("b", "n", "m"), "b": ("nb", "m", "m")},
        dims(b=(1, 2), n=(1, 3), m=(1, 3), nb=(1, 2)),
        lambda a, p: ann.gam_logits(a["y"], a["b"], n1=p["n1"]),
        backend="torch",
        floats={"n1": 1.0},
        empty=("n", "m"),
        exact_rank=("y",),
    ),
    Spec(
        "nn.positions.combine_geometric",
        {"z": ("n", "d"), "pi": ("n", "d")},
        dims(n=(1, 3), d=(1, 3)),
        lambda a, p: npos.combine_geometric(a["z"], a["pi"]),
        backend="torch",
        no_rank=("z", "pi"),
        skip=("float16",),
    ),
]

BY_NAME = {spec.name: spec for spec in NUMPY + TORCH}


test_others_meet_the_contract = contract_test(BY_NAME, values_checked=lambda spec: True)


# ------------------------------------------------------------------ the cases issue 16 names


def test_gam_attention_float16_overflow_is_reported_not_zeros():
    y = np.full((3, 2), 300.0, np.float16)
    with pytest.raises(ValueError, match="overflow"):
        al.gam_attention(y, np.ones((2, 2), np.float16), np.eye(2, dtype=np.float16))


def test_gam_init_std_large_power_is_a_value_error():
    with pytest.raises(ValueError, match="n1"):
        al.gam_init_std(4, n1=200)  # OverflowError on main


def test_shaw_attention_float16_is_right_or_reports_overflow():
    """q = 200, k = -200 in float16 (issue 16): the float64 answer, or an overflow error."""
    from _contract import Case, classify

    for value in (200.0, 300.0):
        q, k = np.full((2, 2), value), np.full((2, 2), -value)
        a = np.zeros((3, 2))

        def run(dtype, q=q, k=k, a=a):
            return al.shaw_attention(*(x.astype(dtype) for x in (q, k, k, a, a)))

        case = Case("shaw", "float16", str(value), lambda run=run: run(np.float16), ("overflowed",))
        case.reference = lambda run=run: run(np.float64)
        assert classify(case)[0] == "ok", classify(case)


def test_gam_position_weights_float16_overflow_is_reported():
    p = np.full((3, 2), 300.0, np.float16)
    with pytest.raises(ValueError, match="overflow"):
        al.gam_position_weights(p, np.ones((2, 2), np.float16))


def test_sinusoidal_shift_matrix_rejects_base_zero_like_sinusoidal_positions():
    with pytest.raises(ValueError, match="base"):
        al.sinusoidal_positions(3, 4, base=0.0)
    with pytest.raises(ValueError, match="base"):
        al.sinusoidal_shift_matrix(1, 4, base=0.0)  # NaN on main


def test_gam_relative_vectors_rejects_decreasing_unsigned_positions():
    with pytest.raises(ValueError, match="positions"):
        al.gam_relative_vectors(np.array([5, 2, 7], dtype=np.uint64))


def test_generalized_attention_huge_input_raises_with_the_switch():
    torch.manual_seed(0)
    gam = ann.GeneralizedAttention(4, 2)
    with ann.check_values(), pytest.raises(ValueError, match="overflow|NaN"):
        gam(torch.full((1, 3, 4), 1e20))  # NaN weights on main, whatever the switch


def test_generalized_attention_empty_sequence_is_rejected():
    gam = ann.GeneralizedAttention(4, 2)
    with pytest.raises(ValueError, match="empty"):
        gam(torch.zeros(1, 0, 4))


def test_booleans_are_not_integers_in_positions():
    with pytest.raises(TypeError, match="n"):
        al.sinusoidal_positions(True, 4)
    with pytest.raises(TypeError, match="k_max"):
        ann.ShawRelativeAttention(4, 2, True)


# Issue 22, item 4: the last gaps (each raised from inside numpy or torch, or said the wrong thing).


@pytest.mark.parametrize(
    ("n1", "error", "match"),
    [
        (
            np.array([1.0, 2.0]),
            TypeError,
            r"the power n1 must be a positive finite number, got array",
        ),
        (np.array(2.0), TypeError, r"the power n1 .*of type ndarray"),
        (
            1 + 2j,
            TypeError,
            r"the power n1 must be a positive finite number, got \(1\+2j\) of type complex",
        ),
        ("2", TypeError, r"the power n1 .*got '2' of type str"),
        (True, TypeError, r"the power n1 .*got True of type bool"),
        (0.0, ValueError, r"the power n1 must be a positive finite number, got 0.0"),
        (float("nan"), ValueError, r"the power n1 must be a positive finite number, got nan"),
    ],
)
def test_signed_power_checks_n1_in_numpy_and_torch(n1, error, match):
    with pytest.raises(error, match=match):
        al.signed_power(np.ones(3), n1)
    with pytest.raises(error, match=match):
        ann.signed_power(torch.ones(3), n1)


def test_signed_power_refuses_a_tensor_exponent():
    with pytest.raises(TypeError, match=r"the power n1 .*of type Tensor"):
        ann.signed_power(torch.ones(3), torch.tensor([1.0, 2.0]))


@pytest.mark.parametrize(
    ("degree", "error", "match"),
    [
        (2.5, TypeError, r"degree must be a positive integer, got 2.5 of type float"),
        (2.0, TypeError, r"degree must be a positive integer, got 2.0 of type float"),
        (True, TypeError, r"degree must be a positive integer, got True of type bool"),
        ("2", TypeError, r"degree must be a positive integer, got '2' of type str"),
        (0, ValueError, r"degree must be a positive integer, got 0"),
        (None, ValueError, r'f="poly" needs an integer degree >= 1, got None'),
    ],
)
def test_generalized_attention_checks_the_degree(degree, error, match):
    with pytest.raises(error, match=match):
        ann.GeneralizedAttention(8, 2, f="poly", degree=degree)


@pytest.mark.parametrize(
    ("coeffs", "error", "match"),
    [
        (
            [1.0, 0.5],
            TypeError,
            r"coeffs must be a torch.Tensor of shape \(L,\) or \(L, \.\.\.\), got list",
        ),
        ((1.0,), TypeError, r"coeffs must be a torch.Tensor .*got tuple"),
        (np.array([1.0, 0.5]), TypeError, r"coeffs must be a torch.Tensor .*torch.from_numpy"),
        (
            torch.tensor(1.0, dtype=torch.float64),
            ValueError,
            r"coeffs must have shape \(L,\) or \(L, \.\.\.\), got shape \(\)",
        ),
        (torch.tensor([1, 2]), ValueError, r"coeffs must be a floating-point tensor"),
        (
            torch.tensor([1.0, 0.5]),
            ValueError,
            r"coeffs is torch.float32 on cpu but must match torch.float64",
        ),
    ],
)
def test_torch_gam_logits_checks_the_coefficients(coeffs, error, match):
    y = torch.randn(1, 3, 2, dtype=torch.float64)
    b = torch.eye(2, dtype=torch.float64)[None]
    with pytest.raises(error, match=match):
        ann.gam_logits(y, b, f="poly", coeffs=coeffs)


def test_torch_gam_logits_with_checked_coefficients_match_numpy():
    y = torch.randn(1, 3, 2, dtype=torch.float64)
    b = torch.randn(2, 2, 2, dtype=torch.float64)
    got = ann.gam_logits(y, b, f="poly", coeffs=torch.tensor([1.0, 0.5], dtype=torch.float64))
    ref = al.gam_logits(y[0].numpy(), b.numpy(), f="poly", coeffs=[1.0, 0.5])
    np.testing.assert_allclose(got[0].numpy(), ref, rtol=1e-12)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (
            lambda: al.sinusoidal_positions(10**10, 4),
            r"sinusoidal_positions\(n=10000000000, d=4\).*320,000,000,000 bytes",
        ),
        (lambda: al.sinusoidal_positions(10**5, 10**5), r"n=100000, d=100000"),
        (lambda: al.sinusoidal_shift_matrix(1, 10**6), r"sinusoidal_shift_matrix\(d=1000000\)"),
        (lambda: al.rotary_angles(10**10, 4), r"rotary_angles\(n=10000000000, d=4\)"),
        (lambda: al.relative_position_index(10**6, 2), r"relative_position_index\(n=1000000\)"),
        (lambda: al.positions.circular_offsets(10**6), r"circular_offsets\(s=1000000\)"),
    ],
)
def test_tables_too_big_to_build_are_a_value_error_not_a_memory_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_a_memory_error_while_building_a_table_becomes_a_value_error(monkeypatch):
    def no_memory(*args, **kwargs):
        raise MemoryError("Unable to allocate")

    monkeypatch.setattr(np, "empty", no_memory)
    with pytest.raises(
        ValueError, match=r"sinusoidal_positions\(n=1000, d=8\) .*64,000 bytes.*memory"
    ):
        al.sinusoidal_positions(1000, 8)


def test_combine_geometric_says_which_non_finite_value_it_met():
    """``inf * 0`` is NaN inside; the message must describe the input, which holds no NaN."""
    for z, pi, name, detail in (
        (
            [np.inf, 1.0],
            [0.0, 1.0],
            "z",
            r"1 infinite entry and no NaN; the first, inf, at index \(0,\)",
        ),
        (
            [1.0, 2.0],
            [3.0, -np.inf],
            "pi",
            r"1 infinite entry and no NaN; the first, -inf, at index \(1,\)",
        ),
        (
            [np.nan, np.inf],
            [1.0, 1.0],
            "z",
            r"1 NaN and 1 infinite entry; the first, nan, at index \(0,\)",
        ),
    ):
        with pytest.raises(
            ValueError, match=rf"{name} contains NaN or infinite values \({detail}\)"
        ):
            al.combine_geometric(np.array(z), np.array(pi))
        with (
            ann.check_values(),
            pytest.raises(
                ValueError, match=rf"{name} contains NaN or infinite values \({detail}\)"
            ),
        ):
            npos.combine_geometric(torch.tensor(z), torch.tensor(pi))


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_torch_combine_geometric_does_not_overflow_where_numpy_does_not(dtype):
    big = 300.0 if dtype == torch.float16 else 1e20  # z * pi overflows the dtype, sqrt(z pi) not
    z = torch.tensor([big, -big, big], dtype=dtype, requires_grad=True)
    pi = torch.tensor([big, -big, -big], dtype=dtype)
    out = npos.combine_geometric(z, pi)
    ref = al.combine_geometric(z.detach().double().numpy(), pi.double().numpy())
    assert torch.isfinite(out).all(), out
    np.testing.assert_allclose(out.detach().double().numpy(), ref, rtol=2e-3)
    out.sum().backward()
    assert torch.isfinite(z.grad).all()
    np.testing.assert_allclose(
        z.grad.double().numpy(), [0.5, 0.5, 0.0], rtol=2e-3
    )  # d g/dz = sqrt(pi/z)/2
