"""Checks for the exercises of chapter 04 (scaled dot-product attention)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from attnlab.course.spec import (
    Case,
    ExerciseFailure,
    as_array,
    close,
    exercise,
    expect_close,
    matches,
)
from attnlab.exercises.ch02 import AUTOGRAD_FORBID, SDPA_FORBID, SOFTMAX_FORBID


def _finite_then_close(got, case: Case) -> None:
    if not np.all(np.isfinite(as_array(got, case.on))):
        raise ExerciseFailure(case.private)
    close(got, case)


def _masked_reference(logits: np.ndarray, mask: np.ndarray) -> np.ndarray:
    expected = np.zeros(logits.shape)  # row by row: a softmax over the allowed keys only
    for i in range(logits.shape[0]):
        z = logits[i, mask[i]]
        if z.size:
            e = np.exp(z - z.max())
            expected[i, mask[i]] = e / e.sum()
    return expected


def _finfo_fill(logits: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """What filling masked logits with ``finfo.min`` gives: uniform fully-masked rows."""
    z = np.where(mask, logits, np.finfo(logits.dtype).min)
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


_NOT_FINITE = (
    "got NaN or inf (a fully-masked row must be zero: with -inf fill, every logit of that "
    "row is -inf and the softmax divides 0 by 0)"
)


def _max_of_all(logits: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Shifting by the maximum of *all* logits, masked ones included: underflow to zeros."""
    e = np.where(mask, np.exp(logits - logits.max(-1, keepdims=True)), 0.0)
    total = e.sum(-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


@exercise(
    "04.3",
    answer="masked_softmax", forbid=(*SOFTMAX_FORBID, *SDPA_FORBID, __name__),
    passed="matches on 20 random cases, each with a fully-masked query, and four fixed ones",
)
def _masked_softmax(rng: np.random.Generator) -> Iterator[Case]:
    """``masked_softmax(logits, mask)``: zero weight where masked, zero rows when all masked."""
    logits = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    mask = np.array([[True, False, True], [False, False, False]])
    cases = [(logits, mask, "logits [[1, 2, 3], [4, 5, 6]], mask [[T, F, T], [F, F, F]]")]
    # Fixed cases that random draws may miss: a masked logit far above the allowed ones (a
    # shift by the maximum of all logits underflows every allowed weight to 0), huge negative
    # allowed logits, one key, every key allowed.
    cases.append((np.array([[1e3, 0.0, -1.0], [-1e3, -1e3 - 1.0, 5.0]]),
                  np.array([[False, True, True], [True, True, False]]),
                  "logits [[1000, 0, -1], [-1000, -1001, 5]], the large ones masked"))
    cases.append((np.array([[3.0]]), np.array([[True]]), "one key, allowed"))
    cases.append((np.array([[0.5, -2.0, 1.0]]), np.ones((1, 3), dtype=bool), "every key allowed"))
    for case in range(20):
        s_q, s_k = (int(n) for n in rng.integers(1, 7, size=2))
        logits = rng.normal(size=(s_q, s_k)) * float(rng.choice([1.0, 1e3]))
        mask = rng.random((s_q, s_k)) < 0.6
        mask[0] = False  # the first query sees no key at all
        cases.append((logits, mask, f"case {case}: logits {logits.shape}, "
                      f"{int(mask.sum())} keys allowed"))
    for logits, mask, on in cases:
        hints = {
            "a fully-masked row came out uniform: filling masked logits with finfo.min leaves "
            "them all equal, so the softmax spreads weight evenly; set such rows to zero": (
                _finfo_fill(logits, mask)
            ),
            "the mask is inverted: True means 'may attend'": _masked_reference(logits, ~mask),
            "shift each row by the maximum of its *allowed* logits: a larger masked logit "
            "makes every allowed weight underflow to 0": _max_of_all(logits, mask),
        }
        expected = _masked_reference(logits, mask)
        hints = {k: v for k, v in hints.items() if not matches(v, expected)}
        yield Case(
            (logits, mask),
            expected,
            on=on,
            judge=_finite_then_close,
            hints=hints,
            private=f"on {on}: {_NOT_FINITE}",
        )


# ---- 04.4: the gradients of the keys and the values -------------------------------------------
def _autograd_key_value(q, k, v, u, c) -> tuple[np.ndarray, np.ndarray]:
    """dL/dK and dL/dV of L = sum <softmax(c q k^T) v, u>, by torch.autograd (float64)."""
    import torch

    qt, kt, vt, ut = (torch.tensor(a, dtype=torch.float64) for a in (q, k, v, u))
    kt.requires_grad_()
    vt.requires_grad_()
    loss = (torch.softmax(c * qt @ kt.T, dim=-1) @ vt * ut).sum()
    grad_k, grad_v = torch.autograd.grad(loss, (kt, vt))
    return grad_k.numpy().copy(), grad_v.numpy().copy()


def _pair_judge(got, case: Case) -> None:
    """``got`` is ``(dK, dV)``; each part is judged, and a mistake in it named, on its own."""
    if not isinstance(got, tuple) or len(got) != 2:
        count = len(got) if isinstance(got, tuple) else 1
        raise ExerciseFailure(f"on {case.on}: return the pair (dL/dK, dL/dV), got {count} "
                              "array(s)")
    for name, part, expected, hints in zip(("dL/dV", "dL/dK"), got[::-1], case.expected[::-1],
                                           case.private[::-1], strict=True):
        try:
            expect_close(part, expected, on=f"{case.on}, {name}", atol=1e-10)
        except ExerciseFailure:
            for message, wrong in hints.items():
                if matches(part, wrong, atol=1e-10):
                    raise ExerciseFailure(f"on {case.on}, {name}: {message}") from None
            raise


@exercise(
    "04.4", answer="key_value_gradients", forbid=(*AUTOGRAD_FORBID, __name__),
    passed="equals torch.autograd's dL/dK and dL/dV on 14 cases (one key, square shapes, "
    "scales 1/sqrt(d_k), 0.5 and 1)",
)
def _key_value_gradients(rng: np.random.Generator) -> Iterator[Case]:
    """``key_value_gradients(q, k, v, u, c)``: ``(dL/dK, dL/dV)`` for ``L = Σ <o_i, u_i>``."""
    # Square shapes first (n = s, d_v = s): a transposed product then has the right shape and
    # only its values tell; one key (dL/dK = 0, dL/dV = the sum of the u_i); c = 1 and c != 1.
    sizes = [(3, 3, 2, 3, 0.5), (2, 1, 3, 2, 1.0), (4, 4, 4, 4, None), (1, 5, 2, 1, None)]
    for _ in range(10):
        n, s, d_k, d_v = (int(x) for x in rng.integers(1, 7, size=4))
        sizes.append((n, s, d_k, d_v, [None, 1.0, 0.5][int(rng.integers(0, 3))]))
    for n, s, d_k, d_v, c in sizes:
        c = float(1 / np.sqrt(d_k) if c is None else c)  # a Python float: the grader stores it
        q, k = rng.normal(size=(n, d_k)), rng.normal(size=(s, d_k))
        v, u = rng.normal(size=(s, d_v)), rng.normal(size=(n, d_v))
        z = c * q @ k.T
        p = np.exp(z - z.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        g = u @ v.T  # (n, s)
        dz = p * g - p * (p * g).sum(-1, keepdims=True)
        grad_k, grad_v = _autograd_key_value(q, k, v, u, c)
        hints_k = {
            "the scale c is missing: the logits are c q k^T, so dL/dK carries a factor c":
                dz.T @ q,
            "the softmax Jacobian has two terms: dZ = P * G - P * rowsum(P * G), with "
            "G = U V^T; yours has only the first": c * (p * g).T @ q,
            "that is dL/dQ's formula (c dZ K); the keys get c dZ^T Q, a sum over queries":
                c * dz @ k,
        }
        hints_v = {"dL/dV = P^T U, shape (s, d_v); yours is transposed": u.T @ p,
                   "dL/dV = P^T U: the weights enter transposed (a sum over queries), "
                   "P U only has the right shape when n = s": p @ u if n == s else None}
        private = tuple({m: w for m, w in h.items() if w is not None
                         and not matches(w, ref, atol=1e-10)}
                        for h, ref in ((hints_k, grad_k), (hints_v, grad_v)))
        yield Case((q, k, v, u, c), (grad_k, grad_v),
                   on=f"n={n}, s={s}, d_k={d_k}, d_v={d_v}, c={c:.3g}",
                   judge=_pair_judge, private=private)
