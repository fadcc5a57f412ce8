"""Checks for the exercises of chapter 02 (dot-product attention)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from attnlab.course.spec import Case, ExerciseFailure, as_array, close, exercise
from attnlab.softmax import softmax


@exercise(
    "02.1", answer="soft_lookup",
    passed="matches softmax(keys @ query / T) @ values on 20 random cases and a hard look-up",
)
def _soft_lookup(rng: np.random.Generator) -> Iterator[Case]:
    """``soft_lookup(query, keys, values, temperature)``: a soft dictionary look-up."""
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
        yield Case(
            (query, keys, values, t),
            softmax(keys @ query / t) @ values,
            on=f"case {case}: n={n}, d={d}, d_v={d_v}, temperature={t}",
            hints=hints if n > 1 else {},
        )
    # A tiny temperature turns the look-up hard: it returns the value of the best key.
    keys, values = np.eye(4), np.arange(8.0).reshape(4, 2)
    yield Case(
        (np.array([0.0, 0.0, 1.0, 0.0]), keys, values, 1e-3),
        values[2],
        on="an exact key match at temperature 1e-3",
    )


def _finite_then_close(got, case: Case) -> None:
    if not np.all(np.isfinite(as_array(got, case.on))):
        raise ExerciseFailure(case.private)
    close(got, case)


@exercise(
    "02.2", answer="stable_softmax",
    passed="finite and correct on 20 random cases with logits up to ~1e4 and two closed forms",
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
