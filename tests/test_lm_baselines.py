"""Kneser–Ney n-grams and xz's conditional size (attnlab.lm.baselines)."""

from __future__ import annotations

import lzma
import math
from collections import Counter

import numpy as np
import pytest

from attnlab.lm.baselines import KneserNey, tune_discount, xz_bits_per_char


def _naive_kn(train: list[int], V: int, n: int, D: float, context: tuple, w: int) -> float:
    """Interpolated Kneser–Ney written out with Counters (the textbook recursion)."""
    pad = [V] * (n - 1) + list(train)
    grams = Counter(tuple(pad[i : i + n]) for i in range(len(pad) - n + 1))
    levels = {n: grams}
    for k in range(n - 1, 0, -1):  # continuation counts: distinct left extensions
        levels[k] = Counter(g[1:] for g in levels[k + 1])

    def p(k: int, h: tuple, w: int) -> float:
        if k == 0:
            return 1.0 / V
        c = levels[k]
        total = sum(v for g, v in c.items() if g[:-1] == h)
        if total == 0:
            return p(k - 1, h[1:], w)
        types = sum(1 for g in c if g[:-1] == h)
        return (max(c[h + (w,)] - D, 0) + D * types * p(k - 1, h[1:], w)) / total

    return p(n, tuple(context[len(context) - (n - 1) :]) if n > 1 else (), w)


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_kneser_ney_matches_a_naive_recursion(n):
    rng = np.random.default_rng(n)
    V = 5
    train = rng.integers(0, V - 1, size=300)  # id V-1 never occurs in training
    lm = KneserNey(train, V, n)
    test = rng.integers(0, V, size=40)
    bits = lm.bits(test, discount=0.6)
    padded = [V] * (n - 1) + test.tolist()
    for t in range(1, len(test)):
        ctx = tuple(padded[t : t + n - 1])
        want = -math.log2(_naive_kn(train.tolist(), V, n, 0.6, ctx, int(test[t])))
        assert bits[t - 1] == pytest.approx(want, rel=1e-12)


def test_distributions_sum_to_one_and_unseen_ids_keep_mass():
    rng = np.random.default_rng(1)
    lm = KneserNey(rng.integers(1, 6, size=500), vocab_size=7, order=3)
    p = lm.probabilities(rng.integers(0, 7, size=(20, 4)), discount=0.7)
    assert p.shape == (20, 7)
    np.testing.assert_allclose(p.sum(1), 1.0, rtol=1e-12)
    assert (p[:, 0] > 0).all() and (p[:, 6] > 0).all()  # never seen, still possible


def test_a_higher_order_helps_on_a_periodic_text_and_tuning_picks_from_the_grid():
    ids = np.tile(np.array([1, 2, 3, 1, 3, 2]), 200)
    two, four = KneserNey(ids, 4, 2), KneserNey(ids, 4, 4)
    assert four.bits_per_char(ids[:60]) < 0.1 < two.bits_per_char(ids[:60])
    d, bits = tune_discount(four, ids[:60], discounts=(0.3, 0.9))
    # every continuation is certain: the smaller discount reserves less mass for the unseen
    assert d == 0.3 and bits == pytest.approx(four.bits_per_char(ids[:60], 0.3))


def test_xz_bits_follow_the_formula():
    rng = np.random.default_rng(0)
    train = "".join(rng.choice(list("abcdefgh"), size=5000))
    test = "".join(rng.choice(list("abcdefgh"), size=2000))
    a = len(lzma.compress(train.encode(), preset=9))
    b = len(lzma.compress((train + test).encode(), preset=9))
    assert xz_bits_per_char(train, test) == 8 * (b - a) / 2000
    # eight equally likely letters carry 3 bits each; xz gets close but cannot beat it
    assert 3.0 < xz_bits_per_char(train, test) < 3.6


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: KneserNey(np.array([0, 1]), 2, 0), ValueError, "order"),
        (lambda: KneserNey(np.array([0, 1]), 2, 2.0), TypeError, "order"),
        (lambda: KneserNey(np.array([0, 1]), True, 2), TypeError, "vocab_size"),
        (lambda: KneserNey(np.array([0, 5]), 2, 2), ValueError, "ids"),
        (lambda: KneserNey(np.array([]), 2, 2), ValueError, "ids"),
        (lambda: KneserNey(np.array([[0, 1]]), 2, 2), ValueError, "ids"),
        (lambda: KneserNey(np.array([0.0, 1.0]), 2, 2), ValueError, "ids"),
        (lambda: KneserNey(np.array([0, 1]), 1000, 9), ValueError, "int64"),
        (lambda: KneserNey(np.array([0, 1]), 2, 2).bits(np.array([0, 1]), 1.0), ValueError,
         "discount"),
        (lambda: KneserNey(np.array([0, 1]), 2, 2).bits(np.array([0, 2])), ValueError, "ids"),
        (lambda: xz_bits_per_char("a", ""), ValueError, "test"),
        (lambda: xz_bits_per_char(b"a", "b"), TypeError, "train"),
        (lambda: xz_bits_per_char("a", "b", preset=10), ValueError, "preset"),
    ],
)
def test_bad_arguments(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_tuning_scores_every_discount_as_bits_per_char_does():
    rng = np.random.default_rng(3)
    ids = rng.integers(0, 6, size=3000)
    model = KneserNey(ids[:2500], 6, 3)
    grid = (0.1, 0.4, 0.7, 0.95)
    scores = {d: model.bits_per_char(ids[2500:], d) for d in grid}
    d, bits = tune_discount(model, ids[2500:], discounts=grid)
    assert d == min(scores, key=scores.get) and bits == pytest.approx(scores[d], rel=1e-12)
    with pytest.raises(ValueError, match="discount"):
        tune_discount(model, ids[2500:], discounts=(0.5, 1.0))
