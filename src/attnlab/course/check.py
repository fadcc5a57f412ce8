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
import os
import signal
import threading
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from attnlab.course.adapters import adapt, load_plain, save_plain
from attnlab.course.forked import can_fork, run_forked
from attnlab.course.spec import ExerciseFailure, Plain, Spec, judge

#: When set, ``check`` also runs the answer on the grader's inputs found in this folder
#: (``inputs/NN.k.npz``) and stores the plain results in ``outputs/NN.k.npz``.
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


def _call_answer(adapter: str, answer: Any, args: tuple[Any, ...]) -> Plain:
    """Call the answer on ``args`` (already copies): plain result, or ``_AnswerError``."""
    try:
        return adapt(adapter, answer, args)
    except (KeyboardInterrupt, CheckTimeout):
        raise
    except BaseException as error:  # noqa: BLE001 - the learner's code, SystemExit included
        raise _AnswerError(describe_error(error)) from None


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
                got = _call_answer(spec.adapter, answer, args)
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


# ---- capture: the grader's inputs, evaluated in a child of the sandboxed kernel -------------
def capture(exercise_id: str, answer: Any) -> None:
    """If ``$ATTNLAB_CAPTURE`` is set and holds inputs for ``exercise_id``, store outputs.

    The inputs file is ``{"adapter": str, "timeout": float, "args": [args of each case]}``;
    the outputs file holds one entry per case, ``{"ok": plain}`` or ``{"error": message}``,
    stopping at the first error or at the time limit. The grader judges them.
    """
    folder = os.environ.get(CAPTURE_ENV)
    if not folder:
        return
    source = Path(folder) / "inputs" / f"{exercise_id}.npz"
    try:
        spec = load_plain(source)
        adapter, limit, cases = str(spec["adapter"]), float(spec["timeout"]), spec["args"]
    except (ValueError, KeyError, TypeError):
        return
    out = Path(folder) / "outputs"
    out.mkdir(exist_ok=True)
    target = out / f"{exercise_id}.npz"
    target.unlink(missing_ok=True)

    def evaluate() -> str:
        results: list[dict[str, Any]] = []
        try:
            with time_limit(limit):
                for args in cases:
                    try:
                        results.append({"ok": _call_answer(adapter, answer, copy.deepcopy(args))})
                    except _AnswerError as error:
                        results.append({"error": error.message})
                        break
        except CheckTimeout:
            results.append({"error": _too_long(limit)})
        save_plain(target, results)
        return "saved"

    if not can_fork():
        evaluate()
        return
    kind, value = run_forked(evaluate, limit + 3.0)
    if kind != "ok" and not target.exists():  # the child died or hung: say so in the results
        save_plain(target, [{"error": _child_failure(kind, value, limit)}])


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
