"""Issue 16's error contract for the positions code (numpy and torch): no silent zeros, no NaN.

Each case here returned a silent wrong result before (all-zero weights read as masking, NaN,
a wrapped-around unsigned difference, a bool taken for an integer); each must now raise a
``ValueError``/``TypeError`` from attnlab that names the argument, or give the float64 answer.
"""

import numpy as np
import pytest
import torch

import attnlab.nn as ann
from attnlab import (
    combine_linear,
    convolution_as_attention,
    convolution_attention_params,
    gam_position_weights,
    gam_relative_attention,
    gam_relative_vectors,
    relative_position_index,
    scaled_dot_product_attention,
    shaw_attention,
    sinusoidal_positions,
    sinusoidal_shift_matrix,
)
from attnlab.nn import GAMRelativeAttention, ShawRelativeAttention
from attnlab.nn.positions import gam_relative_vectors as torch_gam_relative_vectors
from attnlab.positions import circular_offsets

OVERFLOW = "overflowed in float16"

# ---- float16 overflow read as masking -------------------------------------------------------


def _shaw_half(value: float = 200.0):
    # d_k = 4: q·k = -160000 (-113137 after the 1/sqrt(d_k) scaling), beyond float16's 65504
    q = np.full((3, 4), value, dtype=np.float16)
    table = np.zeros((3, 4), dtype=np.float16)
    return q, -q, np.ones((3, 2), dtype=np.float16), table, np.zeros((3, 2), dtype=np.float16)


def test_shaw_float16_overflow_raises_like_sdpa():
    q, k, v, a_k, a_v = _shaw_half()
    # the reference behaviour: scaled_dot_product_attention says why
    with pytest.raises(ValueError, match=OVERFLOW):
        scaled_dot_product_attention(q, k, v)
    with pytest.raises(ValueError, match=OVERFLOW):
        shaw_attention(q, k, v, a_k, a_v)


def test_shaw_float16_in_range_is_float64_answer():
    q, k, v, a_k, a_v = _shaw_half(2.0)
    out, w = shaw_attention(q, k, v, a_k, a_v)
    ref_out, ref_w = shaw_attention(*(t.astype(np.float64) for t in (q, k, v, a_k, a_v)))
    assert out.dtype == np.float16
    np.testing.assert_allclose(w, ref_w, atol=2e-3)
    np.testing.assert_allclose(out, ref_out, atol=2e-3)


def test_gam_position_weights_float16_overflow_raises():
    p = np.full((3, 2), 200.0, dtype=np.float16)
    b_p = -np.eye(2, dtype=np.float16)  # δ = -p pᵀ = -80000: -inf in float16
    with pytest.raises(ValueError, match=OVERFLOW):
        gam_position_weights(p, b_p)
    y = np.ones((3, 2), dtype=np.float16)
    with pytest.raises(ValueError, match=OVERFLOW):
        gam_relative_attention(y, p, np.zeros((2, 2), np.float16), b_p, np.eye(2, dtype=np.float16))


def test_gam_position_weights_nonfinite_input_names_it():
    p = np.ones((3, 2))
    p[1, 0] = np.nan
    with pytest.raises(ValueError, match="p contains NaN"):
        gam_position_weights(p, np.eye(2))
    with pytest.raises(ValueError, match="b_p contains NaN"):
        gam_position_weights(np.ones((3, 2)), np.full((2, 2), np.inf))


def test_torch_shaw_and_gam_overflow_raise_when_values_checked():
    torch.manual_seed(0)
    shaw = ShawRelativeAttention(2, 1, k_max=1).half()
    with torch.no_grad():
        for lin in (shaw.w_q, shaw.w_k, shaw.w_v, shaw.w_o):
            lin.weight.copy_(torch.eye(2))
        shaw.w_k.weight.mul_(-1)
    x = torch.full((1, 3, 2), 200.0, dtype=torch.float16)
    _, w = shaw(x, need_weights=True)  # values unchecked by default (no device synchronisation)
    with ann.check_values(), pytest.raises(ValueError, match=OVERFLOW):
        shaw(x)
    with ann.check_values(), pytest.raises(ValueError, match="x contains NaN"):
        shaw(torch.full((1, 3, 2), float("nan")).half())
    gam = GAMRelativeAttention(2, 3).double()
    with torch.no_grad():
        gam.embed.weight.fill_(1e3)
        gam.b_p.fill_(-1e306)  # δ ≈ -1e306 · 6000² · 2: beyond float64
    with ann.check_values(), pytest.raises(ValueError, match="position logits"):
        gam(torch.zeros(1, 3, 2, dtype=torch.float64))


# ---- sinusoidal: one rule for base and the shift --------------------------------------------


@pytest.mark.parametrize("base", [0, 1, -3.0, 0.5, float("nan"), float("inf")])
def test_shift_matrix_base_same_rule_as_table(base):
    with pytest.raises(ValueError, match="base must be a finite number"):
        sinusoidal_positions(4, 4, base=base)
    with pytest.raises(ValueError, match="base must be a finite number"):
        sinusoidal_shift_matrix(1, 4, base=base)


def test_shift_matrix_custom_base_matches_table():
    pe = sinusoidal_positions(20, 6, base=100.0)
    np.testing.assert_allclose(pe[:-3] @ sinusoidal_shift_matrix(3, 6, base=100.0), pe[3:])


# ---- GAM positions: unsigned wrap-around ----------------------------------------------------


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64])
def test_gam_vectors_decreasing_unsigned_positions_rejected(dtype):
    # uint: 1 - 3 wraps to 254 (> 0), so a naive diff check passes decreasing positions
    with pytest.raises(ValueError, match="strictly increasing"):
        gam_relative_vectors(np.array([3, 1], dtype=dtype))
    np.testing.assert_array_equal(
        gam_relative_vectors(np.array([1, 3], dtype=dtype)), [[1, 3], [3, 1]]
    )


def test_gam_vectors_huge_uint64_rejected():
    with pytest.raises(ValueError, match="positions"):
        gam_relative_vectors(np.array([0, 2**63 + 5], dtype=np.uint64))


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int64])
def test_torch_gam_vectors_decreasing_rejected(dtype):
    with pytest.raises(ValueError, match="strictly increasing"):
        torch_gam_relative_vectors(torch.tensor([3, 1], dtype=dtype))
    r = torch_gam_relative_vectors(torch.tensor([1, 3], dtype=dtype))
    assert r.tolist() == [[1, 3], [3, 1]]


# ---- booleans (and floats) where integers belong: TypeError ---------------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda: sinusoidal_positions(True, 4),
        lambda: sinusoidal_positions(4, 2.0),
        lambda: sinusoidal_shift_matrix(1, True),
        lambda: relative_position_index(True, 1),
        lambda: relative_position_index(4, k_max=False),
        lambda: relative_position_index(4, k_max=1.0),
        lambda: circular_offsets(True),
        lambda: convolution_attention_params(np.ones((1, 1, 1)), s=True),
        lambda: ShawRelativeAttention(4, 2, k_max=True),
        lambda: ShawRelativeAttention(4, True, k_max=1),
        lambda: ShawRelativeAttention(4, 2, k_max=1.5),
        lambda: GAMRelativeAttention(4, True),
        lambda: GAMRelativeAttention(4, 3.0),
    ],
)
def test_bool_or_float_for_integer_is_type_error(call):
    with pytest.raises(TypeError, match="integer"):
        call()


@pytest.mark.parametrize(
    "call",
    [
        lambda: sinusoidal_shift_matrix(True, 4),
        lambda: sinusoidal_shift_matrix("1", 4),
        lambda: sinusoidal_positions(3, 4, base=True),
        lambda: combine_linear([1.0], [2.0], c1=True),
        lambda: convolution_as_attention(np.ones((3, 1)), np.ones((1, 1, 1)), alpha=True),
        lambda: GAMRelativeAttention(4, 3, c1=True),
    ],
)
def test_bool_or_string_for_number_is_type_error(call):
    with pytest.raises(TypeError):
        call()


def test_numpy_integers_still_accepted():
    np.testing.assert_array_equal(
        relative_position_index(np.int64(3), k_max=np.int32(1)), relative_position_index(3, 1)
    )
    np.testing.assert_allclose(
        sinusoidal_shift_matrix(np.int64(2), np.int64(4)), sinusoidal_shift_matrix(2, 4)
    )
