"""A student version of one notebook: solutions out, stubs and self-checks in (the transform).

:func:`~attnlab.course.assign.student_version` turns a solved chapter notebook into the one students
get, and :func:`~attnlab.course.assign.exercises_in` lists its exercises; both work on notebooks in
memory and touch no file. The command that reads and writes folders is
:mod:`attnlab.course.assign` (``python -m attnlab.assign``), which re-exports (and documents) every
name here.

What changes in a student version (and nothing else does):

* Every code cell tagged ``solution`` (and any code cell between ``solution-start`` and
  ``solution-end``) becomes a stub: its imports and the signature and docstring of each
  function or class it defines are kept, each body becomes ``# YOUR CODE HERE`` plus
  ``raise NotImplementedError``; a cell that defines no function becomes that stub alone.
* Solution prose goes: every markdown cell tagged ``solution`` (the notebooks' plain markup,
  :mod:`attnlab.course.markup`: ``**Solution NN.k**`` and the prose after it) and, in the
  older directive markup, the ``solution-start`` / ``solution-end`` fences, every markdown
  cell between them, and every one-piece ``{solution}`` block.
* Outputs and execution counts are cleared.

Self-check cells (``assert check("05.2", answer)``) are untouched: they now fail until the
student answers.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field

import nbformat

from attnlab.course.markup import exercise_head, label_for, solution_head
from attnlab.course.stubs import STUB_COMMENT, STUB_RAISE, stub_source

__all__ = [
    "SOLUTION_TAG",
    "ANSWER_TAG",
    "STUB_COMMENT",
    "STUB_RAISE",
    "stub_source",
    "student_version",
    "Exercise",
    "check_ids_in",
    "exercises_in",
]

SOLUTION_TAG = "solution"
ANSWER_TAG = "answer"

# Any indentation: a directive may sit inside a list item (a solution there must go too).
_DIRECTIVE = re.compile(r"^\s*(?P<fence>`{3,}|:{3,})\s*\{(?P<name>[\w-]+)\}\s*(?P<arg>.*)$")
_LABEL = re.compile(r"^\s*:label:\s*(?P<label>\S+)\s*$")
_CHECK_CALL = re.compile(r"\bcheck\(\s*(?P<quote>['\"])(?P<id>\d{2}\.\d+)(?P=quote)")

_NOTE = (
    "**Student version.** Each exercise's solution has been replaced by `{comment}` and "
    "`{raise_}`: write your answer there, then run the cell after it, which calls "
    "`check(...)` and tells you whether your answer behaves like the reference on fresh "
    "random cases (and, if not, on which input it differs)."
)
_SUBMIT = (
    "\n\n**How to submit.** Hand in this notebook as `{name}`, the name the grader looks "
    "for (a copy your browser renamed, such as `{stem} (1).ipynb`, is still matched to this "
    "assignment but flagged). The grader runs the notebook from top to bottom in a fresh "
    "kernel and then calls the functions the exercises name on inputs of its own, so keep "
    "their names and signatures, and check that *Run All* works; deleting or editing a "
    "`check(...)` cell changes nothing, and neither do files the notebook writes."
)


# ---- markdown cells -------------------------------------------------------------------------
def _closing_fence(lines: list[str], start: int, fence: str) -> int:
    """Index of the line closing the fence opened on ``lines[start]`` (last line if none)."""
    closing = re.compile(rf"^\s*{re.escape(fence[0])}{{{len(fence)},}}\s*$")
    for i in range(start + 1, len(lines)):
        if closing.match(lines[i]):
            return i
    return len(lines) - 1


def _strip_solution_markdown(text: str, inside: bool) -> tuple[str, bool]:
    """Remove solution fences and the prose inside solution blocks from one markdown cell.

    ``inside`` says whether the cell starts inside a ``solution-start`` block; the second
    return value says whether it ends inside one.
    """
    lines = text.splitlines()
    kept: list[str] = []
    i = 0
    while i < len(lines):
        match = _DIRECTIVE.match(lines[i])
        if match and match["name"] in ("solution", "solution-start", "solution-end"):
            if match["name"] == "solution-start":
                inside = True
            elif match["name"] == "solution-end":
                inside = False
            i = _closing_fence(lines, i, match["fence"]) + 1
            continue
        if not inside:
            kept.append(lines[i])
        i += 1
    return "\n".join(kept).strip("\n"), inside


# ---- whole notebooks ------------------------------------------------------------------------
def _tags(cell: nbformat.NotebookNode) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def _clear(cell: nbformat.NotebookNode) -> None:
    if cell.cell_type == "code":
        cell.outputs = []
        cell.execution_count = None
    cell.metadata.pop("execution", None)


def student_version(
    nb: nbformat.NotebookNode, filename: str | None = None
) -> nbformat.NotebookNode:
    """A student copy of ``nb``: solutions stubbed, solution prose removed, outputs cleared.

    A note after the title says how to work in it; given the notebook's ``filename``, it
    also says how to submit it and under which name.

    Raises
    ------
    ValueError
        If a ``solution-start`` block is never closed by ``solution-end`` (the rest of the
        notebook, self-checks included, would otherwise vanish); if two exercises share a
        label; or if a ``check("NN.k", ...)`` cell has no solution code cell of exercise
        ``ex-NN-k`` before it to stub (an untagged solution would reach students as it is).
    """
    student = copy.deepcopy(nb)
    cells = []
    inside = False
    opened_at = -1
    for index, cell in enumerate(student.cells):
        if cell.cell_type == "markdown":
            if SOLUTION_TAG in _tags(cell):  # a solution's prose in the plain markup
                continue
            was_inside = inside
            cell.source, inside = _strip_solution_markdown(cell.source, inside)
            if inside and not was_inside:
                opened_at = index
            _clear(cell)
            if cell.source.strip():
                cells.append(cell)
        elif cell.cell_type == "code":
            tags = _tags(cell)
            if SOLUTION_TAG in tags or inside:
                cell.source = stub_source(cell.source)
                tags = [t for t in tags if t != SOLUTION_TAG] + [ANSWER_TAG]
                cell.metadata["tags"] = tags
            _clear(cell)
            cells.append(cell)
        elif not inside:  # raw cells outside solutions stay
            cells.append(cell)
    if inside:
        raise ValueError(
            f"cell {opened_at} opens a solution-start block that no solution-end closes"
        )
    _check_exercises(nb)
    text = _NOTE.format(comment=STUB_COMMENT, raise_=STUB_RAISE)
    if filename is not None:
        text += _SUBMIT.format(name=filename, stem=filename.removesuffix(".ipynb"))
    note = nbformat.v4.new_markdown_cell(text, id="attnlab-student-note")
    if (student.nbformat, student.nbformat_minor) < (4, 5):  # cell ids came with nbformat 4.5
        del note["id"]
    first_is_title = bool(cells) and cells[0].cell_type == "markdown"
    cells.insert(1 if first_is_title else 0, note)
    student.cells = cells
    return student


@dataclass
class Exercise:
    """One exercise of a notebook, as found by ``exercises_in``."""

    label: str
    title: str
    solution_code_cells: int = 0
    check_ids: list[str] = field(default_factory=list)

    @property
    def kind(self) -> str:
        """``"code"`` if the solution has code cells, else ``"written"``."""
        return "code" if self.solution_code_cells else "written"


def check_ids_in(source: str) -> list[str]:
    """Exercise ids of the ``check("NN.k", ...)`` calls in a code cell's source, in order.

    Examples
    --------
    >>> check_ids_in('assert check("05.2", heads)\\ncheck(\\'05.3\\', w_o)')
    ['05.2', '05.3']
    """
    return [m["id"] for m in _CHECK_CALL.finditer(source)]


def _label_after(lines: list[str], directive: int) -> str:
    """The ``:label:`` in the option lines after the directive on ``lines[directive]``."""
    options = lines[directive + 1 : directive + 6]
    return next((m["label"] for m in map(_LABEL.match, options) if m), "")


def exercises_in(nb: nbformat.NotebookNode) -> list[Exercise]:
    """The exercises of a notebook: label, title, solution code cells and self-check ids.

    A check id ``"NN.k"`` belongs to the exercise labelled ``ex-NN-k`` (the book's
    convention); a solution belongs to the label named after ``solution-start``.
    """
    found: dict[str, Exercise] = {}
    inside = False
    current = ""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            if head := exercise_head(cell.source):  # the plain markup (attnlab.course.markup)
                found.setdefault(label_for(head[0]), Exercise(label_for(head[0]), " · ".join(head)))
            if solved := solution_head(cell.source):
                current, inside = label_for(solved), False
            lines = cell.source.splitlines()
            for i, line in enumerate(lines):
                match = _DIRECTIVE.match(line)
                if not match:
                    continue
                name = match["name"]
                if name in ("exercise", "exercise-start"):
                    label = _label_after(lines, i)
                    if label:
                        found.setdefault(label, Exercise(label, match["arg"].strip()))
                elif name in ("solution-start", "solution"):
                    current = match["arg"].split()[0] if match["arg"].split() else ""
                    inside = name == "solution-start"
                elif name == "solution-end":
                    inside = False
        elif cell.cell_type == "code":
            if (SOLUTION_TAG in _tags(cell) or inside) and current in found:
                found[current].solution_code_cells += 1
            for exercise_id in check_ids_in(cell.source):
                chapter, number = exercise_id.split(".")
                label = f"ex-{chapter}-{number}"
                exercise = found.setdefault(label, Exercise(label, ""))
                if exercise_id not in exercise.check_ids:
                    exercise.check_ids.append(exercise_id)
    return list(found.values())


def _exercise_labels(nb: nbformat.NotebookNode) -> list[str]:
    """The ``:label:`` of every exercise directive of ``nb``, in order, repeats included."""
    labels = []
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        if head := exercise_head(cell.source):
            labels.append(label_for(head[0]))
        lines = cell.source.splitlines()
        for i, line in enumerate(lines):
            match = _DIRECTIVE.match(line)
            if match and match["name"] in ("exercise", "exercise-start"):
                label = _label_after(lines, i)
                if label:
                    labels.append(label)
    return labels


def _check_exercises(nb: nbformat.NotebookNode) -> None:
    """Refuse a notebook whose student version would be wrong (see ``student_version``)."""
    labels = _exercise_labels(nb)
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:
        raise ValueError(
            f"exercise label {repeated[0]} is used more than once: renumber the copy"
        )
    for exercise in exercises_in(nb):
        if not exercise.check_ids or exercise.solution_code_cells:
            continue
        call = f'check("{exercise.check_ids[0]}", ...)'
        if exercise.label not in labels:
            raise ValueError(
                f"{call} checks exercise {exercise.label}, which this notebook does not "
                f"declare (exercise ex-NN-k is checked under the id NN.k)"
            )
        raise ValueError(
            f"{call}: exercise {exercise.label} has no solution code cell to stub: tag the "
            f"cell that computes the answer '{SOLUTION_TAG}' (or put it between "
            "solution-start and solution-end), or students would receive the answer"
        )

