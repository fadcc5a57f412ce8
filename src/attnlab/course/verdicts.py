"""Reading what a sandbox sends back: results, the run's report, cell numbers (untrusted).

Everything here takes bytes or JSON that came out of a sandbox, where the student's code
ran: each function refuses anything malformed, bounds what it unpacks, and never lets a
failure to decode pass an exercise. :mod:`attnlab.course.grade` uses them.
"""

from __future__ import annotations

import base64
import io
import json
import re
import zipfile
from collections.abc import Iterable

import nbformat
import numpy as np

from attnlab.course.adapters import MAX_NPZ_BYTES, _decode
from attnlab.course.spec import Case, ExerciseFailure, Spec, judge


def _load_result(blob: object) -> tuple:
    """Decode one base64 ``.npz`` from the sandbox: a tuple of ``{"ok"|"error": ...}``."""
    if not isinstance(blob, str) or len(blob) > MAX_NPZ_BYTES * 4 // 3 + 4:
        raise ValueError("missing or too large")
    raw = base64.b64decode(blob, validate=True)
    with zipfile.ZipFile(io.BytesIO(raw)) as archive:  # no zip bomb: sizes before reading
        members = archive.infolist()
        if len(members) > 10_000 or sum(m.file_size for m in members) > 4 * MAX_NPZ_BYTES:
            raise ValueError("too large once unpacked")
    with np.load(io.BytesIO(raw), allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    tree = arrays.pop("__tree__")
    results = _decode(json.loads(str(tree)), arrays)
    if isinstance(results, dict):  # {"name": the name evaluated, "cases": (...)}
        results = results.get("cases")
    if not isinstance(results, tuple) or not all(isinstance(r, dict) for r in results):
        raise ValueError("malformed")
    return results


def _verdict(spec: Spec, cases: list[Case], blob: object) -> tuple[bool, str]:
    """Judge the sandbox's results of one exercise against the grader's references."""
    try:
        results = _load_result(blob)
    except Exception as error:  # untrusted bytes: any decoding failure is a failed exercise
        return False, f"the answer's results could not be read ({type(error).__name__})"
    if not results:
        return False, "the answer's results are empty"
    for index, case in enumerate(cases):
        if index >= len(results):
            return False, f"the answer stopped before case {index + 1} of {len(cases)}"
        result = results[index]
        if "error" in result:
            return False, str(result["error"])
        try:
            judge(result.get("ok"), case)
        except ExerciseFailure as failure:
            return False, str(failure)
        except Exception as error:  # numbers a judge cannot use (wrong nesting, strings)
            return False, f"the answer's results could not be judged ({type(error).__name__})"
    return True, spec.passed


def _evaluated_name(blob: object) -> str:
    """The name the sandbox says it evaluated ("" if none or unreadable; a flag only)."""
    try:
        raw = base64.b64decode(str(blob), validate=True)
        with np.load(io.BytesIO(raw), allow_pickle=False) as data:
            tree = json.loads(str(data["__tree__"]))
        name = tree["d"]["name"]["s"]
        return name if isinstance(name, str) and name.isidentifier() else ""
    except Exception:  # untrusted bytes: no name
        return ""


def _indices(value: object) -> list[int]:
    items = value if isinstance(value, list) else list(value) if isinstance(value, dict) else []
    return sorted({int(i) for i in items if str(i).isdigit()})


def code_cell_numbers(nb: nbformat.NotebookNode) -> dict[int, int]:
    """Cell index → its number as JupyterLab shows it after Run All: code cells from 1."""
    numbers, count = {}, 0
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            count += 1
            numbers[index] = count
    return numbers


def _cells(indices: Iterable[int], numbers: dict[int, int]) -> str:
    """``code cell 4`` or ``code cells 4, 6`` (JupyterLab's numbers)."""
    shown = [str(numbers.get(i, i + 1)) for i in sorted(set(indices))]
    return ("code cell " if len(shown) == 1 else "code cells ") + ", ".join(shown)


def _run_text(report: dict, numbers: dict[int, int], timeout: float,
              cell_timeout: float | None) -> str:
    """How the run went, in one line, cells numbered as JupyterLab numbers them."""
    run = report.get("run")
    run = str(run) if isinstance(run, str) else "unknown"
    skipped = report.get("skipped") if isinstance(report.get("skipped"), dict) else {}
    errors = report.get("errors") if isinstance(report.get("errors"), dict) else {}
    timeouts, truncated = _indices(report.get("timeouts")), _indices(report.get("truncated"))
    hung = [i for i in _indices(skipped) if "interrupt" in str(skipped[str(i)])]
    killed = [i for i in _indices(skipped) if i not in hung]
    limit = cell_timeout or timeout
    parts = [run]
    if timeouts:
        parts.append(f"timeout in {_cells(timeouts, numbers)} (limit {limit:g} s"
                     + (", ignored the interrupt: skipped" if hung else ", interrupted") + ")")
    if killed:
        parts.append(f"kernel died in {_cells(killed, numbers)} (skipped, the other "
                     "cells re-ran in a fresh kernel)")
    crashed = [i for i in _indices(errors) if i not in timeouts]
    if crashed:
        parts.append(f"errors in {_cells(crashed, numbers)}")
    stopped = report.get("stopped_at")
    if isinstance(stopped, int):
        parts.append(f"notebook time limit ({timeout:g} s) reached: code cells from "
                     f"{numbers.get(stopped, stopped + 1)} on not run")
    if truncated:
        parts.append(f"output of {_cells(truncated, numbers)} truncated")
    if report.get("evaluation"):
        parts.append(str(report["evaluation"]))
    return "; ".join(parts)


def _defining_cell(nb: nbformat.NotebookNode, name: str, numbers: dict[int, int]) -> str:
    """The number of the last code cell that defines ``name`` at its top level ("" if none)."""
    pattern = re.compile(rf"^(?:(?:async\s+)?def|class)\s+{re.escape(name)}\b|^{re.escape(name)}"
                         rf"\s*(?::[^=]*)?=(?!=)", re.MULTILINE)
    found = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and
             pattern.search(c.source)]
    return str(numbers[found[-1]]) if found else ""
