"""The registry behind ``attnlab.exercises.check``.

Each chapter module ``attnlab.exercises.chNN`` registers one check per code exercise with
``register``. ``check`` looks the check up, runs it on the learner's answer and turns
every way an answer can go wrong (a wrong value, a stub that still raises
``NotImplementedError``, a crash) into a one-line verdict instead of a traceback.

When the environment variable named by ``RESULTS_ENV`` is set (``attnlab.grade`` sets it
for each notebook it executes), every call of ``check`` also appends one JSON line
``{"exercise": ..., "passed": ..., "message": ...}`` to that file. That is how the grader
learns the verdicts without parsing printed output.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import pkgutil
import re
from collections.abc import Callable
from typing import Any

import numpy as np

#: Name of the environment variable that, when set, makes ``check`` append its verdicts
#: (one JSON object per line) to the file it names.
RESULTS_ENV = "ATTNLAB_RESULTS"

#: Exercise ids are the chapter number (two digits), a dot and the exercise number.
EXERCISE_ID = re.compile(r"^(?P<chapter>\d{2})\.(?P<number>[1-9]\d*)$")

_CHECKS: dict[str, Callable[[Any], str]] = {}


class ExerciseFailure(AssertionError):
    """Raised by a check when the answer behaves differently from the reference."""


def _chapter_of(exercise_id: str) -> str:
    match = EXERCISE_ID.match(exercise_id)
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
    return sorted(_CHECKS)


def check(exercise_id: str, answer: Any, *, verbose: bool = True) -> bool:
    """Test ``answer`` for exercise ``exercise_id`` on fresh random cases.

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
    if exercise_id not in _CHECKS:
        raise ValueError(
            f"no check for exercise {exercise_id!r}; known: {', '.join(exercise_ids())}"
        )
    try:
        verdict = _CHECKS[exercise_id](answer)
    except NotImplementedError:
        message = "not answered yet (the function still raises NotImplementedError)"
        passed = False
    except ExerciseFailure as failure:
        message = str(failure)
        passed = False
    except Exception as error:  # the learner's code crashed: say so instead of a traceback
        message = f"your answer raised {type(error).__name__}: {error}"
        passed = False
    else:
        message = str(verdict)
        passed = True
    _record(exercise_id, passed, message)
    if verbose:
        mark = "passed" if passed else "not yet"
        print(f"Exercise {exercise_id}: {mark}. {message}")
    return passed


def _record(exercise_id: str, passed: bool, message: str) -> None:
    """Append the verdict to the results file named by ``$ATTNLAB_RESULTS``, if set."""
    path = os.environ.get(RESULTS_ENV)
    if not path:
        return
    line = json.dumps({"exercise": exercise_id, "passed": passed, "message": message})
    with open(path, "a", encoding="utf-8") as results:
        results.write(line + "\n")


def _as_numbers(got: Any, on: str) -> np.ndarray:
    """``got`` as a float array (torch tensors included), or an ``ExerciseFailure``."""
    if hasattr(got, "detach") and hasattr(got, "cpu"):  # a torch tensor
        got = got.detach().cpu().numpy()
    try:
        return np.asarray(got, dtype=np.float64)
    except (TypeError, ValueError):
        raise ExerciseFailure(
            f"on {on}: expected an array of numbers, got {type(got).__name__}"
        ) from None


def expect_close(
    got: Any, expected: np.ndarray, *, on: str, atol: float = 1e-8, rtol: float = 1e-6
) -> None:
    """Raise ``ExerciseFailure`` unless ``got`` matches ``expected`` (shape and values).

    ``on`` describes the input in words, so the message says where the answer went wrong.
    ``got`` may be anything numpy can read as numbers (a list, an array, a CPU torch tensor).

    Examples
    --------
    >>> expect_close([1.0, 2.0], np.array([1.0, 2.0]), on="x = [1, 2]")
    >>> expect_close([1.0, 2.5], np.array([1.0, 2.0]), on="x = [1, 2]")
    Traceback (most recent call last):
    ...
    attnlab.exercises._registry.ExerciseFailure: on x = [1, 2]: at index (1,) expected 2, got 2.5
    """
    expected = np.asarray(expected, dtype=np.float64)
    got_arr = _as_numbers(got, on)
    if got_arr.shape != expected.shape:
        raise ExerciseFailure(
            f"on {on}: expected an array of shape {expected.shape}, got shape {got_arr.shape}"
        )
    if not np.allclose(got_arr, expected, atol=atol, rtol=rtol):
        diff = np.abs(got_arr - expected)
        diff[np.isnan(diff)] = np.inf  # a NaN is the worst possible mismatch
        worst = np.unravel_index(np.argmax(diff), expected.shape)
        raise ExerciseFailure(
            f"on {on}: at index {tuple(int(i) for i in worst)} expected "
            f"{float(expected[worst]):.6g}, got {float(got_arr[worst]):.6g}"
        )
