"""Exercise 10.2 (an exact paired sign-flip test) passes honest answers and no partly right one.

The honest answers here are written independently of the check's reference (a loop over
``itertools.product`` and a recursive enumeration); each wrong answer is right on some inputs,
and the check must fail it on every draw of its random cases (its boundary cases are fixed).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from attnlab.course.check import run_spec
from attnlab.course.spec import get_spec
from attnlab.exercises import exercise_ids


def _verdict(answer, exercise_id="10.2"):
    exercise_ids()
    return run_spec(get_spec(exercise_id), answer)


def loop_p(a, b, tol=1e-9):
    """The exact two-sided sign-flip p-value, by a plain loop over every sign pattern."""
    diff = [float(x) - float(y) for x, y in zip(a, b, strict=True)]
    observed = abs(sum(diff))
    hits = 0
    for signs in itertools.product((1, -1), repeat=len(diff)):
        hits += abs(sum(s * x for s, x in zip(signs, diff, strict=True))) >= observed - tol
    return hits / 2 ** len(diff)


def recursive_p(a, b):
    """The same p-value by recursion over the seeds (another independent answer)."""
    diff = np.subtract(a, b, dtype=float)
    observed = abs(diff.sum())

    def count(i, total):
        if i == len(diff):
            return int(abs(total) >= observed - 1e-9)
        return count(i + 1, total + diff[i]) + count(i + 1, total - diff[i])

    return count(0, 0.0) / 2 ** len(diff)


def _numpy_p(a, b, *, compare=lambda sums, obs: sums >= obs - 1e-9, absolute=True):
    diff = np.subtract(a, b, dtype=float)
    signs = np.array(list(itertools.product((1, -1), repeat=diff.size)))
    sums, obs = signs @ diff, diff.sum()
    if absolute:
        sums, obs = np.abs(sums), abs(obs)
    return float(np.mean(compare(sums, obs)))


def test_hand_values_of_the_independent_answer():
    """Worked by hand: one seed p = 1; five seeds all one sign p = 2/32; two seeds of one
    sign p = 1/2; a tie that rounding breaks still counts."""
    assert loop_p([0.97], [1.0]) == 1.0
    assert loop_p([0.9] * 5, [1.0] * 5) == 2 / 32
    assert loop_p([0.6, 0.7], [0.5, 0.65]) == 0.5
    assert loop_p([0.6, 0.7], [0.7, 0.65]) == 1.0
    assert loop_p([0.988, 0.913, 0.905], [0.941, 0.908, 0.952]) == 1.0  # D = .047 .005 -.047
    assert loop_p([0.988, 0.913, 0.905], [0.941, 0.908, 0.952], tol=0.0) == 0.75  # rounding


@pytest.mark.parametrize("answer", [loop_p, recursive_p, _numpy_p])
def test_honest_answers_pass(answer):
    for _ in range(3):  # fresh random cases each time
        ok, message = _verdict(answer)
        assert ok, message


def test_answers_that_return_lists_or_numpy_scalars_pass():
    assert _verdict(lambda a, b: np.float64(loop_p(a, b)))[0]


WRONG = {
    "one-sided": (lambda a, b: _numpy_p(a, b, absolute=False), "two-sided"),
    "strict >": (lambda a, b: _numpy_p(a, b, compare=lambda s, o: s > o), ">=, not >"),
    "no tolerance": (lambda a, b: _numpy_p(a, b, compare=lambda s, o: s >= o), "tolerance"),
    "excludes the observed pattern": (
        lambda a, b: (loop_p(a, b) * 2 ** len(a) - 1) / max(2 ** len(a) - 1, 1),
        "count the observed one",
    ),
    "unpaired permutation": (None, "paired"),
}


def _unpaired_p(a, b):
    pooled = np.concatenate([a, b]).astype(float)
    k, total = len(a), pooled.sum()
    observed = abs(np.sum(a) - np.sum(b))
    splits = [abs(2 * pooled[list(c)].sum() - total)
              for c in itertools.combinations(range(2 * k), k)]  # fmt: skip
    return float(np.mean(np.array(splits) >= observed - 1e-9))


WRONG["unpaired permutation"] = (_unpaired_p, "paired")


@pytest.mark.parametrize("name", list(WRONG))
def test_partly_right_answers_fail_with_their_mistake_named(name):
    answer, phrase = WRONG[name]
    for _ in range(3):
        ok, message = _verdict(answer)
        assert not ok, f"{name} passed"
        assert phrase in message, (name, message)


def test_answers_right_only_on_some_boundary_fail():
    """Each is right on most inputs; a fixed case of the check separates it."""
    partial = {
        # patterns from 8-bit integers: right up to 8 seeds, wrong (or failing) beyond
        "at most 8 seeds": lambda a, b: loop_p(a, b) if len(a) <= 8 else 0.5,
        # a one-seed shortcut that forgets that both patterns tie
        "one seed": lambda a, b: 0.5 if len(a) == 1 else loop_p(a, b),
        # a Student t approximation instead of the exact count
        "normal approximation": lambda a, b: math.erfc(
            abs(np.mean(np.subtract(a, b))) / (np.std(np.subtract(a, b), ddof=1) /
                                             math.sqrt(len(a)) + 1e-12) / math.sqrt(2)
        ) if len(a) > 1 else 1.0,
        # a Monte Carlo estimate of the p-value
        "sampled patterns": lambda a, b: float(np.mean(
            np.abs(np.random.default_rng(0).choice([-1, 1], size=(4000, len(a)))
                   @ np.subtract(a, b)) >= abs(np.sum(np.subtract(a, b))) - 1e-9)),
    }  # fmt: skip
    for name, answer in partial.items():
        ok, message = _verdict(answer)
        assert not ok, f"{name} passed"


def test_the_check_hands_copies_and_refuses_arrays_of_the_wrong_shape():
    def mutating(a, b):
        p = loop_p(a, b)
        a[:] = 0  # spoils its own copies only: the references were computed before
        b[:] = 0
        return p

    ok, message = _verdict(mutating)
    assert ok, message
    ok, message = _verdict(lambda a, b: np.array([loop_p(a, b)]))
    assert not ok and "shape" in message


def test_exercise_10_1_still_checks_the_task():
    from attnlab.data.tasks import TokenTask

    def first_token_task(num, n, vocab, seed):
        rng = np.random.default_rng(seed)
        inputs = rng.integers(0, vocab, size=(num, n))
        return TokenTask("first", inputs, np.repeat(inputs[:, :1], n, axis=1), vocab, vocab)

    assert _verdict(first_token_task, "10.1")[0]

    def last_token_task(num, n, vocab, seed):
        task = first_token_task(num, n, vocab, seed)
        return TokenTask("first", task.inputs, np.repeat(task.inputs[:, -1:], n, axis=1),
                         vocab, vocab)  # fmt: skip

    ok, message = _verdict(last_token_task, "10.1")
    assert not ok and "first token" in message


def test_exercise_10_1_refuses_a_wrong_name_and_set_positions():
    from attnlab.data.tasks import TokenTask

    def answer(name="first", positions=False, span=False):
        def first_token_task(num, n, vocab, seed):
            rng = np.random.default_rng(seed)
            inputs = rng.integers(0, vocab, size=(num, n))
            extra = {}
            if positions:
                extra["positions"] = np.broadcast_to(np.arange(n), (num, n)).copy()
            if span:
                extra["span"] = 2 * n
            return TokenTask(name, inputs, np.repeat(inputs[:, :1], n, axis=1), vocab, vocab,
                             **extra)  # fmt: skip

        return first_token_task

    assert _verdict(answer(), "10.1")[0]
    ok, message = _verdict(answer(name="wrongname"), "10.1")
    assert not ok and '"first"' in message
    ok, message = _verdict(answer(positions=True), "10.1")
    assert not ok and "positions must stay None" in message
    ok, message = _verdict(answer(span=True), "10.1")
    assert not ok and "span must stay None" in message
