"""Chapter 07's checks pass honest answers and fail the partly right ones on every draw."""

from __future__ import annotations

import numpy as np
import pytest
from _partly_right import first_failure, seeds_passed, verdict

import attnlab


def bahdanau_scores(q, k, w, u, v_a):
    return np.array([[v_a @ np.tanh(w @ q[:, j] + u @ k[:, i]) for j in range(q.shape[1])]
                     for i in range(k.shape[1])])


def _cases(exercise_id):
    from attnlab.course.spec import get_spec
    from attnlab.exercises import exercise_ids

    exercise_ids()

    return (c.args for c in get_spec(exercise_id).cases(np.random.default_rng(0)))


def _expected(exercise_id):
    from attnlab.course.spec import get_spec
    from attnlab.exercises import exercise_ids

    exercise_ids()

    return (c.expected for c in get_spec(exercise_id).cases(np.random.default_rng(0)))


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


def general_attention(queries, keys, values, weight, lengths):
    logits = queries @ weight @ keys.transpose(0, 2, 1)  # (B, n, m): q · (W_a k)
    padding = np.arange(keys.shape[1])[None, None, :] >= lengths[:, None, None]
    logits = np.where(padding, -np.inf, logits)
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)) @ values


def _softmax_rows(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _masked(logits, lengths):
    padding = np.arange(logits.shape[-1])[None, None, :] >= lengths[:, None, None]
    return np.where(padding, -np.inf, logits)


@pytest.mark.parametrize(
    "answer, named",
    [
        # W_a on the wrong side: right only where d_q != d_k makes it a shape error
        (lambda q, k, v, w, n: _softmax_rows(_masked(q @ w.T @ k.transpose(0, 2, 1), n)) @ v,
         "wrong side"),
        (lambda q, k, v, w, n: _softmax_rows(q @ w @ k.transpose(0, 2, 1)) @ v, "padding"),
        (lambda q, k, v, w, n: (
            _softmax_rows(q @ w @ k.transpose(0, 2, 1))
            * (np.arange(k.shape[1]) < n[:, None])[:, None, :]) @ v, "after the softmax"),
        (lambda q, k, v, w, n: _softmax_rows(
            _masked(q @ w @ k.transpose(0, 2, 1), n) / np.sqrt(k.shape[2])) @ v, "no scale"),
    ],
)
def test_07_4_fails_the_usual_mistakes(answer, named):
    assert verdict("07.4", general_attention)[0]
    with np.errstate(invalid="ignore", divide="ignore"):
        assert seeds_passed("07.4", answer, range(60)) == []
        assert named in first_failure("07.4", answer, 0)


def test_07_4_names_the_softmax_over_the_queries():
    def over_queries(q, k, v, w, n):
        z = _masked(q @ w @ k.transpose(0, 2, 1), n)
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return (e / e.sum(axis=1, keepdims=True)) @ v

    with np.errstate(invalid="ignore"):
        assert seeds_passed("07.4", over_queries, range(60)) == []
        assert "over the queries" in first_failure("07.4", over_queries, 0)


def test_07_4_reference_is_the_torch_layer_and_the_library_is_refused():
    import torch

    from attnlab.course.spec import get_spec
    from attnlab.nn import LuongAttention

    for case in get_spec("07.4").cases(np.random.default_rng(3)):
        q, k, v, w, lengths = case.args
        layer = LuongAttention("general", q.shape[2], k.shape[2]).double()
        with torch.no_grad():
            layer.w.weight.copy_(torch.from_numpy(w))
        mask = torch.from_numpy(np.arange(k.shape[1])[None, :] < lengths[:, None])
        out, _ = layer(*(torch.from_numpy(t) for t in (q, k, v)), mask)
        assert np.allclose(case.expected, out.detach().numpy())

    def by_layer(q, k, v, w, lengths):
        layer = LuongAttention("general", q.shape[2], k.shape[2]).double()
        with torch.no_grad():
            layer.w.weight.copy_(torch.from_numpy(w))
        mask = torch.from_numpy(np.arange(k.shape[1])[None, :] < lengths[:, None])
        return layer(*(torch.from_numpy(t) for t in (q, k, v)), mask)[0].detach().numpy()

    ok, message = verdict("07.4", by_layer)
    assert not ok and "LuongAttention" in message

    def by_sdpa(q, k, v, w, lengths):  # torch's attention with the keys mapped by W_a
        mask = torch.from_numpy(np.arange(k.shape[1])[None, :] < lengths[:, None])[:, None]
        return torch.nn.functional.scaled_dot_product_attention(
            torch.from_numpy(q), torch.from_numpy(k @ w.T), torch.from_numpy(v),
            attn_mask=mask, scale=1.0).numpy()

    ok, message = verdict("07.4", by_sdpa)
    assert not ok and "scaled_dot_product_attention" in message


def test_07_1_refuses_the_private_helper_and_07_2_the_library_softmax():
    from attnlab import luong
    from attnlab.exercises import ch07

    # the reviewer's loophole: the private helper passed 07.1 (and, transposed, the old 07.4)
    private = lambda q, k, w, u, v_a: luong._raw_scores(  # noqa: E731
        "concat", q, k, np.hstack([w, u]), v_a)
    assert np.allclose(private(*next(iter(_cases("07.1")))), next(iter(_expected("07.1"))))
    ok, message = verdict("07.1", private)
    assert not ok and "`attnlab.luong._raw_scores`" in message
    ok, message = verdict("07.2", lambda q, w_loc: attnlab.softmax(w_loc @ q, axis=0))
    assert not ok and "`attnlab.softmax`" in message
    import torch

    ok, message = verdict("07.2", lambda q, w: torch.softmax(torch.from_numpy(w @ q), 0).numpy())
    assert not ok and "softmax" in message
    ok, message = verdict("07.4", ch07.general_rows)  # the check's own reference
    assert not ok and "attnlab.exercises.ch07.general_rows" in message


def test_07_1_accepts_a_loop_over_the_pairs():
    # the exercise no longer claims to refuse a loop: the check cannot see one, and says so
    assert verdict("07.1", bahdanau_scores)[0]
