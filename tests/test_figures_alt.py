"""Every figure in the book has alt text, so a reader who cannot see it still gets it.

A figure in a notebook is a code cell output with an image; myst-nb takes its alt text from
the cell metadata ``mystnb.image.alt`` (CONTRIBUTING.md, "Output rules"). Figures in MyST
(``{figure}``/``{image}`` directives, ``![alt](path)``) need ``:alt:`` or a non-empty alt too.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
MYST_PAGES = sorted((ROOT / "book").glob("*.md"))
IMAGE_TYPES = ("image/png", "image/svg+xml", "image/jpeg", "image/gif")
MIN_WORDS = 3  # "Figure", "plot" or "heatmap" says nothing; a short sentence does


def figure_cells(path: Path) -> list[tuple[int, dict]]:
    """(code cell number, cell) for every code cell with an image among its outputs."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    code = [c for c in cells if c["cell_type"] == "code"]
    return [
        (number, cell)
        for number, cell in enumerate(code, start=1)
        if any(kind in out.get("data", {}) for out in cell["outputs"] for kind in IMAGE_TYPES)
    ]


def alt_problem(alt: object) -> str | None:
    if not isinstance(alt, str) or not alt.strip():
        return "no alt text (cell metadata mystnb.image.alt)"
    if len(alt.split()) < MIN_WORDS:
        return f"alt text {alt!r} is shorter than {MIN_WORDS} words: say what the figure shows"
    return None


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_notebook_figure_has_alt_text(path):
    problems = []
    for number, cell in figure_cells(path):
        alt = cell.get("metadata", {}).get("mystnb", {}).get("image", {}).get("alt")
        problem = alt_problem(alt)
        if problem:
            first_line = "".join(cell["source"]).strip().splitlines()[0][:60]
            problems.append(f"code cell {number} ({first_line!r}): {problem}")
    assert not problems, f"{path.name}:\n" + "\n".join(problems)


def markdown_sources() -> list[tuple[str, str]]:
    """(where, text) for every MyST page and every markdown cell of every notebook."""
    sources = [(p.relative_to(ROOT).as_posix(), p.read_text(encoding="utf-8")) for p in MYST_PAGES]
    for path in NOTEBOOKS:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        for number, cell in enumerate(cells, start=1):
            if cell["cell_type"] == "markdown":
                sources.append((f"{path.name} cell {number}", "".join(cell["source"])))
    return sources


DIRECTIVE = re.compile(r"^(`{3,}|:{3,})\{(figure|image)\}[^\n]*\n(.*?)^\1", re.M | re.S)
INLINE_IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)]+)\)")


def test_myst_figures_have_alt_text():
    problems = []
    for where, text in markdown_sources():
        for match in DIRECTIVE.finditer(text):
            options = re.search(r"^:alt:\s*(.+)$", match.group(3), flags=re.M)
            problem = alt_problem(options.group(1) if options else None)
            if problem:
                problems.append(f"{where}: {{{match.group(2)}}} directive: {problem}")
        for match in INLINE_IMAGE.finditer(text):
            problem = alt_problem(match.group(1))
            if problem:
                problems.append(f"{where}: ![…]({match.group(2)}): {problem}")
    assert not problems, "\n".join(problems)


def test_the_checks_see_figures():
    """Guard against a check that silently sees nothing: the chapters do have figures."""
    assert any(figure_cells(p) for p in NOTEBOOKS), "no figure output found in any notebook"


def test_alt_problem_rejects_missing_and_trivial_text():
    assert alt_problem(None) and alt_problem("") and alt_problem("   ") and alt_problem("plot")
    assert alt_problem("A heatmap of weights") is None


GREEK = re.compile("[\u0370-\u03ff]")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_figure_captions_have_no_greek_letters(path):
    # A caption becomes the text of a LaTeX label; XeLaTeX wrote chapter 09's captions with a
    # Δ and a γ into the .aux in a form that never compared equal when read back, so latexmk
    # stopped with "Label(s) may have changed" and the PDF check failed. Write the letter out
    # or say it in words (the alt text may keep it: it never reaches a label).
    problems = []
    for number, cell in figure_cells(path):
        caption = cell.get("metadata", {}).get("mystnb", {}).get("figure", {}).get("caption", "")
        if GREEK.search(caption):
            problems.append(f"code cell {number}: {caption[:80]!r}")
    assert not problems, f"{path.name}:\n" + "\n".join(problems)
