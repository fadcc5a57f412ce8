"""Checks for the exercises of chapter 04 (scaled dot-product attention)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from attnlab.course.spec import Case, ExerciseFailure, as_array, close, exercise


def _finite_then_close(got, case: Case) -> None:
    if not np.all(np.isfinite(as_array(got, case.on))):
        raise ExerciseFailure(case.private)
    close(got, case)


def _entropy(w: np.ndarray, log=np.log) -> np.ndarray:
    logs = log(w, out=np.zeros_like(w), where=w > 0)
    return -(w * logs).sum(axis=-1)


_ZERO_LOG = (
    "a weight of 0 gave NaN: np.log(0) = -inf and 0 * (-inf) = NaN; count 0 log 0 as 0 "
    "(np.log(w, out=np.zeros_like(w), where=w > 0))"
)


def _entropy_hints(w: np.ndarray) -> dict[str, np.ndarray]:
    return {
        "these are bits (log base 2); the book measures entropy in nats: use np.log": _entropy(
            w, np.log2
        ),
        "the entropy is −Σ w log w: your values have the wrong sign": -_entropy(w),
    }


@exercise(
    "04.2", answer="weight_entropy",
    passed="matches on 20 random cases, uniform rows (log n) and one-hot rows (0)",
)
def _weight_entropy(rng: np.random.Generator) -> Iterator[Case]:
    """``weight_entropy(w)``: entropy in nats of each row of weights, with ``0 log 0 = 0``."""
    # Closed forms first: they carry the two classic slips (0 log 0 and the base of the log).
    yield Case(
        (np.eye(3),),
        np.zeros(3),
        on="one-hot rows",
        judge=_finite_then_close,
        private="one-hot rows gave NaN: treat 0·log 0 as 0 (np.log(0) = -inf, and "
        "0 * (-inf) = NaN)",
    )
    n = int(rng.integers(2, 50))
    uniform = np.full(n, 1.0 / n)
    yield Case(
        (uniform,),
        np.asarray(np.log(n)),
        on=f"uniform over {n} keys",
        judge=_finite_then_close,
        hints=_entropy_hints(uniform),
        private=_ZERO_LOG,
    )
    for case in range(20):
        shape = tuple(int(n) for n in rng.integers(1, 6, size=rng.integers(1, 4)))
        w = rng.random(shape) ** 3
        w[rng.random(shape) < 0.3] = 0.0  # some exact zeros
        w[..., 0] += 0.1
        w = w / w.sum(axis=-1, keepdims=True)
        yield Case(
            (w,),
            _entropy(w),
            on=f"case {case}: weights of shape {shape}",
            judge=_finite_then_close,
            hints=_entropy_hints(w),
            private=_ZERO_LOG,
        )


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


@exercise(
    "04.3",
    answer="masked_softmax",
    passed="matches on 20 random cases, each with a fully-masked query",
)
def _masked_softmax(rng: np.random.Generator) -> Iterator[Case]:
    """``masked_softmax(logits, mask)``: zero weight where masked, zero rows when all masked."""
    logits = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    mask = np.array([[True, False, True], [False, False, False]])
    cases = [(logits, mask, "logits [[1, 2, 3], [4, 5, 6]], mask [[T, F, T], [F, F, F]]")]
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
        }
        yield Case(
            (logits, mask),
            _masked_reference(logits, mask),
            on=on,
            judge=_finite_then_close,
            hints=hints,
            private=f"on {on}: {_NOT_FINITE}",
        )
