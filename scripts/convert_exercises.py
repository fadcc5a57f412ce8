"""Rewrite the notebooks' sphinx-exercise directives as plain-Markdown exercises (idempotent).

    python scripts/convert_exercises.py                 # every notebook in notebooks/
    python scripts/convert_exercises.py notebooks/11_language_model.ipynb
    python scripts/convert_exercises.py --check         # exit 1 if a notebook needs converting

Old markup (what JupyterLab shows as code blocks)::

    ```{exercise} 01.1 · A moving average
    :label: ex-01-1
    :nonumber:

    Write ...
    ```

    ```{solution-start} ex-01-1
    :class: dropdown
    ```
    prose ... code cells tagged solution ...
    ```{solution-end}
    ```

New markup (see ``attnlab.course.markup``): a markdown cell tagged ``exercise`` that opens with
``**Exercise 01.1 · A moving average**``; the solution is a run of cells tagged ``solution``,
the first a markdown cell opening with ``**Solution 01.1**``. A markdown cell that held
several pieces (a heading, an exercise, the start of its solution, ...) is split, one cell per
piece; the first piece keeps the cell's id. Only markdown cells change, and the ``solution``
tag of code cells inside a solution, so stored outputs stay valid: nothing is re-executed.
A notebook already in the new markup is left byte for byte as it is.
"""

from __future__ import annotations

import argparse
import copy
import re
import sys
from pathlib import Path
from typing import Any

import nbformat

from attnlab.course.markup import (
    EXERCISE_TAG,
    SOLUTION_TAG,
    MarkupError,
    blocks_in,
    label_for,
    to_directives,
)

ROOT = Path(__file__).resolve().parent.parent
_OPEN = re.compile(r"^ {0,3}(?P<fence>`{3,}|:{3,})\s*\{(?P<name>[\w-]+)\}\s*(?P<arg>.*?)\s*$")
_OPTION = re.compile(r"^:(?P<key>[\w-]+):\s*(?P<value>.*?)\s*$")
_TITLE = re.compile(r"^(?P<id>[A-Za-z]?\d+\.\d+) · (?P<title>.*\S)$")
_OLD_LABEL = re.compile(r"^ex-(?P<chapter>[A-Za-z]?\d+)-(?P<number>\d+)$")
_KNOWN = {"exercise", "solution-start", "solution-end"}
_REFUSED = {"solution", "exercise-start", "exercise-end"}


def _closing(lines: list[str], start: int, fence: str) -> int:
    pattern = re.compile(rf"^ {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}\s*$")
    for i in range(start + 1, len(lines)):
        if pattern.match(lines[i]):
            return i
    raise MarkupError(f"the fence opened by {lines[start]!r} is never closed")


def _pieces(text: str) -> list[tuple[str, str, dict[str, str], str]]:
    """A markdown cell split into ("text", text) and directive pieces (name, arg, options, body)."""
    lines = text.splitlines()
    pieces: list[tuple[str, str, dict[str, str], str]] = []
    prose: list[str] = []
    i = 0
    while i < len(lines):
        match = _OPEN.match(lines[i])
        if not match or match["name"] not in _KNOWN | _REFUSED:
            prose.append(lines[i])
            i += 1
            continue
        if match["name"] in _REFUSED:
            raise MarkupError(f"{{{match['name']}}} is not converted: rewrite it by hand")
        end = _closing(lines, i, match["fence"])
        inner = lines[i + 1 : end]
        options: dict[str, str] = {}
        while inner and (option := _OPTION.match(inner[0])):
            options[option["key"]] = option["value"]
            inner = inner[1:]
        if prose:
            pieces.append(("text", "\n".join(prose), {}, ""))
            prose = []
        pieces.append((match["name"], match["arg"], options, "\n".join(inner).strip("\n")))
        i = end + 1
    if prose:
        pieces.append(("text", "\n".join(prose), {}, ""))
    return pieces


def _exercise_text(arg: str, options: dict[str, str], body: str) -> tuple[str, str]:
    """The plain exercise cell's text and the exercise's label."""
    title = _TITLE.match(arg)
    if title is None:
        raise MarkupError(f"exercise title {arg!r} does not start with its id 'NN.k · '")
    label = label_for(title["id"])
    if options.get("label") != label or set(options) != {"label", "nonumber"}:
        raise MarkupError(
            f"exercise {title['id']}: expected exactly ':label: {label}' and ':nonumber:', "
            f"found {options}"
        )
    return f"**Exercise {title['id']} · {title['title']}**\n\n{body}", label


def _exercise_id(label: str, ids: dict[str, str]) -> str:
    if label in ids:
        return ids[label]
    match = _OLD_LABEL.match(label)
    if match is None:
        raise MarkupError(f"solution-start names {label!r}, not an exercise label ex-NN-k")
    return f"{match['chapter']}.{match['number']}"


def _with_tag(cell: dict[str, Any], tag: str | None) -> dict[str, Any]:
    """``cell`` with ``tag`` as its one role tag (``exercise``/``solution``), other tags kept."""
    tags = list(cell.get("metadata", {}).get("tags", []))
    kept = [t for t in tags if t not in (EXERCISE_TAG, SOLUTION_TAG) or t == tag]
    if tag and tag not in kept:
        kept.append(tag)
    if kept != tags:
        if kept:
            cell.setdefault("metadata", {})["tags"] = kept
        else:
            cell["metadata"].pop("tags")
    return cell


def _unique(base: str, taken: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9_-]", "-", base)[:58]
    candidate, k = base, 1
    while candidate in taken:
        candidate, k = f"{base}-{k}", k + 1
    taken.add(candidate)
    return candidate


def convert(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """``nb`` with every old exercise and solution in the plain markup (a new notebook)."""
    nb = copy.deepcopy(nb)
    taken = {c["id"] for c in nb.cells if "id" in c}
    ids: dict[str, str] = {}  # exercise label -> id
    inside: str | None = None  # the label of the old solution block we are in
    cells = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            cells.append(
                _with_tag(cell, SOLUTION_TAG) if inside and cell.cell_type == "code" else cell
            )
            continue
        try:
            pieces = _pieces(cell.source)
        except MarkupError as err:
            raise MarkupError(f"cell {index}: {err}") from None
        if all(kind == "text" for kind, *_ in pieces):
            cells.append(_with_tag(cell, SOLUTION_TAG) if inside else cell)
            continue
        new: list[tuple[str | None, str]] = []  # (tag, text) of the cells this one becomes
        open_head = False  # the last new cell is a solution head that takes the prose after it
        for kind, arg, options, body in pieces:
            if kind == "text":
                if not arg.strip():
                    continue
                if open_head:
                    new[-1] = (SOLUTION_TAG, new[-1][1] + "\n\n" + arg.strip("\n"))
                else:
                    new.append((SOLUTION_TAG if inside else None, arg.strip("\n")))
                continue
            open_head = False
            if kind == "exercise":
                if inside:
                    raise MarkupError(f"cell {index}: an exercise inside the solution of {inside}")
                text, label = _exercise_text(arg, options, body)
                ids[label] = _TITLE.match(arg)["id"]
                new.append((EXERCISE_TAG, text))
            elif kind == "solution-start":
                if inside or options != {"class": "dropdown"} or body or not arg:
                    raise MarkupError(
                        f"cell {index}: expected '{{solution-start}} ex-NN-k' with exactly "
                        f"':class: dropdown' outside any solution, found {arg!r} {options}"
                    )
                inside = arg
                new.append((SOLUTION_TAG, f"**Solution {_exercise_id(arg, ids)}**"))
                open_head = True
            else:  # solution-end
                if not inside:
                    raise MarkupError(f"cell {index}: solution-end with no solution open")
                inside = None
        for k, (tag, text) in enumerate(new):
            piece = copy.deepcopy(cell)
            piece.source = text
            if k and "id" in cell:
                piece["id"] = _unique(f"{cell['id']}-{k}", taken)
            cells.append(_with_tag(piece, tag))
    if inside:
        raise MarkupError(f"the solution of {inside} is never closed by solution-end")
    nb.cells = cells
    list(blocks_in(nb.cells))  # the result must be valid markup
    to_directives(nb)
    return nb


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: notebooks/*.ipynb")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if needed")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted((ROOT / "notebooks").glob("*.ipynb"))
    stale = []
    for path in paths:
        before = path.read_text(encoding="utf-8")
        nb = nbformat.reads(before, as_version=4)
        try:
            after = nbformat.writes(convert(nb)) + "\n"
        except MarkupError as err:
            print(f"{path}: {err}", file=sys.stderr)
            return 2
        blocks = list(blocks_in(nbformat.reads(after, as_version=4).cells))
        exercises = sum(b.kind == EXERCISE_TAG for b in blocks)
        if after == before:
            print(f"{path}: already plain ({exercises} exercises)")
            continue
        stale.append(path)
        if args.check:
            print(f"{path}: needs converting")
        else:
            path.write_text(after, encoding="utf-8")
            print(f"{path}: converted ({exercises} exercises, {len(blocks) - exercises} solutions)")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
