"""Checks for the exercises of chapter 12 (GAM on language).

- 12.1: the paired 95 % t-interval of ``a - b`` from two lists of bits per character by seed;
- 12.2: multiply-adds per token of the language grid's GAM model, from its shapes.

Both specs start with fixed cases on which every recognised partly right answer (unpaired,
z instead of t, ``n`` instead of ``n - 1``, a wrong centre: exercise 10.1's judge; a missing
term of the count) gives a value of its own, so the mistake is named on every draw; random
cases follow.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from attnlab.course.spec import Case, exercise
from attnlab.exercises.ch10 import INTERVAL_FORBID, _interval_case

#: Fixed first cases of 12.1: (a, b), the grid's three seeds first.
_FIXED_PAIRS = (
    ([2.3797, 2.3911, 2.3702], [2.7989, 2.8203, 2.7850]),
    ([1.50, 1.80, 1.20, 1.65, 1.40], [1.52, 1.79, 1.25, 1.70, 1.41]),
)


@exercise(
    "12.1",
    answer="paired_bpc_interval",
    passed="the paired 95 % t-interval of a - b by seed, on 2 fixed and 12 random pairs of lists",
    forbid=(*INTERVAL_FORBID, "attnlab.study.language_report"),
)
def _paired_bpc_interval(rng: np.random.Generator) -> Iterator[Case]:
    """``paired_bpc_interval(a, b)``: ``(mean, low, high)`` of ``a[s] - b[s]`` over the seeds.

    The judge and the named mistakes are exercise 10.1's (:func:`attnlab.exercises.ch10`'s
    ``_interval_case``), on bits per character instead of accuracies.
    """
    for a, b in _FIXED_PAIRS:
        yield _interval_case(a, b)
    for _ in range(12):
        k = int(rng.integers(2, 7))  # 2 to 6 seeds: 1 to 5 degrees of freedom
        luck = rng.normal(0, 0.1, size=k)  # the seed's luck, shared by both sides
        a = np.round(2.4 + luck + rng.normal(0, 0.02, size=k), 4)
        b = np.round(2.6 + luck + rng.normal(0, 0.02, size=k), 4)
        yield _interval_case(a, b)


def _gam_macs(d: int, n: int, h: int, brains: int, powers: int, layers: int, vocab: int,
              *, mixing: bool = True, b_width: int | None = None, pairs: float | None = None,
              projections: int = 2, mlp: int = 8, head: bool = True) -> int:  # fmt: skip
    """Multiply-adds per token of the grid's GAM model (the keywords make the mistakes)."""
    m = d if b_width is None else b_width  # each brain's B is (M, M) with M = d
    keys = n if pairs is None else pairs  # every one of the n keys is scored
    per_brain = m * m + keys * m  # y B (M²), then one dot product of length M per key
    attention = h * brains * powers * per_brain + n * d + projections * d * d
    if mixing and brains > 1:
        attention += h * brains * n  # each brain's n weights times its mixing weight
    total = layers * (attention + mlp * d * d) + (d * vocab if head else 0)
    return int(round(total))


@exercise(
    "12.2",
    answer="gam_macs_per_token",
    passed="multiply-adds per token of the grid's GAM model, on 4 fixed and 10 random shapes",
    forbid=("attnlab.study.language.macs_per_token",),
)
def _gam_macs_per_token(rng: np.random.Generator) -> Iterator[Case]:
    """``gam_macs_per_token(d, n, h, brains, powers, layers, vocab)`` as chapter 12 counts."""
    fixed = [(64, 128, 4, 2, 1, 2, 85), (64, 128, 4, 1, 2, 2, 85), (64, 128, 4, 1, 1, 2, 85),
             (48, 96, 3, 3, 2, 1, 50)]  # fmt: skip
    random = [
        (int(h * rng.integers(4, 17)), int(rng.integers(8, 257)), int(h),
         int(rng.integers(1, 4)), int(rng.integers(1, 4)), int(rng.integers(1, 5)),
         int(rng.integers(20, 120)))
        for h in rng.integers(2, 9, size=10)
    ]  # fmt: skip
    for i, shape in enumerate(fixed + random):
        d, n, h, brains, powers, layers, vocab = shape
        on = (f"{'fixed ' if i < len(fixed) else ''}case {i}: d={d}, n={n}, h={h}, "
              f"brains={brains}, powers={powers}, layers={layers}, vocab={vocab}")  # fmt: skip
        hints = {
            "each head's brain B is (d, d) here, not (d_k, d_k): GAM's heads read the whole "
            "token": _gam_macs(*shape, b_width=d // h),
            "the scores of all n keys are computed (the kernels compute the masked half too), "
            "not (n + 1) / 2": _gam_macs(*shape, pairs=(n + 1) / 2),
            "W_V and W_O cost d² each per token": _gam_macs(*shape, projections=0),
            "the MLP has width 4d: 8 d² per token": _gam_macs(*shape, mlp=4),
            "the output head costs d · vocab per token": _gam_macs(*shape, head=False),
            "a polynomial of L powers has L brains' worth of products (one per power)": (
                _gam_macs(*shape[:4], 1, *shape[5:])
            ),
        }
        if brains > 1:
            hints["two or more brains are mixed: h · brains · n multiplications per token"] = (
                _gam_macs(*shape, mixing=False)
            )
        expected = _gam_macs(*shape)
        hints = {m: v for m, v in hints.items() if v != expected}
        yield Case(shape, expected, on=on, hints=hints, atol=0.5, rtol=0.0)
