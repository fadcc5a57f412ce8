"""The grader's own call of each answer, in the sandboxed kernel after the notebook ran.

The runner (:mod:`attnlab.course.runner`) executes this module's :func:`evaluate` as one last
cell, once every cell of the notebook has run, after writing the grader's inputs to a folder
of a fresh random name. For each exercise it looks up the answer by the name the spec gives
(``stable_softmax``; then the names the assigned and the submitted check cells pass to
``check``), calls it on the inputs through the spec's adapter in a forked child with its own
time limit, and stores the plain results. Whether the notebook ever called ``check`` does
not matter. Code of the notebook may have changed this module in its kernel: that can only
spoil its own results, since pass or fail is decided by the grader from the numbers, on
inputs that did not exist while the notebook's cells ran.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

from attnlab.course.adapters import load_plain, save_plain
from attnlab.course.check import (
    CheckTimeout,
    _AnswerError,
    _call_answer,
    _child_failure,
    _too_long,
    time_limit,
)
from attnlab.course.forked import can_fork, run_forked

_MISSING = object()


def _namespace() -> dict[str, Any]:
    """The notebook's global names (IPython's user namespace, else ``__main__``)."""
    try:
        from IPython import get_ipython

        shell = get_ipython()
    except ImportError:  # pragma: no cover - the runner always uses an IPython kernel
        shell = None
    return shell.user_ns if shell is not None else vars(sys.modules["__main__"])


def _evaluate_one(answer: Any, adapter: str, limit: float, cases: list[Any],
                  forbid: tuple[str, ...] = ()) -> list[dict]:
    results: list[dict[str, Any]] = []
    try:
        with time_limit(limit):
            for args in cases:
                try:
                    results.append({"ok": _call_answer(adapter, answer, copy.deepcopy(args),
                                                         forbid)})
                except _AnswerError as error:
                    results.append({"error": error.message})
                    break
    except CheckTimeout:
        results.append({"error": _too_long(limit)})
    return results


def evaluate(folder: str) -> None:
    """Evaluate every ``inputs/NN.k.npz`` of ``folder``; write ``outputs/NN.k.npz``.

    An input file is ``{"adapter", "timeout", "names": [names to try], "args": [...]}``; an
    output file is ``{"name": the name found or "", "cases": ({"ok": plain} | {"error": text},
    ...)}``, one entry per case up to the first error or the time limit.
    """
    root = Path(folder)
    namespace = _namespace()
    for source in sorted((root / "inputs").glob("*.npz")):
        target = root / "outputs" / source.name
        try:
            request = load_plain(source)
            adapter, limit = str(request["adapter"]), float(request["timeout"])
            names, cases = [str(n) for n in request["names"]], list(request["args"])
            forbid = tuple(str(n) for n in request.get("forbid", ()))
        except (ValueError, KeyError, TypeError):
            continue
        name = next((n for n in names if namespace.get(n, _MISSING) is not _MISSING), "")
        if not name:
            shown = " or ".join(f"`{n}`" for n in names) or "(no name given)"
            save_plain(target, {"name": "", "cases": ({"error": f"the notebook defines no "
                                                                f"{shown}"},)})
            continue
        answer = namespace[name]
        if not can_fork():
            save_plain(target, {"name": name, "cases": tuple(_evaluate_one(answer, adapter,
                                                                            limit, cases,
                                                                            forbid))})
            continue

        def child(answer: Any = answer, name: str = name, adapter: str = adapter,
                  limit: float = limit, cases: list = cases, target: Path = target,
                  forbid: tuple[str, ...] = forbid) -> str:
            found = _evaluate_one(answer, adapter, limit, cases, forbid)
            save_plain(target, {"name": name, "cases": tuple(found)})
            return "saved"

        kind, value = run_forked(child, limit + 3.0)
        if kind != "ok" and not target.exists():  # the child died or hung: say so
            save_plain(target, {"name": name, "cases": ({"error": _child_failure(kind, value,
                                                                                  limit)},)})
