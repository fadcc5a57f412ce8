"""The registry behind :func:`attnlab.exercises.check`."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from typing import Any

import numpy as np

_CHECKS: dict[str, Callable[[Any], str]] = {}


class ExerciseFailure(AssertionError):
    """Raised by a check when the answer behaves differently from the reference."""


def register(exercise_id: str) -> Callable[[Callable[[Any], str]], Callable[[Any], str]]:
    """Register ``fn`` as the check of ``exercise_id`` (``"NN.k"``, chapter and number).

    A check takes the learner's answer, raises :class:`ExerciseFailure` with a helpful
    message when it is wrong, and returns a one-line description of what it verified.
    """

    def decorate(fn: Callable[[Any], str]) -> Callable[[Any], str]:
        if exercise_id in _CHECKS:
            raise ValueError(f"exercise {exercise_id!r} is registered twice")
        _CHECKS[exercise_id] = fn
        return fn

    return decorate


def _load_chapters() -> None:
    """Import every ``chNN`` module of this package so that its checks register themselves."""
    package = importlib.import_module("attnlab.exercises")
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("ch"):
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
        If ``exercise_id`` has no check.
    """
    _load_chapters()
    if exercise_id not in _CHECKS:
        raise ValueError(
            f"no check for exercise {exercise_id!r}; known: {', '.join(sorted(_CHECKS))}"
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
        message = verdict
        passed = True
    if verbose:
        mark = "passed" if passed else "not yet"
        print(f"Exercise {exercise_id}: {mark}. {message}")
    return passed


def expect_close(
    got: Any, expected: np.ndarray, *, on: str, atol: float = 1e-8, rtol: float = 1e-6
) -> None:
    """Raise :class:`ExerciseFailure` unless ``got`` matches ``expected`` (shape and values).

    ``on`` describes the input in words, so the message says where the answer went wrong.
    """
    got_arr = np.asarray(got)
    if got_arr.shape != expected.shape:
        raise ExerciseFailure(
            f"on {on}: expected an array of shape {expected.shape}, got shape {got_arr.shape}"
        )
    if not np.allclose(got_arr, expected, atol=atol, rtol=rtol):
        worst = np.unravel_index(np.argmax(np.abs(got_arr - expected)), expected.shape)
        raise ExerciseFailure(
            f"on {on}: at index {tuple(int(i) for i in worst)} expected "
            f"{float(expected[worst]):.6g}, got {float(got_arr[worst]):.6g}"
        )
