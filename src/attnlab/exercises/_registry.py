"""The registry behind ``attnlab.exercises.check``.

Each chapter module ``attnlab.exercises.chNN`` declares one *spec* per code exercise with
``attnlab.course.spec.exercise``: a generator of cases (inputs, a reference computed from
them, and common mistakes to recognise). The same spec serves ``check`` here, in the
learner's kernel, and the grader (``attnlab.course.grade``), which judges answers from
plain data outside the student's process.

``register`` keeps the older form, a function that takes the answer and raises
``ExerciseFailure``: such checks run in ``check`` (with its time limit) but cannot be graded
by ``python -m attnlab.grade``, which needs a spec.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import pkgutil
import re
from collections.abc import Callable
from typing import Any

import numpy as np  # noqa: F401  (used by the doctests)

from attnlab.course.check import (
    CAPTURE_ENV,
    CheckTimeout,
    describe_error,
    run_spec,
    run_spec_forked,
    time_limit,
)
from attnlab.course.spec import EXERCISE_ID, ExerciseFailure, expect_close, get_spec, spec_ids

__all__ = ["EXERCISE_ID", "ExerciseFailure", "check", "exercise_ids", "expect_close", "register"]

#: Time limit (seconds) of a check registered with ``register``.
LEGACY_TIMEOUT = 20.0

_CHECKS: dict[str, Callable[[Any], str]] = {}


def _chapter_of(exercise_id: str) -> str:
    match = EXERCISE_ID.match(exercise_id) if isinstance(exercise_id, str) else None
    if match is None:
        raise ValueError(
            f"exercise id must look like 'NN.k' (chapter and number, e.g. '05.2'), "
            f"got {exercise_id!r}"
        )
    return match["chapter"]


def register(exercise_id: str) -> Callable[[Callable[[Any], str]], Callable[[Any], str]]:
    """Register the decorated function as the check of ``exercise_id`` (``"NN.k"``).

    A check takes the learner's answer, raises ``ExerciseFailure`` with a helpful
    message when it is wrong, and returns a one-line description of what it verified.
    Registering a second, different function under an id already taken raises
    ``ValueError``; re-running the cell that defines the same function (same module and
    name) simply replaces it, so a notebook that registers its own check can be re-run.

    Examples
    --------
    >>> @register("99.7")
    ... def _is_seven(answer):
    ...     if answer != 7:
    ...         raise ExerciseFailure(f"expected 7, got {answer!r}")
    ...     return "the answer is 7"
    >>> check("99.7", 7)
    Exercise 99.7: passed. the answer is 7
    True
    >>> check("99.7", 8)
    Exercise 99.7: not yet. expected 7, got 8
    False
    """
    _chapter_of(exercise_id)

    def decorate(fn: Callable[[Any], str]) -> Callable[[Any], str]:
        previous = _CHECKS.get(exercise_id)
        if previous is not None and _origin(previous) != _origin(fn):
            raise ValueError(
                f"exercise {exercise_id!r} is registered twice: by {'.'.join(_origin(previous))}"
                f" and by {'.'.join(_origin(fn))}"
            )
        _CHECKS[exercise_id] = fn
        return fn

    return decorate


def _origin(fn: Callable[[Any], str]) -> tuple[str, str]:
    return (getattr(fn, "__module__", "?") or "?", getattr(fn, "__qualname__", "?"))


def _load_chapter(chapter: str) -> None:
    """Import ``attnlab.exercises.ch<chapter>`` if it exists (its checks then register)."""
    name = f"attnlab.exercises.ch{chapter}"
    if importlib.util.find_spec(name) is not None:
        importlib.import_module(name)


def _load_chapters() -> None:
    """Import every ``chNN`` module of this package so that its checks register themselves."""
    package = importlib.import_module("attnlab.exercises")
    for info in pkgutil.iter_modules(package.__path__):
        if re.fullmatch(r"ch\d{2}", info.name):
            importlib.import_module(f"attnlab.exercises.{info.name}")


def exercise_ids() -> list[str]:
    """All exercise ids that have an automatic check, sorted."""
    _load_chapters()
    return sorted(set(_CHECKS) | set(spec_ids()))


def _run_legacy(fn: Callable[[Any], str], answer: Any) -> tuple[bool, str]:
    try:
        with time_limit(LEGACY_TIMEOUT):
            return True, str(fn(answer))
    except CheckTimeout:
        return False, f"your answer took longer than {LEGACY_TIMEOUT:g} s (an endless loop?)"
    except KeyboardInterrupt:
        raise
    except BaseException as error:  # noqa: BLE001 - the learner's code crashed: say so
        return False, describe_error(error)


def check(exercise_id: str, answer: Any, *, verbose: bool = True) -> bool:
    """Test ``answer`` for exercise ``exercise_id`` on fresh random cases.

    Every reference is computed before the answer runs, the answer gets copies of the
    inputs, its results are compared as plain numpy arrays (objects that only pretend to be
    arrays are refused), it has a time limit, and common mistakes are named.

    Parameters
    ----------
    exercise_id : str
        Chapter and exercise number, for example ``"01.2"``.
    answer : object
        What the exercise asks for: usually a function, sometimes a value.
    verbose : bool
        Print a one-line verdict (and, on failure, what was expected on which input).

    Returns
    -------
    bool
        ``True`` if the answer behaves like the reference on every case.

    Raises
    ------
    ValueError
        If ``exercise_id`` is malformed or has no check.

    Examples
    --------
    >>> def unfinished(x):
    ...     raise NotImplementedError
    >>> @register("99.8")
    ... def _doubles(answer):
    ...     expect_close(answer(np.arange(3.0)), np.array([0.0, 2.0, 4.0]), on="x = [0, 1, 2]")
    ...     return "doubles [0, 1, 2]"
    >>> check("99.8", unfinished)
    Exercise 99.8: not yet. not answered yet (the function still raises NotImplementedError)
    False
    >>> check("99.8", lambda x: x + x)
    Exercise 99.8: passed. doubles [0, 1, 2]
    True
    """
    _load_chapter(_chapter_of(exercise_id))
    spec = get_spec(exercise_id)
    if spec is None and exercise_id not in _CHECKS:
        raise ValueError(
            f"no check for exercise {exercise_id!r}; known: {', '.join(exercise_ids())}"
        )
    if spec is not None and os.environ.get(CAPTURE_ENV):  # grading: answers run in children
        passed, message = run_spec_forked(spec, answer)
    elif spec is not None:
        passed, message = run_spec(spec, answer)
    else:
        passed, message = _run_legacy(_CHECKS[exercise_id], answer)
    if verbose:
        mark = "passed" if passed else "not yet"
        print(f"Exercise {exercise_id}: {mark}. {message}")
    return passed
