"""Chapter 02's checks: honest answers pass; the library's softmax and partly right answers
(scores clipped to a safe range, a shift by the mean, a sum without keepdims, a naive exp)
fail, whatever the random draw."""

from __future__ import annotations

import numpy as np
from _partly_right import always_fails as _always_fails
from _partly_right import refused_loophole as _refused
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


# ---- loopholes a fresh reader found (s6-02): the library's answer must fail ----------------
def test_02_1_the_library_softmax_and_attention_are_unavailable():
    import torch
    import torch.nn.functional as F

    from attnlab import scaled_dot_product_attention, softmax

    _refused("02.1", lambda q, k, v, t: softmax(k @ q / t) @ v, "`attnlab.softmax`")
    _refused("02.1", lambda q, k, v, t: scaled_dot_product_attention(
        q[None], k, v, scale=1 / t)[0][0], "unavailable")

    def fused(q, k, v, t):
        q, k, v = (torch.from_numpy(np.asarray(a, dtype=float)) for a in (q, k, v))
        return F.scaled_dot_product_attention(q[None], k, v, scale=1 / t)[0].numpy()

    _refused("02.1", fused, "scaled_dot_product_attention")


def test_02_2_fused_attention_with_identity_keys_is_unavailable():
    import torch
    import torch.nn.functional as F

    def identity_attention(x):  # softmax(x I^T) I = softmax(x)
        t = torch.from_numpy(np.atleast_2d(np.asarray(x, dtype=float)))
        eye = torch.eye(t.shape[-1], dtype=t.dtype)
        return F.scaled_dot_product_attention(t, eye, eye, scale=1.0).reshape(np.shape(x)).numpy()

    _refused("02.2", identity_attention, "scaled_dot_product_attention")


def test_02_4_forward_mode_differentiation_is_unavailable():
    import torch
    import torch.autograd.forward_ad as fwad

    def columns_by_jvp(z):
        t = torch.tensor(z, dtype=torch.float64)
        f = lambda u: torch.exp(u - u.max()) / torch.exp(u - u.max()).sum()  # noqa: E731
        cols = [torch.func.jvp(f, (t,), (torch.eye(len(z), dtype=t.dtype)[k],))[1]
                for k in range(len(z))]
        return torch.stack(cols, dim=1).numpy()

    _refused("02.4", columns_by_jvp, "torch.func.jvp")

    def dual_numbers(z):
        t = torch.tensor(z, dtype=torch.float64)
        cols = []
        with fwad.dual_level():
            for k in range(len(z)):
                u = fwad.make_dual(t, torch.eye(len(z), dtype=t.dtype)[k])
                p = torch.exp(u - t.max()) / torch.exp(u - t.max()).sum()
                cols.append(fwad.unpack_dual(p).tangent)
        return torch.stack(cols, dim=1).numpy()

    _refused("02.4", dual_numbers, "unavailable")

    def hessian_trick(z):  # the Jacobian of p is the Hessian of the log-sum-exp
        t = torch.tensor(z, dtype=torch.float64)
        return torch.autograd.functional.hessian(
            lambda u: u.max() + torch.log(torch.exp(u - u.max()).sum()), t).numpy()

    _refused("02.4", hessian_trick, "unavailable")
