"""Chapter 02's checks: honest answers pass; the library's softmax and partly right answers
(scores clipped to a safe range, a shift by the mean, a sum without keepdims, a naive exp)
fail, whatever the random draw."""

from __future__ import annotations

import numpy as np
from _partly_right import always_fails as _always_fails
from _partly_right import verdict as _verdict


def _stable(x):
    x = np.asarray(x, dtype=float)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


# ---- 02.1 ------------------------------------------------------------------------------------
def soft_lookup(query, keys, values, temperature):
    return _stable(keys @ query / temperature) @ values


def test_02_1_an_honest_answer_passes():
    assert _verdict("02.1", soft_lookup)[0]


def test_02_1_clipped_scores_fail():
    def clipped(query, keys, values, temperature):  # "keeps exp finite", and loses near ties
        e = np.exp(np.clip(keys @ query / temperature, -50, 50))
        return e / e.sum() @ values

    _always_fails("02.1", clipped, "scores 100 and 99")


# ---- 02.2 ------------------------------------------------------------------------------------
def test_02_2_an_honest_answer_passes():
    assert _verdict("02.2", _stable)[0]


def test_02_2_the_library_softmax_is_unavailable():
    from attnlab import softmax

    _always_fails("02.2", softmax, "`attnlab.softmax`")

    def through_torch(x):
        import torch

        return torch.from_numpy(np.asarray(x, dtype=float)).softmax(-1).numpy()

    _always_fails("02.2", through_torch, "`torch.Tensor.softmax`")

    def log_sum_exp(x):
        import torch

        t = torch.from_numpy(np.asarray(x, dtype=float))
        return torch.exp(t - torch.logsumexp(t, dim=-1, keepdim=True)).numpy()

    _always_fails("02.2", log_sum_exp, "torch.logsumexp")


def test_02_2_a_shift_by_the_mean_or_the_minimum_fails():
    with np.errstate(over="ignore", invalid="ignore"):
        for shift in (np.mean, np.min):
            def shifted(x, shift=shift):
                e = np.exp(x - shift(x, axis=-1, keepdims=True))
                return e / e.sum(axis=-1, keepdims=True)

            _always_fails("02.2", shifted, "not its mean or its minimum")


def test_02_2_a_sum_without_keepdims_fails_on_a_square():
    def no_keepdims(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1)  # right for one row; wrong (or an error) for more

    _always_fails("02.2", no_keepdims)


# ---- 02.4 ------------------------------------------------------------------------------------
def softmax_jacobian(z):
    p = _stable(z)
    return np.diag(p) - np.outer(p, p)


def test_02_4_an_honest_answer_passes():
    assert _verdict("02.4", softmax_jacobian)[0]


def test_02_4_automatic_differentiation_is_unavailable():
    import torch

    def autograd(z):
        return torch.autograd.functional.jacobian(
            lambda t: torch.softmax(t, dim=0), torch.tensor(z, dtype=torch.float64)).numpy()

    _always_fails("02.4", autograd, "unavailable")


def test_02_4_partly_right_answers_fail():
    _always_fails("02.4", lambda z: np.diag(_stable(z)), "is missing")
    _always_fails("02.4", lambda z: -softmax_jacobian(z), "signs are swapped")
    _always_fails("02.4", lambda z: np.diag(_stable(z)) - _stable(z) @ _stable(z), "outer")

    def naive(z):
        e = np.exp(z)
        p = e / e.sum()
        return np.diag(p) - np.outer(p, p)

    with np.errstate(over="ignore", invalid="ignore"):
        _always_fails("02.4", naive, "NaN")


def test_02_1_a_naive_exp_is_named_not_shown_as_nan():
    def naive(query, keys, values, temperature):
        e = np.exp(keys @ query / temperature)
        return e / e.sum() @ values

    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        _always_fails("02.1", naive, "subtract the largest score first")
