"""Tests of attnlab.softmax against closed forms and naive float64 computations."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from attnlab import softmax

finite_logits = arrays(
    np.float64,
    st.tuples(st.integers(1, 4), st.integers(1, 6)),
    elements=st.floats(-50, 50, allow_nan=False),
)


def naive_softmax(row: list[float]) -> list[float]:
    """The textbook definition, written with math.exp, for moderate logits only."""
    exps = [math.exp(v) for v in row]
    return [e / sum(exps) for e in exps]


def test_closed_form_two_logits():
    # softmax([0, log 3]) = [1/4, 3/4] exactly.
    np.testing.assert_allclose(softmax(np.array([0.0, math.log(3.0)])), [0.25, 0.75])


@settings(max_examples=50, deadline=None)
@given(finite_logits)
def test_matches_naive_definition(x):
    expected = np.array([naive_softmax(list(row)) for row in x])
    np.testing.assert_allclose(softmax(x), expected, rtol=1e-12, atol=1e-15)


@settings(max_examples=50, deadline=None)
@given(finite_logits, st.floats(-1e6, 1e6))
def test_rows_sum_to_one_and_shift_invariant(x, shift):
    w = softmax(x)
    assert np.all(w >= 0)
    np.testing.assert_allclose(w.sum(axis=-1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(softmax(x + shift), w, atol=1e-9)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("magnitude", [1e2, 1e4, 1e30])
def test_huge_logits_stay_finite_and_keep_dtype(dtype, magnitude):
    big = min(magnitude, float(np.finfo(dtype).max) / 2)
    # exp(big) overflows every dtype here; the exact answers are still 1, 0, 0 and 1/2, 1/2, 0.
    x = np.array([[big, 0.0, -big], [big, big, -big]], dtype=dtype)
    w = softmax(x)
    assert w.dtype == dtype
    assert np.all(np.isfinite(w))
    np.testing.assert_allclose(w, [[1.0, 0.0, 0.0], [0.5, 0.5, 0.0]], atol=1e-6)


def test_axis_argument():
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose(softmax(x, axis=0), softmax(x.T, axis=-1).T)


def test_minus_infinity_means_zero_weight_and_all_masked_row_is_zero():
    x = np.array([[0.0, -np.inf, 0.0], [-np.inf, -np.inf, -np.inf]])
    w = softmax(x)
    np.testing.assert_allclose(w, [[0.5, 0.0, 0.5], [0.0, 0.0, 0.0]])


def test_integers_become_float64():
    assert softmax(np.array([1, 2, 3])).dtype == np.float64


@pytest.mark.parametrize("bad", [[np.nan, 0.0], [np.inf, 0.0]])
def test_nan_and_plus_infinity_are_rejected(bad):
    with pytest.raises(ValueError, match="NaN or \\+inf"):
        softmax(np.array(bad))


def test_empty_axis_is_rejected():
    with pytest.raises(ValueError, match="at least one logit"):
        softmax(np.zeros((2, 0)))


@settings(max_examples=40, deadline=None)
@given(
    arrays(
        np.float64,
        st.tuples(st.integers(1, 4), st.integers(1, 6)),
        elements=st.floats(-1e4, 1e4, allow_nan=False),
    )
)
def test_matches_torch_softmax_for_large_logits(x):
    # math.exp overflows here, so compare with PyTorch's (independently stable) softmax.
    expected = torch.softmax(torch.from_numpy(x), dim=-1).numpy()
    np.testing.assert_allclose(softmax(x), expected, rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize(("shape", "axis"), [((2, 3), 2), ((2, 3), -3), ((), -1)])
def test_axis_out_of_range_is_rejected(shape, axis):
    with pytest.raises(ValueError, match=r"axis .* out of range .*shape"):
        softmax(np.zeros(shape), axis=axis)
