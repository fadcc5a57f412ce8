"""One specification per exercise, shared by ``check`` (learner's kernel) and the grader.

An exercise spec is a generator function ``cases(rng)`` that yields :class:`Case` objects:
the *inputs* handed to the answer (plain numpy arrays and numbers), the *reference* computed
from private copies of those inputs before any answer runs, and how to judge what the answer
returned. The answer is called through an *adapter* (``"call"``: ``answer(*args)``;
``"value"``: the answer is the value itself; and a few named ones for answers that take a
torch module or return an object) whose output is converted to plain data by
:func:`to_plain` before any comparison. Nothing the answer returns is ever asked to compare
itself: objects whose ``__eq__`` or ``__array__`` lie are refused.

Common mistakes are *hints*: alternative wrong outputs computed from the same inputs. When
the answer fails a case and its output matches a hint's value, the verdict names the mistake
instead of printing the first differing entry.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: Exercise ids are the chapter number (two digits), a dot and the exercise number.
EXERCISE_ID = re.compile(r"^(?P<chapter>\d{2})\.(?P<number>[1-9]\d*)$")

#: The largest array an answer may return (elements), so a hog cannot exhaust memory here.
MAX_ELEMENTS = 20_000_000
_NUMERIC_KINDS = "biuf"


class ExerciseFailure(AssertionError):
    """Raised by a check when the answer behaves differently from the reference."""


Plain = Any  # np.ndarray | None | tuple[Plain, ...] | dict[str, Plain]
Judge = Callable[[Plain, "Case"], None]


@dataclass(frozen=True)
class Case:
    """One test case of an exercise.

    ``args`` are handed (as copies) to the adapter; ``expected`` and ``private`` are the
    grader's and never reach the answer. ``judge(got, case)`` raises ``ExerciseFailure``;
    ``hints`` maps a message naming a common mistake to the output that mistake produces.
    """

    args: tuple[Any, ...]
    expected: Any
    on: str
    judge: Judge | None = None
    hints: Mapping[str, Any] = field(default_factory=dict)
    private: Any = None
    atol: float = 1e-8
    rtol: float = 1e-6


@dataclass(frozen=True)
class Spec:
    """A registered exercise: its id, case generator, adapter and passing message.

    ``answer`` names what the student defines (``"stable_softmax"``): the grader looks that
    name up in the kernel after the notebook ran and evaluates it itself.
    """

    exercise_id: str
    cases: Callable[[np.random.Generator], Iterator[Case]]
    passed: str
    adapter: str = "call"
    timeout: float = 20.0
    answer: str | None = None
    forbid: tuple[str, ...] = ()


_SPECS: dict[str, Spec] = {}

#: A spec registered from a module under this package forbids that whole module to the answer.
EXERCISE_MODULES = "attnlab.exercises."


def exercise(
    exercise_id: str, *, passed: str, adapter: str = "call", timeout: float = 20.0,
    answer: str | None = None, forbid: tuple[str, ...] = (),
) -> Callable[[Callable[[np.random.Generator], Iterator[Case]]], Spec]:
    """Register the decorated case generator as the spec of ``exercise_id``.

    ``answer`` is the name the student's notebook defines (a function, or a value for the
    ``"value"`` adapter); the grader calls it after the notebook ran. Without it the grader
    uses the name passed to ``check("NN.k", name)`` in the assigned notebook.

    ``forbid`` names the library functions the answer may not call (dotted names such as
    ``"attnlab.softmax"``): the exercise asks for what they compute, and a call to one of them
    fails the case with a message that says so (:mod:`attnlab.course.forbid`). A spec
    defined in a module of ``attnlab.exercises`` also forbids that module: the answer may not
    call the check's own reference functions.

    Re-registering the same function (same module and name, e.g. a re-run notebook cell)
    replaces it; a different function under a taken id raises ``ValueError``.
    """
    if EXERCISE_ID.match(exercise_id) is None:
        raise ValueError(f"exercise id must look like 'NN.k', got {exercise_id!r}")
    if answer is not None and not (isinstance(answer, str) and answer.isidentifier()):
        raise ValueError(f"answer must be a Python name, got {answer!r}")
    if not isinstance(forbid, tuple) or not all(isinstance(n, str) and "." in n for n in forbid):
        raise ValueError(f"forbid must be a tuple of dotted names, got {forbid!r}")

    def decorate(fn: Callable[[np.random.Generator], Iterator[Case]]) -> Spec:
        previous = _SPECS.get(exercise_id)
        origin = (getattr(fn, "__module__", "?"), getattr(fn, "__qualname__", "?"))
        if previous is not None:
            old = (getattr(previous.cases, "__module__", "?"), previous.cases.__qualname__)
            if old != origin:
                raise ValueError(
                    f"exercise {exercise_id!r} is registered twice: by {'.'.join(old)}"
                    f" and by {'.'.join(origin)}"
                )
        module = getattr(fn, "__module__", "")
        # an answer may never call the exercise module's own code (its reference solutions)
        own = (module,) if module.startswith(EXERCISE_MODULES) and module not in forbid else ()
        spec = Spec(exercise_id, fn, passed, adapter, timeout, answer, (*forbid, *own))
        _SPECS[exercise_id] = spec
        return spec

    return decorate


def get_spec(exercise_id: str) -> Spec | None:
    """The registered spec of ``exercise_id``, or ``None``."""
    return _SPECS.get(exercise_id)


def spec_ids() -> list[str]:
    """Ids with a registered spec (chapter modules must be imported first)."""
    return sorted(_SPECS)


# ---- plain data -----------------------------------------------------------------------------
def _plain_array(arr: np.ndarray, what: str) -> np.ndarray:
    out = np.array(arr, copy=True, subok=False)
    if type(out) is not np.ndarray or out.dtype.kind not in _NUMERIC_KINDS:
        raise ExerciseFailure(f"expected numbers, got an array of dtype {out.dtype} ({what})")
    if out.size > MAX_ELEMENTS:
        raise ExerciseFailure(f"the answer returned {out.size} numbers, more than allowed")
    return out


def to_plain(obj: Any, depth: int = 0) -> Plain:
    """``obj`` as plain data: a numeric ndarray, ``None``, or tuples/dicts of those.

    Accepted: numpy arrays and scalars, Python ``bool``/``int``/``float`` (exact types),
    CPU torch tensors, and lists/tuples/str-keyed dicts of those. Anything else, including
    subclasses of numbers and objects that only pretend to be arrays, is refused with an
    ``ExerciseFailure``: no method of the answer's objects runs during a comparison.
    """
    if depth > 4:
        raise ExerciseFailure("the answer is nested too deeply")
    kind = type(obj)
    if obj is None:
        return None
    if kind in (bool, int, float):
        if kind is int and abs(obj) > 2**62:
            raise ExerciseFailure("the answer is an integer too large to compare")
        return np.asarray(obj)
    if isinstance(obj, np.ndarray):
        return _plain_array(np.ndarray.view(obj, np.ndarray), kind.__name__)
    if kind.__module__ == "numpy" and isinstance(obj, np.generic):
        return _plain_array(np.asarray(obj), kind.__name__)
    torch = sys.modules.get("torch")
    if torch is not None and kind in (torch.Tensor, torch.nn.Parameter):
        return _plain_array(torch.Tensor.numpy(obj.detach().cpu()), "a torch tensor")
    if kind in (list, tuple):
        if len(obj) > 100_000:
            raise ExerciseFailure("the answer is a list too long to compare")
        return tuple(to_plain(item, depth + 1) for item in obj)
    if kind is dict and all(type(k) is str for k in obj):
        return {k: to_plain(v, depth + 1) for k, v in obj.items()}
    raise ExerciseFailure(f"expected an array of numbers, got {kind.__name__}")


def as_array(got: Plain, on: str, dtype: Any = np.float64) -> np.ndarray:
    """Plain data as one array of ``dtype`` (a list of numbers or of equal-shape rows)."""
    if got is None:
        raise ExerciseFailure(f"on {on}: your answer returned None (a missing return?)")
    if isinstance(got, dict):
        raise ExerciseFailure(f"on {on}: expected an array of numbers, got a dict")
    try:
        arr = np.asarray(got if isinstance(got, np.ndarray) else _stack(got))
        return arr.astype(dtype, copy=False)
    except (TypeError, ValueError):
        raise ExerciseFailure(f"on {on}: expected an array of numbers, got a ragged list") from None


def _stack(items: tuple[Plain, ...]) -> np.ndarray:
    parts = [item if isinstance(item, np.ndarray) else _stack(item) for item in items]
    if any(p is None or isinstance(p, dict) for p in parts):
        raise TypeError("not numbers")
    return np.array(parts)


# ---- judges ---------------------------------------------------------------------------------
def _mismatch(got: np.ndarray, expected: np.ndarray, atol: float, rtol: float) -> str | None:
    if got.shape != expected.shape:
        return f"expected an array of shape {expected.shape}, got shape {got.shape}"
    if np.allclose(got, expected, atol=atol, rtol=rtol, equal_nan=False):
        return None
    diff = np.atleast_1d(np.abs(got - expected))
    diff[np.isnan(diff)] = np.inf  # a NaN is the worst possible mismatch
    worst = np.unravel_index(np.argmax(diff), diff.shape)
    if expected.ndim == 0:
        return f"expected {float(expected):.6g}, got {float(got):.6g}"
    return (
        f"at index {tuple(int(i) for i in worst)} expected {float(expected[worst]):.6g}, "
        f"got {float(got[worst]):.6g}"
    )


def expect_close(
    got: Any, expected: Any, *, on: str, atol: float = 1e-8, rtol: float = 1e-6
) -> None:
    """Raise ``ExerciseFailure`` unless ``got`` matches ``expected`` (shape and values).

    Examples
    --------
    >>> expect_close([1.0, 2.0], np.array([1.0, 2.0]), on="x = [1, 2]")
    >>> expect_close([1.0, 2.5], np.array([1.0, 2.0]), on="x = [1, 2]")
    Traceback (most recent call last):
    ...
    attnlab.course.spec.ExerciseFailure: on x = [1, 2]: at index (1,) expected 2, got 2.5
    """
    got_arr = as_array(to_plain(got), on)
    problem = _mismatch(got_arr, np.asarray(expected, dtype=np.float64), atol, rtol)
    if problem is not None:
        raise ExerciseFailure(f"on {on}: {problem}")


def close(got: Plain, case: Case) -> None:
    """The default judge: ``got`` equals ``case.expected`` within the case's tolerances."""
    expect_close(got, case.expected, on=case.on, atol=case.atol, rtol=case.rtol)


def mask_equal(got: Plain, case: Case) -> None:
    """Judge for boolean masks: dtype bool, exact shape and entries."""
    if not isinstance(got, np.ndarray) or got.dtype != np.bool_:
        dtype = got.dtype if isinstance(got, np.ndarray) else type(got).__name__
        raise ExerciseFailure(f"on {case.on}: a mask must be boolean, got dtype {dtype}")
    expected = case.expected
    if got.shape != expected.shape:
        raise ExerciseFailure(f"on {case.on}: expected shape {expected.shape}, got {got.shape}")
    wrong = np.argwhere(got != expected)
    if len(wrong):
        where = tuple(int(i) for i in wrong[0])
        raise ExerciseFailure(
            f"on {case.on}: at index {where} expected {bool(expected[where])} (True = may "
            f"attend), got {bool(got[where])}"
        )


def matches(got: Plain, value: Any, atol: float = 1e-8, rtol: float = 1e-6) -> bool:
    """Whether plain ``got`` equals ``value`` (used to recognise a hint's wrong output)."""
    try:
        got_arr = as_array(got, "hint")
        value_arr = np.asarray(value, dtype=np.float64)
    except ExerciseFailure:
        return False
    if got_arr.shape != value_arr.shape:
        return False
    return bool(np.allclose(got_arr, value_arr, atol=atol, rtol=rtol, equal_nan=True))


def judge(got: Plain, case: Case) -> None:
    """Run the case's judge on plain ``got``; on failure, name a recognised mistake."""
    try:
        (case.judge or close)(got, case)
    except ExerciseFailure:
        tolerance = {"atol": case.atol, "rtol": max(case.rtol, 1e-6)}
        for message, wrong in case.hints.items():
            if matches(case.expected, wrong, **tolerance):
                continue  # on this case the mistake gives the right output: it cannot be it
            if matches(got, wrong, **tolerance):
                raise ExerciseFailure(f"on {case.on}: {message}") from None
        raise
