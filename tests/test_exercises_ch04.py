"""Chapter 04's checks: honest answers pass; the library's softmax, automatic differentiation
and partly right answers (a shift by the maximum of all logits, masked ones included; a
gradient without the scale, or with one term of the softmax Jacobian) fail on every draw."""

from __future__ import annotations

import numpy as np
from _partly_right import always_fails as _always_fails
from _partly_right import verdict as _verdict

from attnlab.course.spec import get_spec
from attnlab.exercises import exercise_ids


# ---- 04.3 ------------------------------------------------------------------------------------
def masked_softmax(logits, mask, *, shift="allowed"):
    source = np.where(mask, logits, -np.inf) if shift == "allowed" else logits
    top = source.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    e = np.where(mask, np.exp(np.where(mask, logits - top, 0.0)), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def test_04_3_an_honest_answer_passes():
    assert _verdict("04.3", masked_softmax)[0]


def test_04_3_the_library_softmax_is_unavailable():
    from attnlab import softmax

    # -inf fill plus attnlab.softmax (zeros for an all -inf row) passed 200 of 200 draws before
    _always_fails("04.3", lambda z, m: softmax(np.where(m, z, -np.inf)), "attnlab.softmax")


def test_04_3_a_shift_by_the_maximum_of_all_logits_fails():
    # passed 7 of 200 draws before the fixed case with a large masked logit
    with np.errstate(under="ignore"):
        _always_fails("04.3", lambda z, m: masked_softmax(z, m, shift="all"), "*allowed*")


# ---- 04.4 ------------------------------------------------------------------------------------
def key_value_gradients(q, k, v, u, c, *, scale=True, second_term=True, transpose_v=False):
    z = c * q @ k.T
    p = np.exp(z - z.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    g = u @ v.T
    dz = p * g - (p * (p * g).sum(-1, keepdims=True) if second_term else 0.0)
    grad_k = (c if scale else 1.0) * dz.T @ q
    return grad_k, (u.T @ p if transpose_v else p.T @ u)


def test_04_4_an_honest_answer_passes():
    assert _verdict("04.4", key_value_gradients)[0]


def test_04_4_autograd_is_unavailable():
    import torch

    def autograd(q, k, v, u, c):
        kt = torch.tensor(k, requires_grad=True)
        vt = torch.tensor(v, requires_grad=True)
        loss = (torch.softmax(c * torch.tensor(q) @ kt.T, -1) @ vt * torch.tensor(u)).sum()
        loss.backward()
        return kt.grad.numpy(), vt.grad.numpy()

    _always_fails("04.4", autograd, "torch.Tensor.backward")


def test_04_4_partly_right_answers_fail_with_the_mistake_named():
    _always_fails("04.4", lambda *a: key_value_gradients(*a, scale=False), "scale c is missing")
    _always_fails("04.4", lambda *a: key_value_gradients(*a, second_term=False), "two terms")
    _always_fails("04.4", lambda *a: key_value_gradients(*a, transpose_v=True), "transposed")
    _always_fails("04.4", lambda *a: key_value_gradients(*a)[::-1])


# ---- the grader ------------------------------------------------------------------------------
def test_every_case_of_chapters_01_to_05_can_be_stored_for_the_grader(tmp_path):
    # The grader hands the inputs to the sandbox as plain data (no pickle): a numpy scalar
    # among the arguments (c = 1 / np.sqrt(d_k) in 04.4 did) cannot be stored.
    from attnlab.course.adapters import load_plain, save_plain

    ids = [i for i in exercise_ids() if i < "06" and get_spec(i) is not None]
    assert {"02.4", "03.5", "04.4", "05.4"} <= set(ids)
    for exercise_id in ids:
        cases = list(get_spec(exercise_id).cases(np.random.default_rng(0)))
        save_plain(tmp_path / "inputs.npz", [case.args for case in cases])
        assert len(load_plain(tmp_path / "inputs.npz")) == len(cases), exercise_id
