"""Chapter 07's checks pass honest answers and fail the partly right ones on every draw."""

from __future__ import annotations

import numpy as np
import pytest
from _partly_right import first_failure, seeds_passed, verdict

import attnlab


def bahdanau_scores(q, k, w, u, v_a):
    return np.array([[v_a @ np.tanh(w @ q[:, j] + u @ k[:, i]) for j in range(q.shape[1])]
                     for i in range(k.shape[1])])


def test_07_1_passes_and_refuses_the_library():
    assert verdict("07.1", bahdanau_scores)[0]
    ok, message = verdict("07.1", lambda q, k, w, u, v_a: attnlab.luong_scores(
        q, k, "concat", w=np.hstack([w, u]), v_a=v_a))
    assert not ok and "luong_scores" in message
    no_tanh = lambda q, k, w, u, v_a: np.einsum(  # noqa: E731
        "a,amn->mn", v_a, (u @ k)[:, :, None] + (w @ q)[:, None, :])
    assert seeds_passed("07.1", no_tanh, range(100)) == []
    assert "tanh" in first_failure("07.1", no_tanh, 0)
    transposed = lambda *args: bahdanau_scores(*args).T  # noqa: E731
    assert seeds_passed("07.1", transposed, range(100)) == []


def test_07_2_fails_one_maximum_for_the_whole_matrix():
    def stable(q, w_loc):
        z = w_loc @ q
        e = np.exp(z - z.max(axis=0, keepdims=True))
        return e / e.sum(axis=0, keepdims=True)

    def global_max(q, w_loc):
        z = w_loc @ q
        e = np.exp(z - z.max())
        return e / e.sum(axis=0, keepdims=True)

    assert verdict("07.2", stable)[0]
    with np.errstate(invalid="ignore", over="ignore"):
        assert seeds_passed("07.2", global_max, range(50)) == []
        assert "whole matrix" in first_failure("07.2", global_max, 0)
        naive = lambda q, w: np.exp(w @ q) / np.exp(w @ q).sum(0)  # noqa: E731
        assert seeds_passed("07.2", naive, range(50)) == []


def concat_scores(queries, keys, weight, v_a):
    d_q = queries.shape[1]
    hidden = np.tanh((queries @ weight[:, :d_q].T)[:, None, :]
                     + (keys @ weight[:, d_q:].T)[None, :, :])  # (n, m, d_a)
    return hidden @ v_a


@pytest.mark.parametrize(
    "answer, named",
    [
        (lambda q, k, w, v: concat_scores(q, k, w, v).T, "row convention"),
        (lambda q, k, w, v: concat_scores(q, k, np.hstack([w[:, q.shape[1]:], w[:, :q.shape[1]]]),
                                          v), "[k; q]"),
        (lambda q, k, w, v: np.arctanh(np.clip(concat_scores(q, k, w, v), -0.99, 0.99)), None),
    ],
)
def test_07_4_fails_the_usual_mistakes(answer, named):
    assert verdict("07.4", concat_scores)[0]
    assert seeds_passed("07.4", answer, range(100)) == []
    if named:
        assert named in first_failure("07.4", answer, 0)


def test_07_4_refuses_the_library_and_agrees_with_it():
    ok, message = verdict("07.4", lambda q, k, w, v: attnlab.luong_scores(
        q.T, k.T, "concat", w=w, v_a=v).T)
    assert not ok and "luong_scores" in message
    from attnlab.course.spec import get_spec

    for case in get_spec("07.4").cases(np.random.default_rng(3)):
        q, k, w, v = case.args
        assert np.allclose(case.expected, attnlab.luong_scores(q.T, k.T, "concat", w=w, v_a=v).T)
