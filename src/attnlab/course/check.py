"""Running one exercise's cases against an answer, in the learner's own kernel.

The order is what makes the check hard to fool:

1. every case and its reference are computed first, from a fresh random generator, inside a
   suspended generator (``_vault``): no frame on the answer's call stack holds a
   reference value, and the inputs the references were computed from are private;
2. the answer gets deep copies of the inputs, in a helper frame (``_call_answer``) that
   holds only the answer and those copies, under a time limit (``SIGALRM`` in the main
   thread; no limit elsewhere);
3. what the answer returned becomes plain data (numeric ndarrays) before the vault judges it;
   objects that pretend to be arrays or numbers are refused.

This is a learning aid: code in the same process can always reach memory it should not (for
example through ``gc``). Grades come from :mod:`attnlab.course.grade`, which never judges
inside the student's process.
"""

from __future__ import annotations

import copy
import functools
import signal
import threading
from collections.abc import Generator
from contextlib import contextmanager
from typing import Any

import numpy as np

from attnlab.course.adapters import adapt
from attnlab.course.forbid import ForbiddenCalls, Targets, message, resolve, watching
from attnlab.course.forked import can_fork, run_forked
from attnlab.course.spec import ExerciseFailure, Plain, Spec, judge

#: Set to the sandbox's exchange folder while the grader runs the notebook; ``check`` then
#: runs each answer in a forked child, so a crashing answer costs only its own check. The
#: grader's own evaluation is :mod:`attnlab.course.capture`, after the last cell.
CAPTURE_ENV = "ATTNLAB_CAPTURE"


class CheckTimeout(BaseException):
    """The answer ran past the check's time limit (a ``BaseException``: ``except
    Exception`` in the answer cannot swallow it)."""


class _AnswerError(Exception):
    """The answer raised; ``message`` says what, in one line."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@contextmanager
def time_limit(seconds: float):
    """Raise ``CheckTimeout`` in the main thread after ``seconds``; a no-op elsewhere."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(
        signal, "setitimer"
    ):
        yield
        return

    def _expire(signum: int, frame: Any) -> None:
        raise CheckTimeout

    previous = signal.signal(signal.SIGALRM, _expire)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 1e-3))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def describe_error(error: BaseException) -> str:
    """One line saying how the answer failed."""
    if isinstance(error, NotImplementedError):
        return "not answered yet (the function still raises NotImplementedError)"
    if isinstance(error, ExerciseFailure):
        return str(error)
    try:
        text = str(error)
    except Exception:  # a student exception whose __str__ raises
        text = "?"
    return f"your answer raised {type(error).__name__}: {text}"[:400]


@functools.lru_cache(maxsize=64)
def _resolved(forbid: tuple[str, ...]) -> Targets:
    """:func:`attnlab.course.forbid.resolve`, once per list of names (not once per case)."""
    return resolve(forbid)


def _call_answer(
    adapter: str, answer: Any, args: tuple[Any, ...], forbid: tuple[str, ...] = ()
) -> Plain:
    """Call the answer on ``args`` (already copies): plain result, or ``_AnswerError``.

    A call to one of the functions named in ``forbid`` is an ``_AnswerError`` that says so.
    """
    targets = _resolved(tuple(forbid))  # a bad name is the spec's mistake: raised, not blamed
    calls = ForbiddenCalls()
    try:
        with watching(targets) as calls:
            got = adapt(adapter, answer, args)
    except (KeyboardInterrupt, CheckTimeout):
        raise
    except BaseException as error:  # noqa: BLE001 - the learner's code, SystemExit included
        raise _AnswerError(message(calls) or describe_error(error)) from None
    verdict = message(calls)
    if verdict is not None:
        raise _AnswerError(verdict)
    return got


def _vault(spec: Spec) -> Generator[tuple[Any, ...], Plain, None]:
    """Compute every case first, then hand out copies of inputs and judge each result."""
    cases = list(spec.cases(np.random.default_rng()))
    for case in cases:
        got = yield copy.deepcopy(case.args)
        judge(got, case)


def run_spec(spec: Spec, answer: Any, timeout: float | None = None) -> tuple[bool, str]:
    """Run ``spec`` against ``answer`` in this process; ``(passed, message)``."""
    limit = spec.timeout if timeout is None else timeout
    vault = _vault(spec)
    try:
        args = next(vault)
        with time_limit(limit):
            while True:
                got = _call_answer(spec.adapter, answer, args, spec.forbid)
                args = vault.send(got)
    except StopIteration:
        return True, spec.passed
    except CheckTimeout:
        return False, _too_long(limit)
    except _AnswerError as error:
        return False, error.message
    except ExerciseFailure as failure:
        return False, str(failure)
    finally:
        vault.close()


# ---- while grading: every answer a self-check runs is evaluated in a forked child -------
def _too_long(limit: float) -> str:
    return f"your answer took longer than {limit:g} s (an endless loop?)"


def _child_failure(kind: str, value: Any, limit: float) -> str:
    if kind == "timeout":
        return _too_long(limit)
    if kind == "crash":
        return f"your answer crashed the process evaluating it (signal or status {value})"
    return f"evaluating your answer failed ({value})"


def run_spec_forked(spec: Spec, answer: Any) -> tuple[bool, str]:
    """``run_spec`` in a forked child (while grading): the kernel survives any answer."""
    if not can_fork():
        return run_spec(spec, answer)
    kind, value = run_forked(lambda: list(run_spec(spec, answer)), spec.timeout + 3.0)
    if kind == "ok" and isinstance(value, list) and len(value) == 2:
        return bool(value[0]), str(value[1])
    return False, _child_failure(kind, value, spec.timeout)
