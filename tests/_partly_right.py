"""Run an exercise's cases against an answer for one seed: the first failure, or ``None``.

The checks draw fresh random cases on every call; a partly right answer must fail on *every*
draw, so the tests of chapters 06–09 run an answer against the cases of many seeds.
"""

from __future__ import annotations

import copy
import dataclasses

import numpy as np

from attnlab.course.adapters import adapt
from attnlab.course.check import run_spec
from attnlab.course.spec import ExerciseFailure, get_spec, judge, to_plain
from attnlab.exercises import exercise_ids


def verdict(exercise_id, answer):
    """``(passed, message)`` of the real check (forbidden calls included)."""
    exercise_ids()
    return run_spec(get_spec(exercise_id), answer)


def always_fails(exercise_id, answer, phrase=""):
    """``answer`` fails the real check on 10 fresh draws, with ``phrase`` in each message."""
    for _ in range(10):
        ok, message = verdict(exercise_id, answer)
        assert not ok, f"{exercise_id}: a partly right answer passed"
        assert phrase in message, message


def refused_loophole(exercise_id, answer, phrase=""):
    """``answer`` is right (it passes the cases once nothing is forbidden), and the real check
    refuses it on 10 fresh draws with ``phrase`` in each message: the library hands it over."""
    exercise_ids()
    unguarded = dataclasses.replace(get_spec(exercise_id), forbid=())
    ok, message = run_spec(unguarded, answer)
    assert ok, f"{exercise_id}: the loophole answer is not even right: {message}"
    always_fails(exercise_id, answer, phrase)


def first_failure(exercise_id, answer, seed):
    """The message of the first case of draw ``seed`` that ``answer`` fails, else ``None``."""
    exercise_ids()
    spec = get_spec(exercise_id)
    for case in spec.cases(np.random.default_rng(seed)):
        try:  # through the spec's adapter, as the check calls it (a memory bound included)
            got = to_plain(adapt(spec.adapter, answer, copy.deepcopy(case.args)))
        except Exception as error:  # noqa: BLE001 - a wrong answer may crash: that fails it
            return f"raised {type(error).__name__}: {error}"
        try:
            judge(got, case)
        except ExerciseFailure as failure:
            return str(failure)
    return None


def seeds_passed(exercise_id, answer, seeds):
    """The seeds whose whole draw ``answer`` passes (empty for an answer that must fail)."""
    return [seed for seed in seeds if first_failure(exercise_id, answer, seed) is None]
