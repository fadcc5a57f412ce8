"""Checks for the exercises of chapter 04 (scaled dot-product attention)."""

from __future__ import annotations

import numpy as np

from attnlab.exercises._registry import ExerciseFailure, expect_close, register


@register("04.2")
def _weight_entropy(answer) -> str:
    """``weight_entropy(w)``: entropy in nats of each row of weights, with ``0 log 0 = 0``."""
    rng = np.random.default_rng()
    for case in range(20):
        shape = tuple(int(n) for n in rng.integers(1, 6, size=rng.integers(1, 4)))
        w = rng.random(shape) ** 3
        w[rng.random(shape) < 0.3] = 0.0  # some exact zeros
        w[..., 0] += 0.1
        w = w / w.sum(axis=-1, keepdims=True)
        logs = np.log(w, out=np.zeros_like(w), where=w > 0)
        expected = -(w * logs).sum(axis=-1)
        expect_close(answer(w), expected, on=f"case {case}: weights of shape {shape}")
    n = int(rng.integers(2, 50))
    expect_close(answer(np.full(n, 1.0 / n)), np.asarray(np.log(n)), on=f"uniform over {n} keys")
    got = np.asarray(answer(np.eye(3)))
    if not np.all(np.isfinite(got)):
        raise ExerciseFailure("one-hot rows gave NaN: treat 0·log 0 as 0")
    expect_close(got, np.zeros(3), on="one-hot rows")
    return "matches on 20 random cases, uniform rows (log n) and one-hot rows (0)"


@register("04.3")
def _masked_softmax(answer) -> str:
    """``masked_softmax(logits, mask)``: zero weight where masked, zero rows when all masked."""
    rng = np.random.default_rng()
    for case in range(20):
        s_q, s_k = (int(n) for n in rng.integers(1, 7, size=2))
        logits = rng.normal(size=(s_q, s_k)) * float(rng.choice([1.0, 1e3]))
        mask = rng.random((s_q, s_k)) < 0.6
        mask[0] = False  # the first query sees no key at all
        expected = np.zeros((s_q, s_k))  # row by row: a softmax over the allowed keys only
        for i in range(s_q):
            z = logits[i, mask[i]]
            if z.size:
                e = np.exp(z - z.max())
                expected[i, mask[i]] = e / e.sum()
        got = np.asarray(answer(logits, mask))
        if not np.all(np.isfinite(got)):
            raise ExerciseFailure(f"case {case}: got NaN or inf (a fully-masked row must be zero)")
        expect_close(
            got, expected, on=f"case {case}: logits {logits.shape}, {int(mask.sum())} keys allowed"
        )
    return "matches on 20 random cases, each with a fully-masked query"
