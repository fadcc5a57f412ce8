"""Chapter 09's checks pass honest answers and fail the partly right ones on every draw."""

from __future__ import annotations

import numpy as np
import pytest
from _partly_right import first_failure, seeds_passed, verdict

import attnlab
from attnlab.positions import sinusoidal_positions


def _omega(d):
    return 10000.0 ** (-np.arange(0, d, 2) / d)


def _blocks(theta):
    d = 2 * len(theta)
    m = np.zeros((d, d))
    for i, t in enumerate(theta):  # one loop per pair: written from the addition formulas
        m[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = [[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]]
    return m


def shift_matrix(k, d):
    return _blocks(k * _omega(d))


def test_09_1_passes_the_addition_formulas():
    assert verdict("09.1", shift_matrix)[0]


def test_09_1_fails_an_answer_right_only_for_k_at_least_0():
    only_forward = lambda k, d: _blocks(abs(k) * _omega(d))  # noqa: E731
    assert seeds_passed("09.1", only_forward, range(3000)) == []
    assert "|Δ|" in first_failure("09.1", only_forward, 0)


def test_09_1_fails_wrong_frequencies_and_the_library():
    bad_omega = lambda k, d: _blocks(k * 10000.0 ** (-np.arange(d // 2) / d))  # noqa: E731
    assert seeds_passed("09.1", bad_omega, range(50)) == []
    ok, message = verdict("09.1", attnlab.sinusoidal_shift_matrix)
    assert not ok and "sinusoidal_shift_matrix" in message
    fitted = lambda k, d: np.linalg.lstsq(  # noqa: E731 - the chapter's least-squares fit
        sinusoidal_positions(300, d)[:200], sinusoidal_positions(300, d)[k + 50 : 250 + k],
        rcond=None)[0]
    ok, message = verdict("09.1", fitted)
    assert not ok and "sinusoidal_positions" in message


def _shaw(q, k, a_k, clip=None):
    s, d_k = q.shape
    k_max = a_k.shape[0] // 2
    out = np.empty((s, s))
    for i in range(s):
        for j in range(s):
            row = j - i if clip is False else min(max(j - i, -k_max), k_max)
            out[i, j] = q[i] @ (k[j] + a_k[row + k_max]) / np.sqrt(d_k)
    return out


def test_09_2():
    assert verdict("09.2", _shaw)[0]
    unclipped = lambda q, k, a: _shaw(q, k, a, clip=False)  # noqa: E731
    assert seeds_passed("09.2", unclipped, range(200)) == []
    ok, message = verdict("09.2", lambda q, k, a: attnlab.shaw_attention(
        q, k, k, a, np.zeros_like(a))[1])
    assert not ok and "shaw_attention" in message


def _quadratic(s, offset, alpha, half=None):
    half = s // 2 if half is None else half
    out = np.empty((s, s))
    for i in range(s):
        for j in range(s):
            o = (j - i + half) % s - half
            out[i, j] = -alpha * (o - offset) ** 2
    return out


def test_09_3_fails_the_wrong_range_for_even_s_on_every_draw():
    assert verdict("09.3", _quadratic)[0]
    odd_range = lambda s, offset, alpha: _quadratic(s, offset, alpha, (s - 1) // 2)  # noqa: E731
    assert seeds_passed("09.3", odd_range, range(2000)) == []
    assert "even s" in first_failure("09.3", odd_range, 0)
    plain = lambda s, offset, alpha: -alpha * (  # noqa: E731
        np.arange(s)[None, :] - np.arange(s)[:, None] - offset) ** 2.0
    assert "circular offset" in first_failure("09.3", plain, 0)
    ok, message = verdict("09.3", lambda s, offset, alpha: -alpha * (
        attnlab.positions.circular_offsets(s) - offset) ** 2.0)
    assert not ok and "circular_offsets" in message


def previous_token_head(d, beta):
    return beta * shift_matrix(-1, d), np.eye(d)


@pytest.mark.parametrize(
    "answer, named",
    [
        (lambda d, beta: (beta * shift_matrix(1, d), np.eye(d)), "next token"),
        (lambda d, beta: (shift_matrix(-1, d), np.eye(d)), "factor λ"),
        (lambda d, beta: (beta * shift_matrix(-1, d), beta * np.eye(d)), "twice"),
        (lambda d, beta: (beta * np.eye(d), np.eye(d)), "itself"),
    ],
)
def test_09_6_names_the_usual_mistakes(answer, named):
    assert verdict("09.6", previous_token_head)[0]
    assert seeds_passed("09.6", answer, range(20)) == []
    assert named in first_failure("09.6", answer, 0)


def test_09_6_the_head_attends_to_the_previous_token():
    w_q, w_k = previous_token_head(16, 10.0)
    pe = sinusoidal_positions(64, 16)
    weights = attnlab.softmax((pe @ w_q) @ (pe @ w_k).T)
    assert (weights[1:].argmax(axis=1) == np.arange(63)).all()
    ok, message = verdict("09.6", lambda d, beta: (
        beta * attnlab.sinusoidal_shift_matrix(-1, d), np.eye(d)))
    assert not ok and "sinusoidal_shift_matrix" in message


def _rotary_shift(offset: int, d: int) -> np.ndarray:
    """M_Δ from the library's torch RoPE, the identity rotated by −Δ (a loophole, no answer)."""
    import torch

    from attnlab.nn.rotary import apply_rotary

    eye = torch.eye(d, dtype=torch.float64)
    return apply_rotary(eye, torch.full((d,), -offset)).numpy()


def test_09_1_and_09_6_refuse_the_torch_rope_of_the_library():
    # both passed before attnlab.nn.rotary.apply_rotary was forbidden (a fresh reader's find)
    ok, message = verdict("09.1", _rotary_shift)
    assert not ok and "apply_rotary" in message
    ok, message = verdict("09.6", lambda d, scale: (scale * _rotary_shift(-1, d), np.eye(d)))
    assert not ok and "apply_rotary" in message


def test_09_1_names_both_causes_of_a_shift_by_minus_delta():
    transposed = lambda offset, d: shift_matrix(offset, d).T  # noqa: E731  each block transposed
    message = first_failure("09.1", transposed, 0)
    assert "|Δ|" in message and "transpose" in message
