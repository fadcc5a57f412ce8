"""What the sandboxed grading tests share (``test_grade``, ``test_course_grade``,
``test_course_rootless``): the fixture assignment, its notebooks, the sandbox they need, and
the cell with which an attacking student counts what it reached outside its sandbox."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from attnlab.course import sandbox

COURSEWORK = Path(__file__).parent / "fixtures" / "coursework"
NAME = "softmax_hw.ipynb"
HEADER = "import hw_checks  # noqa: F401\nimport numpy as np\n\nfrom attnlab.exercises import check"
SOFTMAX = (
    "def stable_softmax(x):\n"
    "    z = np.exp(x - x.max(axis=-1, keepdims=True))\n"
    "    return z / z.sum(axis=-1, keepdims=True)"
)


def notebook(*sources: str) -> nbformat.NotebookNode:
    """A submission of the fixture assignment: its header cell, then one code cell a source."""
    return new_notebook(cells=[new_code_cell(s) for s in (HEADER, *sources)])


def require_sandbox() -> None:
    """Skip (fail under CI=true) when this machine cannot run the grader's sandbox."""
    ok, why = sandbox.availability()
    if not ok:
        if os.environ.get("CI") == "true":
            pytest.fail(f"no grading sandbox under CI: {why}")
        pytest.skip(f"no grading sandbox here ({why}); run scripts/ensure_sandbox.sh as root")


def count_reached(attempts: Sequence[str], roots: Sequence[str]) -> str:
    """Notebook code that sets ``found``: how many of ``attempts`` (Python expressions, each
    one thing a sandbox must forbid) ran without raising, plus how many files named like the
    assignment's notebook (a classmate's) it sees below the folders ``roots``.

    A spy answers ``log(4) + found``, so its grade says whether the sandbox held.
    """
    tries = ",\n                ".join(f"lambda: {attempt}" for attempt in attempts)
    return f"""found = 0
for attempt in ({tries}):
    try:
        attempt()
        found += 1
    except Exception:
        pass
for root in {tuple(roots)!r}:
    for folder, _, files in os.walk(root):
        found += sum(f == {NAME!r} for f in files)
"""
