"""Rotary position embeddings (RoPE), numpy and torch, against an independent complex form.

The reference below is Su et al.'s (2021) complex-number statement of RoPE, written from the
paper and not from the package: the pair ``i`` of a vector is the complex number
``z_i = x_a + i x_b`` and position ``p`` multiplies it by ``e^{i p θ_i}``, with
``θ_i = base^(-2i/d)``. The pair ``(a, b)`` is ``(2i, 2i+1)`` in the interleaved layout and
``(i, i + d/2)`` in the half layout.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import attnlab
import attnlab.nn as ann
from attnlab import apply_rotary, rotary_angles

LAYOUTS = ("interleaved", "half")


def _pairs(d: int, layout: str) -> list[tuple[int, int]]:
    if layout == "interleaved":
        return [(2 * i, 2 * i + 1) for i in range(d // 2)]
    return [(i, i + d // 2) for i in range(d // 2)]


def complex_rope(x: np.ndarray, positions, base: float, layout: str) -> np.ndarray:
    """Float64 RoPE by complex multiplication, one pair at a time (the reference)."""
    x = np.asarray(x, dtype=np.float64)
    d = x.shape[-1]
    pos = np.broadcast_to(np.asarray(positions, dtype=np.float64), x.shape[:-1])
    out = np.empty_like(x)
    for i, (a, b) in enumerate(_pairs(d, layout)):
        theta = math.pow(base, -2.0 * i / d)
        z = (x[..., a] + 1j * x[..., b]) * np.exp(1j * pos * theta)
        out[..., a], out[..., b] = z.real, z.imag
    return out


def _rng(seed=0):
    return np.random.default_rng(seed)


# ---------------------------------------------------------------- the angles


def test_rotary_angles_by_hand():
    # d = 4: θ_0 = 10000^0 = 1 and θ_1 = 10000^(-1/2) = 0.01.
    expected = np.array([[0.0, 0.0], [1.0, 0.01], [2.0, 0.02], [3.0, 0.03]])
    np.testing.assert_allclose(rotary_angles(4, 4), expected, rtol=1e-15, atol=0)
    # d = 6, base 64: θ = 1, 64^(-1/3) = 1/4, 64^(-2/3) = 1/16.
    np.testing.assert_allclose(rotary_angles(2, 6, base=64.0)[1], [1.0, 0.25, 0.0625])
    assert rotary_angles(0, 8).shape == (0, 4)
    assert rotary_angles(5, 8).dtype == np.float64


# ---------------------------------------------------------------- against the complex form


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(
    ("shape", "base"), [((1, 2), 10000.0), ((7, 8), 10000.0), ((2, 3, 5, 16), 500.0)]
)
def test_numpy_matches_the_complex_form(layout, shape, base):
    x = _rng(1).normal(size=shape)
    got = apply_rotary(x, base=base, layout=layout)
    np.testing.assert_allclose(
        got, complex_rope(x, np.arange(shape[-2]), base, layout), rtol=0, atol=1e-12
    )


@pytest.mark.parametrize("layout", LAYOUTS)
def test_numpy_matches_the_complex_form_at_given_positions(layout):
    x = _rng(2).normal(size=(3, 2, 6, 10))
    positions = np.array([-4, 0, 3, 17, 1000, 123456])
    got = apply_rotary(x, positions, layout=layout)
    np.testing.assert_allclose(got, complex_rope(x, positions, 1e4, layout), atol=1e-9)
    per_sequence = _rng(3).integers(-50, 50, size=(3, 1, 6))  # (batch, 1, n) for (batch, h, n, d)
    got = apply_rotary(x, per_sequence, layout=layout)
    np.testing.assert_allclose(got, complex_rope(x, per_sequence, 1e4, layout), atol=1e-10)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", [(1, 2), (7, 8), (2, 3, 5, 16)])
def test_torch_matches_the_complex_form(layout, shape):
    x = _rng(4).normal(size=shape)
    got = ann.apply_rotary(torch.from_numpy(x), layout=layout).numpy()
    np.testing.assert_allclose(
        got, complex_rope(x, np.arange(shape[-2]), 1e4, layout), rtol=0, atol=1e-12
    )
    positions = _rng(5).integers(-1000, 1000, size=shape[-2])
    got = ann.apply_rotary(torch.from_numpy(x), torch.from_numpy(positions), 77.0, layout)
    np.testing.assert_allclose(got.numpy(), complex_rope(x, positions, 77.0, layout), atol=1e-10)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_module_matches_the_complex_form(layout):
    q, k = _rng(6).normal(size=(2, 2, 3, 9, 8))
    rope = ann.RotaryEmbedding(8, base=100.0, layout=layout)
    q2, k2 = rope(torch.from_numpy(q), torch.from_numpy(k))
    np.testing.assert_allclose(q2.numpy(), complex_rope(q, np.arange(9), 100.0, layout), atol=1e-12)
    np.testing.assert_allclose(k2.numpy(), complex_rope(k, np.arange(9), 100.0, layout), atol=1e-12)
    offsets = torch.tensor([[[5]], [[-2]]]) + torch.arange(9)  # (batch, 1, n)
    q3, k3 = rope(torch.from_numpy(q), torch.from_numpy(k), offsets)
    np.testing.assert_allclose(
        q3.numpy(), complex_rope(q, offsets.numpy(), 100.0, layout), atol=1e-12
    )
    np.testing.assert_allclose(
        k3.numpy(), complex_rope(k, offsets.numpy(), 100.0, layout), atol=1e-12
    )


def test_two_dimensional_example_by_hand():
    # d = 2 has one pair and θ_0 = 1: position p turns (1, 0) by p radians, (0, 1) too.
    x = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    expected = np.array([[1.0, 0.0], [math.cos(1), math.sin(1)], [-math.sin(2), math.cos(2)]])
    np.testing.assert_allclose(apply_rotary(x), expected, atol=1e-15)
    np.testing.assert_allclose(ann.apply_rotary(torch.tensor(x)).numpy(), expected, atol=1e-15)


def test_position_zero_is_the_identity():
    x = _rng(7).normal(size=(4, 6))
    zeros = np.zeros(4, dtype=np.int64)
    for layout in LAYOUTS:
        np.testing.assert_array_equal(apply_rotary(x, zeros, layout=layout), x)
        torch.testing.assert_close(
            ann.apply_rotary(torch.tensor(x), torch.tensor(zeros), layout=layout),
            torch.tensor(x),
            rtol=0,
            atol=0,
        )


# ---------------------------------------------------------------- the relative property


@pytest.mark.parametrize("layout", LAYOUTS)
def test_scores_depend_only_on_the_offset_numpy(layout):
    rng = _rng(8)
    d = 16
    for _ in range(20):
        q, k = rng.normal(size=(2, 1, d))
        i, j, shift = (int(v) for v in rng.integers(-500, 500, size=3))
        score = (apply_rotary(q, [i], layout=layout) @ apply_rotary(k, [j], layout=layout).T)[0, 0]
        shifted = (
            apply_rotary(q, [i + shift], layout=layout)
            @ apply_rotary(k, [j + shift], layout=layout).T
        )[0, 0]
        relative = (q @ apply_rotary(k, [j - i], layout=layout).T)[0, 0]  # query at 0
        assert score == pytest.approx(shifted, abs=1e-9)
        assert score == pytest.approx(relative, abs=1e-9)
        # and it does change with the offset (the property is not vacuous)
        other = (q @ apply_rotary(k, [j - i + 1], layout=layout).T)[0, 0]
        assert abs(other - score) > 1e-6


@pytest.mark.parametrize("layout", LAYOUTS)
def test_scores_depend_only_on_the_offset_torch(layout):
    gen = torch.Generator().manual_seed(9)
    n, d = 12, 8
    q = torch.randn(1, d, generator=gen, dtype=torch.float64).expand(n, d)  # one q at every p
    k = torch.randn(1, d, generator=gen, dtype=torch.float64).expand(n, d)
    rope = ann.RotaryEmbedding(d, layout=layout)
    for offset in (0, 7, -30, 10**6):
        qr, kr = rope(q, k, torch.arange(n) + offset)
        scores = qr @ kr.T  # scores[i, j] must depend on j - i only: a Toeplitz matrix
        for delta in range(-n + 1, n):
            diagonal = torch.diagonal(scores, offset=delta)
            torch.testing.assert_close(
                diagonal, diagonal[:1].expand_as(diagonal), atol=1e-9, rtol=0
            )
        if offset == 0:
            first = scores
        else:
            torch.testing.assert_close(scores, first, atol=1e-7, rtol=0)
    assert not torch.allclose(first, first.T)  # content and offset interact: not symmetric


def test_norms_are_preserved():
    x = _rng(10).normal(size=(3, 11, 12))
    positions = _rng(11).integers(-(10**5), 10**5, size=11)
    for layout in LAYOUTS:
        out = apply_rotary(x, positions, layout=layout)
        np.testing.assert_allclose(np.linalg.norm(out, axis=-1), np.linalg.norm(x, axis=-1))
        # and every pair keeps its own length
        for a, b in _pairs(12, layout):
            np.testing.assert_allclose(
                np.hypot(out[..., a], out[..., b]), np.hypot(x[..., a], x[..., b])
            )
        t = ann.apply_rotary(torch.tensor(x), torch.tensor(positions), layout=layout)
        np.testing.assert_allclose(t.norm(dim=-1).numpy(), np.linalg.norm(x, axis=-1))


# ---------------------------------------------------------------- numpy == torch, layouts


@pytest.mark.parametrize("layout", LAYOUTS)
def test_numpy_equals_torch(layout):
    x = _rng(12).normal(size=(2, 4, 7, 6))
    positions = np.array([3, 1, 4, 1, 5, 9, 2])
    a = apply_rotary(x, positions, base=1000.0, layout=layout)
    b = ann.apply_rotary(torch.from_numpy(x), torch.from_numpy(positions), 1000.0, layout)
    np.testing.assert_allclose(a, b.numpy(), rtol=0, atol=1e-14)
    a32 = apply_rotary(x.astype(np.float32), positions, layout=layout)
    b32 = ann.apply_rotary(
        torch.from_numpy(x.astype(np.float32)), positions.tolist(), layout=layout
    )
    assert a32.dtype == np.float32 and b32.dtype == torch.float32
    np.testing.assert_allclose(a32, b32.numpy(), atol=1e-5)


def test_a_permutation_maps_one_layout_to_the_other():
    d = 10
    perm = np.concatenate([np.arange(0, d, 2), np.arange(1, d, 2)])  # evens, then odds
    x = _rng(13).normal(size=(5, 8, d))
    interleaved = apply_rotary(x, layout="interleaved")
    half = apply_rotary(x[..., perm], layout="half")
    np.testing.assert_allclose(half, interleaved[..., perm], atol=1e-14)
    inverse = np.argsort(perm)
    np.testing.assert_allclose(half[..., inverse], interleaved, atol=1e-14)
    assert not np.allclose(apply_rotary(x, layout="half"), interleaved)  # they do differ
    t = torch.from_numpy(x)
    torch.testing.assert_close(
        ann.apply_rotary(t[..., perm], layout="half"), ann.apply_rotary(t)[..., perm]
    )


# ---------------------------------------------------------------- dtypes, devices, gradients


def test_numpy_keeps_the_float_dtype():
    x = _rng(14).normal(size=(4, 8))
    for dtype in (np.float16, np.float32, np.float64):
        out = apply_rotary(x.astype(dtype))
        assert out.dtype == dtype
        np.testing.assert_allclose(
            out,
            complex_rope(x.astype(dtype), np.arange(4), 1e4, "interleaved"),
            atol=float(np.finfo(dtype).eps) * 8,
        )
    assert apply_rotary(np.ones((2, 2), dtype=np.int32)).dtype == np.float64


def test_torch_keeps_dtype_and_gradients_flow():
    x = torch.randn(2, 3, 5, 8, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: ann.apply_rotary(t, layout="half"), (x,))
    assert torch.autograd.gradcheck(lambda t: ann.apply_rotary(t), (x,))
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        out = ann.apply_rotary(x.detach().to(dtype))
        assert out.dtype == dtype
        ref = complex_rope(x.detach().numpy(), np.arange(5), 1e4, "interleaved")
        np.testing.assert_allclose(out.double().numpy(), ref, atol=0.05)


def test_views_with_odd_strides_and_offsets_are_rotated_right():
    # The interleaved float path multiplies complex views of x; a view whose offset or strides
    # are odd (a slice of a wider tensor, a permuted projection) cannot be viewed as complex.
    wide = torch.from_numpy(_rng(8).normal(size=(2, 3, 5, 17)))
    for x in (wide[..., 1:], wide[..., :16].transpose(1, 2), wide[:, :, ::2, 1:]):
        for dtype in (torch.float64, torch.float32):
            got = ann.apply_rotary(x.to(dtype)).double().numpy()
            ref = complex_rope(x.numpy(), np.arange(x.shape[-2]), 1e4, "interleaved")
            np.testing.assert_allclose(got, ref, atol=1e-12 if dtype == torch.float64 else 1e-5)
    qkv = torch.from_numpy(_rng(9).normal(size=(2, 7, 3, 4, 8))).requires_grad_(True)
    q, k, _ = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # (b, h, n, d_k) views, as in chapter 11
    assert torch.autograd.gradcheck(lambda t: ann.apply_rotary(t.permute(2, 0, 3, 1, 4)[1]),
                                    (qkv,))
    q2, k2 = ann.RotaryEmbedding(8)(q, k)
    np.testing.assert_allclose(q2.detach().numpy(),
                               complex_rope(q.detach().numpy(), np.arange(7), 1e4, "interleaved"),
                               atol=1e-12)


def test_module_cache_state_and_inference_mode():
    rope = ann.RotaryEmbedding(8)
    assert list(rope.parameters()) == [] and rope.state_dict() == {}
    assert "d=8" in repr(rope) and "interleaved" in repr(rope)
    q = torch.randn(1, 2, 6, 8)
    with torch.inference_mode():
        rope(q, q)  # fills the cache with inference tensors
    q = q.clone().requires_grad_(True)
    q2, k2 = rope(q, q)  # must not reuse inference tensors in autograd
    (q2 * k2).sum().backward()
    assert q.grad is not None
    short, _ = rope(q[:, :, :3], q[:, :, :3])  # another length: recomputed, not sliced wrongly
    torch.testing.assert_close(short, ann.apply_rotary(q[:, :, :3]))
    half, _ = rope(q.half(), q.half())
    assert half.dtype == torch.float16


def test_the_names_are_exported():
    assert attnlab.apply_rotary is attnlab.positions.apply_rotary
    assert attnlab.rotary_angles is attnlab.positions.rotary_angles
    assert {"apply_rotary", "rotary_angles"} <= set(attnlab.__all__) & set(
        attnlab.positions.__all__
    )
    assert {"apply_rotary", "RotaryEmbedding"} <= set(ann.__all__)


# ---------------------------------------------------------------- bad input


BAD_X = [
    (np.ones((3, 5)), ValueError, r"x must have an even last axis d >= 2.*\(3, 5\)"),
    (np.ones((3, 0)), ValueError, r"x must have an even last axis"),
    (np.ones(4), ValueError, r"x must have shape \(\.\.\., n, d\), got shape \(4,\)"),
]


@pytest.mark.parametrize(("x", "error", "match"), BAD_X)
def test_bad_x_numpy_and_torch(x, error, match):
    with pytest.raises(error, match=match):
        apply_rotary(x)
    with pytest.raises(error, match=match):
        ann.apply_rotary(torch.from_numpy(x))


def test_bad_x_types_and_values():
    with pytest.raises(TypeError, match="x must be a numpy array, got a torch.Tensor"):
        apply_rotary(torch.ones(2, 2))
    with pytest.raises(TypeError, match="x must be a torch.Tensor.*torch.from_numpy"):
        ann.apply_rotary(np.ones((2, 2)))
    with pytest.raises(ValueError, match="x must hold real numbers"):
        apply_rotary(np.ones((2, 2), dtype=complex))
    with pytest.raises(ValueError, match="x must be a floating-point tensor"):
        ann.apply_rotary(torch.ones(2, 2, dtype=torch.long))
    nan = np.array([[np.nan, 0.0]])
    with pytest.raises(ValueError, match="x contains NaN or infinite values"):
        apply_rotary(nan)
    with ann.check_values(), pytest.raises(ValueError, match="x contains NaN or infinite"):
        ann.apply_rotary(torch.from_numpy(nan))


BAD_POSITIONS = [
    (np.array([0.0, 1.0, 2.0]), TypeError, r"positions must hold integers.*float64"),
    ([0.5, 1, 2], TypeError, r"positions must hold integers"),
    (np.array([True, False, True]), TypeError, r"positions must hold integers.*bool"),
    ([0, 1], ValueError, r"positions must have shape \(n,\) or broadcastable to \(2, 3\).*\(2,\)"),
    (np.zeros((3, 3), dtype=int), ValueError, r"positions must have shape .*got shape \(3, 3\)"),
    (np.zeros((4, 1, 3), dtype=int), ValueError, r"positions must have shape .*\(4, 1, 3\)"),
    (5, ValueError, r"positions must have shape .*got shape \(\)"),
]


@pytest.mark.parametrize(("positions", "error", "match"), BAD_POSITIONS)
def test_bad_positions_numpy_and_torch(positions, error, match):
    x = np.ones((2, 3, 4))
    with pytest.raises(error, match=match):
        apply_rotary(x, positions)
    tpos = torch.as_tensor(positions) if isinstance(positions, np.ndarray) else positions
    with pytest.raises(error, match=match):
        ann.apply_rotary(torch.from_numpy(x), tpos)
    with pytest.raises(error, match=match):
        ann.RotaryEmbedding(4)(torch.from_numpy(x), torch.from_numpy(x), tpos)


def test_numpy_refuses_tensor_positions():
    with pytest.raises(TypeError, match="positions must be a numpy array.*torch.Tensor"):
        apply_rotary(np.ones((3, 2)), torch.arange(3))


BAD_BASES = [
    (0.0, ValueError, "base must be a positive finite number, got 0.0"),
    (-10.0, ValueError, "base must be a positive finite number"),
    (float("inf"), ValueError, "base must be a positive finite number"),
    (float("nan"), ValueError, "base must be a positive finite number"),
    (True, TypeError, "base must be a positive finite number, got True of type bool"),
    ("10000", TypeError, "base must be a positive finite number, got '10000' of type str"),
]


@pytest.mark.parametrize(("base", "error", "match"), BAD_BASES)
def test_bad_base_everywhere(base, error, match):
    with pytest.raises(error, match=match):
        apply_rotary(np.ones((2, 4)), base=base)
    with pytest.raises(error, match=match):
        rotary_angles(2, 4, base=base)
    with pytest.raises(error, match=match):
        ann.apply_rotary(torch.ones(2, 4), base=base)
    with pytest.raises(error, match=match):
        ann.RotaryEmbedding(4, base=base)


@pytest.mark.parametrize(
    ("layout", "error", "match"),
    [
        (
            "neox",
            ValueError,
            r"layout must be 'interleaved' \(pairs \(2i, 2i\+1\)\) or 'half'.*'neox'",
        ),
        ("Half", ValueError, r"layout must be .*got 'Half'"),
        (None, TypeError, r"layout must be 'interleaved' or 'half', got None of type NoneType"),
        (1, TypeError, r"layout must be .*of type int"),
    ],
)
def test_bad_layout_everywhere(layout, error, match):
    with pytest.raises(error, match=match):
        apply_rotary(np.ones((2, 4)), layout=layout)
    with pytest.raises(error, match=match):
        ann.apply_rotary(torch.ones(2, 4), layout=layout)
    with pytest.raises(error, match=match):
        ann.RotaryEmbedding(4, layout=layout)


@pytest.mark.parametrize(
    ("n", "d", "error", "match"),
    [
        (-1, 4, ValueError, r"n must be an integer >= 0, got -1"),
        (2.0, 4, TypeError, r"n must be an integer >= 0, got 2.0 of type float"),
        (True, 4, TypeError, r"n must be an integer >= 0, got True"),
        (3, 5, ValueError, r"d must be even for rotary positions.*d=5"),
        (3, 0, ValueError, r"d must be an integer >= 2, got 0"),
        (3, 4.0, TypeError, r"d must be an integer >= 2, got 4.0 of type float"),
        (3, False, TypeError, r"d must be an integer >= 2, got False"),
    ],
)
def test_bad_sizes_for_angles_and_the_module(n, d, error, match):
    with pytest.raises(error, match=match):
        rotary_angles(n, d)
    if not match.startswith("n "):
        with pytest.raises(error, match=match):
            ann.RotaryEmbedding(d)


def test_module_refuses_mismatched_q_and_k():
    rope = ann.RotaryEmbedding(8)
    q = torch.randn(2, 4, 5, 8)
    with pytest.raises(ValueError, match=r"k must end in d_k = 8 .*\(2, 4, 5, 6\)"):
        rope(q, torch.randn(2, 4, 5, 6))
    with pytest.raises(ValueError, match=r"q must end in d_k = 8 .*\(2, 4, 5, 4\)"):
        rope(torch.randn(2, 4, 5, 4), q)
    with pytest.raises(ValueError, match=r"q and k must have the same length n.*apply_rotary"):
        rope(q, torch.randn(2, 4, 7, 8))
    with pytest.raises(ValueError, match=r"k is torch.float64 on cpu but must match torch.float32"):
        rope(q, q.double())
    with pytest.raises(TypeError, match=r"k must be a torch.Tensor"):
        rope(q, q.numpy())
    with pytest.raises(ValueError, match=r"q must have shape \(batch, heads, n, d_k\)"):
        rope(torch.randn(8), torch.randn(8))
