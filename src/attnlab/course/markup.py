"""The notebooks' exercise markup: plain Markdown in Jupyter, sphinx-exercise in the book.

An exercise is one markdown cell, tagged ``exercise``, whose first line is its number and
title in bold::

    **Exercise 05.1 · Concatenating the heads**

    Write `concat_heads(x)` that ... Check it with `check("05.1", concat_heads)`.

Its solution is a run of consecutive cells tagged ``solution``. The first is a markdown cell
whose first line is ``**Solution 05.1**`` (prose may follow it); then any markdown and code
cells, each tagged ``solution``. The run ends at the first cell without the tag. JupyterLab,
Colab and any CommonMark renderer show this as it reads: a bold heading, text, rendered maths.

The book reads the same cells through :func:`to_directives` (called by the Sphinx extension
``book/_ext/attnlab_exercises.py`` before MyST parses a notebook), which writes the
sphinx-exercise directives the book always used: ``{exercise}`` with ``:label: ex-05-1`` and
``:nonumber:`` (the number is in the title), then a gated ``{solution-start}`` with
``:class: dropdown`` and a ``{solution-end}`` after the run's last cell. The label is the
number's: exercise ``NN.k`` is ``ex-NN-k``, the id that ``check("NN.k", ...)`` uses.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = [
    "EXERCISE_TAG",
    "SOLUTION_TAG",
    "EXERCISE_HEAD",
    "SOLUTION_HEAD",
    "MarkupError",
    "Block",
    "label_for",
    "cell_text",
    "cell_tags",
    "exercise_head",
    "solution_head",
    "blocks_in",
    "to_directives",
]

EXERCISE_TAG = "exercise"
SOLUTION_TAG = "solution"
_ID = r"(?P<id>[A-Za-z]?\d+\.\d+)"
EXERCISE_HEAD = re.compile(rf"\A\*\*Exercise {_ID} · (?P<title>[^\n]*?\S)\*\*[ \t]*(?:\n|\Z)")
SOLUTION_HEAD = re.compile(rf"\A\*\*Solution {_ID}\*\*[ \t]*(?:\n|\Z)")
# What only starts like a heading ("**Exercise 05.1 — Title**"), for the error naming it.
_LOOSE_HEAD = re.compile(r"\A\s*\*\*(?P<kind>Exercise|Solution) [A-Za-z]?\d+\.\d+")
# An old-style sphinx-exercise fence (kept readable in the book while notebooks are converted).
_OLD_FENCE = re.compile(r"^ {0,3}(?:`{3,}|:{3,})\s*\{(?P<name>solution-start|solution-end)\}", re.M)
_BACKTICK_RUN = re.compile(r"^ {0,3}(`{3,})", re.M)


class MarkupError(ValueError):
    """A notebook's exercise markup that the book cannot turn into sphinx-exercise nodes."""


@dataclass(frozen=True)
class Block:
    """One exercise or one solution of a notebook, in the plain-Markdown markup.

    ``cells`` are the indices of its cells in the notebook: one for an exercise, the whole
    run for a solution.
    """

    kind: str  # "exercise" or "solution"
    exercise_id: str
    title: str
    cells: tuple[int, ...]

    @property
    def label(self) -> str:
        """The exercise's label, ``ex-NN-k`` (a solution names the exercise it solves)."""
        return label_for(self.exercise_id)


def label_for(exercise_id: str) -> str:
    """The label of exercise ``NN.k``.

    Examples
    --------
    >>> label_for("05.1")
    'ex-05-1'
    >>> label_for("A1.2")  # an appendix's exercise
    'ex-A1-2'
    """
    return "ex-" + exercise_id.replace(".", "-")


def cell_text(cell: dict[str, Any]) -> str:
    """A cell's source as one string (a notebook file may store it as a list of lines)."""
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def cell_tags(cell: dict[str, Any]) -> list[str]:
    """A cell's tags (none when it has no metadata)."""
    return list(cell.get("metadata", {}).get("tags", []) or [])


def exercise_head(text: str) -> tuple[str, str] | None:
    """``(id, title)`` when ``text`` opens with an exercise heading, else None.

    Examples
    --------
    >>> exercise_head("**Exercise 01.2 · Two layers are one wider layer**\\n\\nWrite ...")
    ('01.2', 'Two layers are one wider layer')
    >>> exercise_head("Exercise 01.2 is hard.") is None
    True
    """
    match = EXERCISE_HEAD.match(text.lstrip("\n"))
    return (match["id"], match["title"]) if match else None


def solution_head(text: str) -> str | None:
    """The exercise id when ``text`` opens with a solution heading, else None.

    Examples
    --------
    >>> solution_head("**Solution 01.2**\\n\\nConvolve the kernels.")
    '01.2'
    """
    match = SOLUTION_HEAD.match(text.lstrip("\n"))
    return match["id"] if match else None


def _where(index: int, cell: dict[str, Any]) -> str:
    first = cell_text(cell).strip().splitlines()[:1]
    return f"cell {index} ({cell['cell_type']}: {first[0][:60]!r})" if first else f"cell {index}"


def blocks_in(cells: list[dict[str, Any]]) -> Iterator[Block]:
    """The exercises and solutions of a notebook's cells, in order; wrong markup raises.

    Raises
    ------
    MarkupError
        A cell tagged ``exercise`` that does not open with ``**Exercise NN.k · Title**`` (or
        is not markdown), a markdown cell that opens with that heading but lacks the tag, a
        solution heading in a cell not tagged ``solution``, or a cell tagged ``solution``
        that no ``**Solution NN.k**`` cell before it opens (a solution written with the old
        ``{solution-start}`` fences is left alone).
    """
    run: list[int] = []
    run_id = ""
    old_inside = False

    def close() -> Iterator[Block]:
        if run:
            yield Block(SOLUTION_TAG, run_id, "", tuple(run))

    for index, cell in enumerate(cells):
        text, tags = cell_text(cell), cell_tags(cell)
        is_markdown = cell.get("cell_type") == "markdown"
        head = exercise_head(text) if is_markdown else None
        sol = solution_head(text) if is_markdown else None
        loose = _LOOSE_HEAD.match(text) if is_markdown else None
        if loose and head is None and sol is None:
            form = (
                "**Exercise NN.k · Title**" if loose["kind"] == "Exercise" else "**Solution NN.k**"
            )
            raise MarkupError(
                f"{_where(index, cell)} looks like an {loose['kind'].lower()} heading but is not "
                f"'{form}' alone on the cell's first line (' · ' is U+00B7, a middle dot)"
            )
        if EXERCISE_TAG in tags or head:
            yield from close()
            run = []
            if not is_markdown:
                raise MarkupError(f"{_where(index, cell)} is tagged 'exercise' but is not markdown")
            if head is None:
                raise MarkupError(
                    f"{_where(index, cell)} is tagged 'exercise' but does not open with "
                    "'**Exercise NN.k · Title**' on its first line"
                )
            if EXERCISE_TAG not in tags:
                raise MarkupError(
                    f"{_where(index, cell)} opens with an exercise heading but is not tagged "
                    f'\'{EXERCISE_TAG}\': add the tag (cell metadata "tags": ["exercise"])'
                )
            if SOLUTION_TAG in tags:
                raise MarkupError(f"{_where(index, cell)} is tagged both 'exercise' and 'solution'")
            yield Block(EXERCISE_TAG, head[0], head[1], (index,))
            continue
        if sol is not None:
            if SOLUTION_TAG not in tags:
                raise MarkupError(
                    f"{_where(index, cell)} opens with a solution heading but is not tagged "
                    f"'{SOLUTION_TAG}'"
                )
            yield from close()
            run, run_id = [index], sol
            continue
        if SOLUTION_TAG in tags and run:
            run.append(index)
            continue
        yield from close()
        run = []
        if SOLUTION_TAG in tags and not old_inside:
            raise MarkupError(
                f"{_where(index, cell)} is tagged 'solution' but no '**Solution NN.k**' cell "
                "opens a solution before it"
            )
        if is_markdown:
            for fence in _OLD_FENCE.finditer(text):
                old_inside = fence["name"] == "solution-start"
    yield from close()


def _fence_for(body: str) -> str:
    """Backticks that close a directive around ``body``: longer than any fence inside it."""
    longest = max((len(m.group(1)) for m in _BACKTICK_RUN.finditer(body)), default=0)
    return "`" * max(3, longest + 1)


def _exercise_directive(block: Block, text: str) -> str:
    body = EXERCISE_HEAD.sub("", text.lstrip("\n"), count=1).strip("\n")
    if not body.strip():
        raise MarkupError(
            f"cell {block.cells[0]}: exercise {block.exercise_id} has a heading and no text"
        )
    fence = _fence_for(body)
    return (
        f"{fence}{{exercise}} {block.exercise_id} · {block.title}\n"
        f":label: {block.label}\n:nonumber:\n\n{body}\n{fence}\n"
    )


def _solution_start(block: Block, text: str) -> str:
    rest = SOLUTION_HEAD.sub("", text.lstrip("\n"), count=1).strip("\n")
    start = f"```{{solution-start}} {block.label}\n:class: dropdown\n```\n"
    return start + (f"\n{rest}\n" if rest.strip() else "")


SOLUTION_END = "```{solution-end}\n```\n"


def _unique_id(base: str, taken: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9_-]", "-", base)[:56] or "cell"
    candidate, k = base, 1
    while candidate in taken:
        candidate, k = f"{base}-{k}", k + 1
    taken.add(candidate)
    return candidate


def to_directives(notebook: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``notebook`` whose exercises and solutions are sphinx-exercise directives.

    Only markdown cells change, plus one markdown cell added after a solution that ends with
    a code cell (it holds the ``{solution-end}``); code cells and their outputs are copied as
    they are. A notebook without the plain markup comes back equal.

    Raises
    ------
    MarkupError
        On markup that :func:`blocks_in` refuses.
    """
    result = copy.deepcopy(notebook)
    cells = result.get("cells", [])
    ends_after: dict[int, str] = {}
    for block in blocks_in(cells):
        first = cells[block.cells[0]]
        if block.kind == EXERCISE_TAG:
            first["source"] = _exercise_directive(block, cell_text(first))
            continue
        first["source"] = _solution_start(block, cell_text(first))
        last = cells[block.cells[-1]]
        if last["cell_type"] == "markdown":
            last["source"] = cell_text(last).rstrip("\n") + "\n\n" + SOLUTION_END
        else:
            ends_after[block.cells[-1]] = block.exercise_id
    if ends_after:
        taken = {str(c.get("id")) for c in cells if c.get("id")}
        with_ids = any("id" in c for c in cells)
        out = []
        for index, cell in enumerate(cells):
            out.append(cell)
            if index in ends_after:
                end = {"cell_type": "markdown", "metadata": {}, "source": SOLUTION_END}
                if with_ids:
                    end["id"] = _unique_id(f"solution-end-{ends_after[index]}", taken)
                out.append(end)
        result["cells"] = out
    return result
