"""Tests of attnlab.local_context: a float64 loop, torch's conv1d, and properties."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab import local_context


def loop_local_context(x: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """The layer's formula written as plain loops: out[i] = Σ_j x[(i+j) mod s] K_j."""
    s, _ = x.shape
    half = kernel.shape[0] // 2
    out = np.zeros((s, kernel.shape[2]))
    for i in range(s):
        for j in range(-half, half + 1):
            out[i] += x[(i + j) % s] @ kernel[j + half]
    return out


@st.composite
def layer_inputs(draw):
    half = draw(st.integers(0, 3))
    s = draw(st.integers(2 * half + 1, 12))
    d_in, d_out = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    return rng.normal(size=(s, d_in)), rng.normal(size=(2 * half + 1, d_in, d_out)), rng


def test_hand_example():
    # out[0] = x[-1]*K_{-1} + x[0]*K_0 + x[1]*K_1 = 5*1 + 1*2 + 2*3 = 13, etc.
    x = np.arange(1.0, 6.0).reshape(5, 1)
    k = np.array([1.0, 2.0, 3.0]).reshape(3, 1, 1)
    np.testing.assert_array_equal(local_context(x, k).ravel(), [13, 14, 20, 26, 17])


@settings(max_examples=40, deadline=None)
@given(layer_inputs())
def test_matches_loop(args):
    x, kernel, _ = args
    np.testing.assert_allclose(local_context(x, kernel), loop_local_context(x, kernel), atol=1e-12)


@settings(max_examples=25, deadline=None)
@given(layer_inputs())
def test_matches_torch_conv1d_with_circular_padding(args):
    x, kernel, _ = args
    half = kernel.shape[0] // 2
    xt = torch.from_numpy(x.T).unsqueeze(0)  # (1, d_in, s)
    padded = F.pad(xt, (half, half), mode="circular") if half else xt
    weight = torch.from_numpy(kernel.transpose(2, 1, 0).copy())  # (d_out, d_in, 2C+1)
    expected = F.conv1d(padded, weight).squeeze(0).T.numpy()
    np.testing.assert_allclose(local_context(x, kernel), expected, atol=1e-10)


@settings(max_examples=40, deadline=None)
@given(layer_inputs(), st.integers(-20, 20))
def test_shift_equivariance(args, t):
    x, kernel, _ = args
    shifted_then_mixed = local_context(np.roll(x, t, axis=0), kernel)
    mixed_then_shifted = np.roll(local_context(x, kernel), t, axis=0)
    np.testing.assert_allclose(shifted_then_mixed, mixed_then_shifted, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(layer_inputs(), st.floats(-3, 3), st.floats(-3, 3))
def test_linearity_in_x_and_in_kernel(args, a, b):
    x, kernel, rng = args
    x2, kernel2 = rng.normal(size=x.shape), rng.normal(size=kernel.shape)
    np.testing.assert_allclose(
        local_context(a * x + b * x2, kernel),
        a * local_context(x, kernel) + b * local_context(x2, kernel),
        atol=1e-10,
    )
    np.testing.assert_allclose(
        local_context(x, a * kernel + b * kernel2),
        a * local_context(x, kernel) + b * local_context(x, kernel2),
        atol=1e-10,
    )


@settings(max_examples=40, deadline=None)
@given(layer_inputs(), st.data())
def test_locality(args, data):
    x, kernel, rng = args
    s, half = x.shape[0], kernel.shape[0] // 2
    i = data.draw(st.integers(0, s - 1))
    window = {(i + j) % s for j in range(-half, half + 1)}
    outside = [p for p in range(s) if p not in window]
    if not outside:
        return
    p = data.draw(st.sampled_from(outside))
    changed = x.copy()
    changed[p] += rng.normal(size=x.shape[1]) * 100
    np.testing.assert_allclose(local_context(changed, kernel)[i], local_context(x, kernel)[i])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_keeps_float_dtype(dtype):
    x = np.ones((5, 2), dtype=dtype)
    k = np.ones((3, 2, 1), dtype=dtype)
    assert local_context(x, k).dtype == dtype


def test_even_number_of_offsets_is_rejected():
    with pytest.raises(ValueError, match=r"odd number.*\(4, 2, 3\)"):
        local_context(np.ones((6, 2)), np.ones((4, 2, 3)))


def test_mismatched_input_width_is_rejected():
    with pytest.raises(ValueError, match=r"\(5, 2\).*\(3, 4, 1\)"):
        local_context(np.ones((5, 2)), np.ones((3, 4, 1)))


@pytest.mark.parametrize(
    ("x_shape", "k_shape", "pattern"),
    [
        ((5,), (3, 1, 1), "x must have shape"),
        ((5, 1), (3, 1), "kernel must have shape"),
        ((0, 1), (1, 1, 1), "empty"),
        ((2, 1), (3, 1, 1), "wrap"),
    ],
)
def test_bad_shapes_are_rejected(x_shape, k_shape, pattern):
    with pytest.raises(ValueError, match=pattern):
        local_context(np.ones(x_shape), np.ones(k_shape))
