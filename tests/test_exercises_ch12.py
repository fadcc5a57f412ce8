"""The checks of chapter 12's exercises pass honest answers and name each partly right one,
on every draw (the separating cases are fixed, not random)."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
from _partly_right import always_fails, refused_loophole, verdict

from attnlab.exercises import exercise_ids

# Student t quantiles from a printed table (not from the module under test).
T = {1: 12.706204736, 2: 4.302652730, 3: 3.182446305, 4: 2.776445105, 5: 2.570581836,
     6: 2.446911851}  # fmt: skip
Z = 1.959963985


def _interval(a, b, *, paired=True, quantile="t", ddof=1, df_shift=0, flip=False):
    """An answer to 12.1 written with lists and statistics (the keywords make the mistakes)."""
    k = len(a)
    if flip:
        a, b = b, a
    diff = [x - y for x, y in zip(a, b, strict=True)]
    mean = sum(diff) / k
    q = Z if quantile == "z" else T[k - 1 + df_shift]
    if paired:
        sd = statistics.stdev(diff) if ddof == 1 else statistics.pstdev(diff)
        half = q * sd / math.sqrt(k)
    else:
        half = q * math.sqrt(statistics.variance(a) / k + statistics.variance(b) / k)
    return mean, mean - half, mean + half


def test_12_1_passes_a_right_answer():
    exercise_ids()
    ok, message = verdict("12.1", _interval)
    assert ok, message


@pytest.mark.parametrize(
    ("kwargs", "phrase"),
    [
        ({"paired": False}, "the seeds are paired"),
        ({"quantile": "z"}, "not the normal quantile 1.96"),
        ({"ddof": 0}, "n - 1 (np.std(..., ddof=1)), not by n"),
        ({"df_shift": 1}, "n - 1 degrees of freedom"),
        ({"flip": True}, "the centre is the mean of the per-seed differences a_s - b_s"),
    ],
)
def test_12_1_names_each_partly_right_answer_on_every_draw(kwargs, phrase):
    always_fails("12.1", lambda a, b: _interval(a, b, **kwargs), phrase)


def test_12_1_refuses_the_librarys_interval():
    from attnlab.study.stats import paired_interval

    def through_the_library(a, b):
        return paired_interval(dict(enumerate(a)), dict(enumerate(b)))

    refused_loophole("12.1", through_the_library, "paired_interval")


def _macs(d, n, h, brains, powers, layers, vocab, *, b=None, keys=None, proj=2, mlp=8,
          head=True, mix=True, per_power=True):  # fmt: skip
    """An answer to 12.2, term by term from the shapes (the keywords make the mistakes)."""
    m = d if b is None else b
    keys = n if keys is None else keys
    copies = brains * (powers if per_power else 1)  # one (M, M) product per brain and power
    scores = h * copies * (m * m + keys * m)
    mixing = h * brains * n if (mix and brains > 1) else 0
    values = n * d + proj * d * d  # weights times values, and W_V, W_O
    block = scores + mixing + values + mlp * d * d
    return layers * block + (d * vocab if head else 0)


def test_12_2_passes_a_right_answer_and_matches_the_grid():
    from attnlab.study.language import macs_per_token

    ok, message = verdict("12.2", _macs)
    assert ok, message
    for slot, brains, powers in (("gam-p2", 1, 1), ("gam-p2-b2", 2, 1), ("gam-poly", 1, 2)):
        assert _macs(64, 128, 4, brains, powers, 2, 85) == macs_per_token(slot, vocab_size=85)


@pytest.mark.parametrize(
    ("kwargs", "phrase"),
    [
        ({"b": "dk"}, "not (d_k, d_k)"),
        ({"keys": "half"}, "not (n + 1) / 2"),
        ({"proj": 0}, "W_V and W_O"),
        ({"mlp": 4}, "width 4d"),
        ({"head": False}, "output head"),
        ({"mix": False}, "mixed"),
        ({"per_power": False}, "L powers"),
    ],
)
def test_12_2_names_each_partly_right_answer_on_every_draw(kwargs, phrase):
    def answer(d, n, h, brains, powers, layers, vocab):
        extra = dict(kwargs)
        if extra.get("b") == "dk":
            extra["b"] = d // h
        if extra.get("keys") == "half":
            extra["keys"] = (n + 1) / 2
        return _macs(d, n, h, brains, powers, layers, vocab, **extra)

    always_fails("12.2", answer, phrase)


def test_12_2_refuses_the_librarys_count():
    from attnlab.study.language import macs_per_token

    def through_the_library(d, n, h, brains, powers, layers, vocab):
        slot = {(1, 1): "gam-p2", (2, 1): "gam-p2-b2", (1, 2): "gam-poly"}.get((brains, powers))
        if slot is None:
            return _macs(d, n, h, brains, powers, layers, vocab)
        return macs_per_token(slot, vocab_size=vocab, d=d, layers=layers, h=h, context=n)

    refused_loophole("12.2", through_the_library, "macs_per_token")


def test_the_fixed_cases_separate_every_mistake():
    # On the first case of every draw, each hint's value differs from the answer's and from
    # every other hint's, so a partly right answer fails there with its own name.
    from attnlab.course.spec import get_spec

    exercise_ids()
    for exercise_id in ("12.1", "12.2"):
        spec = get_spec(exercise_id)
        first = next(iter(spec.cases(np.random.default_rng(0))))
        values = [np.atleast_1d(np.asarray(first.expected, float))] + [
            np.atleast_1d(np.asarray(v, float)) for v in first.hints.values()
        ]
        for i in range(len(values)):
            for j in range(i):
                assert not np.allclose(
                    values[i], values[j], rtol=max(first.rtol, 1e-6), atol=first.atol
                ), (exercise_id, i, j)
