"""Checks for the exercises of chapter 02 (dot-product attention)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from attnlab.course.spec import Case, ExerciseFailure, as_array, close, exercise, matches
from attnlab.softmax import softmax

_NAN_LOOKUP = (
    "gave NaN or inf: a small temperature makes the scores large (or very negative), and "
    "np.exp overflows (or every weight underflows to 0); subtract the largest score first"
)


#: What hands over a softmax (or its stable core, the log-sum-exp) in attnlab and torch.
SOFTMAX_FORBID = (
    "attnlab.softmax",
    "attnlab.nn.masked_softmax",
    "torch.softmax",
    "torch.Tensor.softmax",
    "torch.nn.functional.softmax",
    "torch.special.softmax",
    "torch.log_softmax",
    "torch.Tensor.log_softmax",
    "torch.nn.functional.log_softmax",
    "torch.special.log_softmax",
    "torch.logsumexp",
    "torch.ops.aten.softmax",
    "torch.ops.aten._softmax",
    "torch.ops.aten._safe_softmax",
    "torch.ops.aten._masked_softmax",
    "torch.ops.aten.log_softmax",
    "torch.ops.aten._log_softmax",
    "torch.ops.aten.logsumexp",
    "torch.ops.aten.special_softmax",
    "torch.Tensor.logsumexp",
    "torch.special.logsumexp",
    "scipy.special.softmax",  # skipped where scipy is not installed (course.forbid)
    "scipy.special.log_softmax",
    "scipy.special.logsumexp",
)

#: What hands over attention itself: softmax(q k^T * scale) v, with the softmax inside (an
#: identity key and value matrix turns it into a bare softmax). torch's fused function calls
#: its softmax in C++, where the watcher does not see it, so it is named with its operators.
SDPA_FORBID = (
    "attnlab.scaled_dot_product_attention",
    "attnlab.nn.scaled_dot_product_attention",
    "torch.nn.functional.scaled_dot_product_attention",
    "torch.nn.functional.multi_head_attention_forward",
    "torch.nn.MultiheadAttention",
    "torch.ops.aten.scaled_dot_product_attention",
    "torch.ops.aten._scaled_dot_product_attention_math",
    "torch.ops.aten._scaled_dot_product_flash_attention",
    "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu",
    "torch.ops.aten._scaled_dot_product_efficient_attention",
    "torch.ops.aten._scaled_dot_product_cudnn_attention",
    "torch.ops.aten._scaled_dot_product_fused_attention_overrideable",
    "torch.ops.aten._flash_attention_forward",
    "torch.ops.aten._efficient_attention_forward",
    "torch.ops.aten._native_multi_head_attention",
)


def _lookup_case(args, expected, *, on, hints=None) -> Case:
    """A case of 02.1, judged finite first so that a naive exp is named, not shown as nan."""
    return Case(args, expected, on=on, hints=hints or {}, judge=_finite_then_close,
                private=f"on {on}: {_NAN_LOOKUP}")


@exercise(
    "02.1", answer="soft_lookup", forbid=(*SOFTMAX_FORBID, *SDPA_FORBID, __name__),
    passed="matches softmax(keys @ query / T) @ values on 20 random cases, one key, near ties, "
    "negative scores and a hard look-up",
)
def _soft_lookup(rng: np.random.Generator) -> Iterator[Case]:
    """``soft_lookup(query, keys, values, temperature)``: a soft dictionary look-up."""
    # Cases that random draws may miss: one key (its value, whatever the score); two keys
    # whose scores at T = 0.01 are 100 and 99 (weights e : 1, which clipping the scores
    # destroys); a large negative score, and all scores equal (the mean of the values).
    values = np.array([[2.0, -1.0, 0.5]])
    yield _lookup_case((np.array([3.0, -2.0]), np.array([[1.0, 4.0]]), values, 0.1), values[0],
                       on="one key (n = 1): the look-up returns its value")
    keys, values = np.array([[1.0], [0.99]]), np.array([[1.0, 0.0], [0.0, 1.0]])
    yield _lookup_case((np.array([100.0]), keys, values, 0.01),
                       softmax(keys @ [100.0] / 0.01) @ values,
                       on="scores 100 and 99 (query 100, keys 1 and 0.99, temperature 0.01)")
    keys = np.array([[-5.0, 0.0], [-4.0, 0.0], [-6.0, 0.0]])
    values = np.arange(6.0).reshape(3, 2)
    yield _lookup_case((np.array([200.0, 1.0]), keys, values, 0.1),
                       softmax(keys @ [200.0, 1.0] / 0.1) @ values,
                       on="keys @ query = -1000, -800, -1200 at temperature 0.1 (all negative)")
    yield _lookup_case((np.zeros(3), rng.normal(size=(5, 3)), values[[0, 1, 2, 0, 1]], 0.5),
                       values[[0, 1, 2, 0, 1]].mean(axis=0), on="a zero query: every score equal")
    for case in range(20):
        n, d, d_v = (int(x) for x in rng.integers(1, 7, size=3))
        t = float(rng.choice([0.1, 0.5, 3.0]))
        query, keys = rng.normal(size=d), rng.normal(size=(n, d))
        values = rng.normal(size=(n, d_v))
        hints = {
            "the temperature divides the scores (keys @ query / T) before the softmax; "
            "yours ignores it": softmax(keys @ query) @ values,
            "divide the scores by the temperature, do not multiply": softmax(
                keys @ query * t
            ) @ values,
        }
        yield _lookup_case(
            (query, keys, values, t),
            softmax(keys @ query / t) @ values,
            on=f"case {case}: n={n}, d={d}, d_v={d_v}, temperature={t}",
            hints=hints if n > 1 else {},
        )
    # A tiny temperature turns the look-up hard: it returns the value of the best key.
    keys, values = np.eye(4), np.arange(8.0).reshape(4, 2)
    yield _lookup_case(
        (np.array([0.0, 0.0, 1.0, 0.0]), keys, values, 1e-3),
        values[2],
        on="an exact key match at temperature 1e-3",
    )


def _finite_then_close(got, case: Case) -> None:
    if not np.all(np.isfinite(as_array(got, case.on))):
        raise ExerciseFailure(case.private)
    close(got, case)



@exercise(
    "02.2", answer="stable_softmax", forbid=(*SOFTMAX_FORBID, *SDPA_FORBID, __name__),
    passed="finite and correct on 20 random cases with logits up to ~1e4, five fixed shapes "
    "and three closed forms",
)
def _stable_softmax(rng: np.random.Generator) -> Iterator[Case]:
    """``stable_softmax(x)``: softmax over the last axis that survives huge logits."""
    # Closed forms first: rows [1000, 999, 990] and [-1e4, -1e4] have weights 1 : e^-1 : e^-10
    # and 1 : 1, and overflow (or underflow) a naive exp.
    ratios = np.exp([0.0, -1.0, -10.0])
    yield Case(
        (np.array([1000.0, 999.0, 990.0]),),
        ratios / ratios.sum(),
        on="logits [1000, 999, 990]",
        judge=_finite_then_close,
        private="logits [1000, 999, 990] gave NaN or inf (subtract the max first)",
    )
    yield Case(
        (np.array([[-1e4, -1e4], [3.0, 3.0]]),),
        np.full((2, 2), 0.5),
        on="rows [-1e4, -1e4] and [3, 3]",
        judge=_finite_then_close,
        private="logits [-1e4, -1e4] gave NaN or inf (subtract each row's own max, with "
        "keepdims=True, not the max of the whole array)",
    )
    # A row centred at 0 that spans 2e4: shifting by the mean (or the minimum) overflows.
    yield Case(
        (np.array([1e4, 0.0, -1e4]),),
        np.array([1.0, 0.0, 0.0]),
        on="logits [1e4, 0, -1e4]",
        judge=_finite_then_close,
        private="logits [1e4, 0, -1e4] gave NaN or inf: shift each row by its maximum (not "
        "its mean or its minimum), so that the largest exponent is e^0",
    )
    # Every shape kind: one logit, one key per row, a square (where a sum without keepdims
    # broadcasts silently along the wrong axis), three axes, a single row.
    for shape in [(1,), (4, 1), (3, 3), (2, 3, 4), (1, 5)]:
        x = rng.normal(size=shape) * 10
        yield Case((x,), softmax(x, axis=-1), on=f"logits of shape {shape}",
                   judge=_finite_then_close,
                   hints={"divide each row by its own sum: keep the axis (keepdims=True) so "
                          "that it broadcasts along the row": np.exp(x - x.max(-1, keepdims=True))
                          / np.exp(x - x.max(-1, keepdims=True)).sum(-1)} if shape == (3, 3)
                   else {},
                   private=f"logits of shape {shape} gave NaN or inf")
    for case in range(20):
        shape = tuple(int(n) for n in rng.integers(1, 6, size=rng.integers(1, 4)))
        spread = float(rng.choice([1.0, 100.0, 1e4]))
        x = rng.normal(size=shape) * spread
        hints = {}
        if len(shape) > 1 and shape[0] > 1 and shape[-1] > 1:
            hints["you normalised over the first axis; the softmax runs over the last axis "
                  "(axis=-1)"] = softmax(x, axis=0)
        yield Case(
            (x,),
            softmax(x, axis=-1),
            on=f"case {case}: logits of shape {shape}",
            judge=_finite_then_close,
            hints=hints,
            private=f"case {case}: logits of size ~{spread:g} gave NaN or inf (subtract the "
            "max first)",
        )


# ---- 02.4: the softmax Jacobian, without automatic differentiation ----------------------------
AUTOGRAD_FORBID = (
    "torch.autograd.grad",
    "torch.autograd.backward",
    "torch.Tensor.backward",
    "torch.autograd.functional.jacobian",
    "torch.autograd.functional.vjp",
    "torch.autograd.functional.jvp",
    "torch.func.jacrev",
    "torch.func.jacfwd",
    "torch.func.vjp",
    "torch.func.grad",
    "torch.func.grad_and_value",
    "torch.func.jvp",
    "torch.func.linearize",
    "torch.func.hessian",
    "torch.autograd.functional.hessian",
    "torch.autograd.functional.hvp",
    "torch.autograd.functional.vhp",
    "torch.autograd.forward_ad.make_dual",
    "torch.autograd.forward_ad.unpack_dual",
    "torch.autograd.forward_ad.enter_dual_level",
)


def _autograd_jacobian(z: np.ndarray) -> np.ndarray:
    """The Jacobian of ``torch.softmax`` at ``z``, by PyTorch's automatic differentiation."""
    import torch

    return torch.autograd.functional.jacobian(
        lambda t: torch.softmax(t, dim=0), torch.tensor(z, dtype=torch.float64)
    ).numpy().copy()


@exercise(
    "02.4", answer="softmax_jacobian", forbid=(*AUTOGRAD_FORBID, __name__),
    passed="equals torch.autograd's Jacobian of the softmax on 12 random logit vectors, n = 1, "
    "a saturated and a huge one",
)
def _softmax_jacobian(rng: np.random.Generator) -> Iterator[Case]:
    """``softmax_jacobian(z)``: ``J[j, k] = d softmax(z)_j / d z_k`` for a vector ``z``."""
    cases = [(np.array([0.3, -1.2, 2.0, 0.5]), "z = (0.3, -1.2, 2, 0.5)"),
             (np.array([1.5]), "one logit (n = 1): J = [[0]]"),
             (np.array([20.0, 0.0, 0.0]), "z = (20, 0, 0): a saturated softmax"),
             (np.array([1000.0, 999.0, -1000.0]), "z = (1000, 999, -1000): logits that "
              "overflow a naive exp")]
    for case in range(12):
        n = int(rng.integers(2, 8))
        cases.append((rng.normal(size=n) * float(rng.choice([1.0, 5.0])), f"case {case}: n={n}"))
    for z, on in cases:
        p = softmax(z)
        hints = {
            "J = diag(p) - p^T p with p^T p the outer product (n, n), not the number p . p": (
                np.diag(p) - p @ p),
            "the term -p_j p_k is missing: J is diag(p) minus the outer product": np.diag(p),
            "the signs are swapped: J_jk = p_j (delta_jk - p_k)": np.outer(p, p) - np.diag(p),
        }
        expected = _autograd_jacobian(z)
        yield Case((z,), expected, on=on, judge=_finite_then_close, atol=1e-10,
                   private=f"on {on}: got NaN or inf (compute p with a stable softmax)",
                   hints={k: v for k, v in hints.items() if not matches(v, expected)})
