"""Checks for the exercises of chapter 02 (dot-product attention)."""

from __future__ import annotations

import numpy as np

from attnlab.exercises._registry import ExerciseFailure, expect_close, register
from attnlab.softmax import softmax


@register("02.1")
def _soft_lookup(answer) -> str:
    """``soft_lookup(query, keys, values, temperature)``: a soft dictionary look-up."""
    rng = np.random.default_rng()
    for case in range(20):
        n, d, d_v = (int(x) for x in rng.integers(1, 7, size=3))
        t = float(rng.choice([0.1, 0.5, 1.0, 3.0]))
        query, keys = rng.normal(size=d), rng.normal(size=(n, d))
        values = rng.normal(size=(n, d_v))
        expected = softmax(keys @ query / t) @ values
        got = answer(query, keys, values, t)
        expect_close(got, expected, on=f"case {case}: n={n}, d={d}, d_v={d_v}, temperature={t}")
    # A tiny temperature turns the look-up hard: it returns the value of the best key.
    keys = np.eye(4)
    values = np.arange(8.0).reshape(4, 2)
    got = answer(np.array([0.0, 0.0, 1.0, 0.0]), keys, values, 1e-3)
    expect_close(got, values[2], on="an exact key match at temperature 1e-3")
    return "matches softmax(keys @ query / T) @ values on 20 random cases and a hard look-up"


@register("02.2")
def _stable_softmax(answer) -> str:
    """``stable_softmax(x)``: softmax over the last axis that survives huge logits."""
    rng = np.random.default_rng()
    for case in range(20):
        shape = tuple(int(n) for n in rng.integers(1, 6, size=rng.integers(1, 4)))
        spread = float(rng.choice([1.0, 100.0, 1e4]))
        x = rng.normal(size=shape) * spread
        got = np.asarray(answer(x))
        if not np.all(np.isfinite(got)):
            raise ExerciseFailure(
                f"case {case}: logits of size ~{spread:g} gave NaN or inf (subtract the max first)"
            )
        expect_close(got, softmax(x, axis=-1), on=f"case {case}: logits of shape {shape}")
    # Always at least one case that overflows a naive exp, with a closed-form answer:
    # the rows [1000, 999, 990] and [-1e4, -1e4] have weights 1 : e^-1 : e^-10 and 1 : 1.
    ratios = np.exp([0.0, -1.0, -10.0])
    got = np.asarray(answer(np.array([1000.0, 999.0, 990.0])))
    if not np.all(np.isfinite(got)):
        raise ExerciseFailure("logits [1000, 999, 990] gave NaN or inf (subtract the max first)")
    expect_close(got, ratios / ratios.sum(), on="logits [1000, 999, 990]")
    got = np.asarray(answer(np.array([[-1e4, -1e4], [3.0, 3.0]])))
    if not np.all(np.isfinite(got)):
        raise ExerciseFailure("logits [-1e4, -1e4] gave NaN or inf (subtract the max first)")
    expect_close(got, np.full((2, 2), 0.5), on="rows [-1e4, -1e4] and [3, 3]")
    return "finite and correct on 20 random cases with logits up to ~1e4 and two closed forms"
