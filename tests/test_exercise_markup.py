"""The exercise markup: plain Markdown in the notebooks, sphinx-exercise directives in the book.

Three layers, each tested on its own:

* what a plain CommonMark renderer shows for every exercise and solution heading of every
  notebook (markdown-it-py, the parser MyST itself builds on; with and without its
  ``dollarmath`` plugin, i.e. a renderer that knows ``$...$`` and one that does not);
* :func:`attnlab.course.markup.to_directives`, the rewrite the book's extension applies, with
  the expected directive text written out by hand, and the markup it refuses;
* ``scripts/convert_exercises.py``: on a hand-made old-style notebook (expected cells written
  out), idempotent, and the book sees the same MyST before and after converting.

A small Sphinx build (myst-nb + sphinx-exercise + ``book/_ext/attnlab_exercises.py``) checks
the nodes, labels, references and dropdowns end to end; the full book is checked in a browser
by ``tests/browser``.
"""

from __future__ import annotations

import copy
import html
import importlib.util
import io
import json
import re
from pathlib import Path

import nbformat
import pytest
from markdown_it import MarkdownIt
from mdit_py_plugins.dollarmath import dollarmath_plugin

from attnlab.course.markup import (
    EXERCISE_TAG,
    SOLUTION_END,
    SOLUTION_TAG,
    MarkupError,
    blocks_in,
    cell_tags,
    cell_text,
    label_for,
    to_directives,
)

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
OLD_FENCE = re.compile(r"^ {0,3}(`{3,}|:{3,})\s*\{(exercise|exercise-start|solution[\w-]*)\}", re.M)

_spec = importlib.util.spec_from_file_location(
    "convert_exercises", ROOT / "scripts" / "convert_exercises.py"
)
convert_exercises = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(convert_exercises)


def _read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def _heading_cells() -> list[tuple[str, int, str]]:
    """(notebook, cell index, kind) of every exercise cell and solution heading cell."""
    found = []
    for path in NOTEBOOKS:
        for block in blocks_in(_read(path).cells):
            found.append((path.name, block.cells[0], block.kind))
    return found


HEADINGS = _heading_cells()


# ---- the notebooks: converted, and what a plain renderer shows ------------------------------
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_directive_markup_is_left(path):
    for index, cell in enumerate(_read(path).cells):
        if cell.cell_type == "markdown":
            assert not OLD_FENCE.search(cell.source), (
                f"{path.name}, cell {index}: sphinx-exercise directive markup, which JupyterLab "
                "shows as a code block: run `python scripts/convert_exercises.py`"
            )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_exercise_is_solved_in_its_own_chapter(path):
    blocks = list(blocks_in(_read(path).cells))
    exercises = [b.exercise_id for b in blocks if b.kind == EXERCISE_TAG]
    solutions = [b.exercise_id for b in blocks if b.kind == SOLUTION_TAG]
    chapter = path.name.split("_")[0]
    if re.fullmatch(r"\d{2}", chapter):  # a chapter's ids are NN.k (appendices choose theirs)
        assert all(e.split(".")[0] == chapter for e in exercises), (path.name, exercises)
    assert len(set(exercises)) == len(exercises), f"{path.name}: repeated ids {exercises}"
    assert solutions == exercises, f"{path.name}: exercises {exercises}, solutions {solutions}"


def test_the_chapters_have_exercises():
    """The rendering tests below must test something."""
    assert sum(kind == EXERCISE_TAG for _, _, kind in HEADINGS) >= 30


def _math_spans(text: str) -> list[str]:
    """The ``$...$`` and ``$$...$$`` spans of a markdown text (dollars paired left to right)."""
    text = re.sub(r"`[^`]*`", lambda m: " " * len(m.group()), text)
    return re.findall(r"\$\$.+?\$\$|\$[^$]+?\$", text, flags=re.S)


@pytest.mark.parametrize(
    ("name", "index", "kind"), HEADINGS, ids=[f"{n}-{i}" for n, i, _ in HEADINGS]
)
def test_a_plain_renderer_shows_the_heading_text_and_maths(name, index, kind):
    cell = _read(ROOT / "notebooks" / name).cells[index]
    source = cell.source
    md = MarkdownIt("commonmark")
    tokens = md.parse(source)
    # The cell opens with a paragraph that is exactly one bold run: the number and title.
    assert [t.type for t in tokens[:3]] == ["paragraph_open", "inline", "paragraph_close"]
    inline = [t.type for t in tokens[1].children if t.type != "text" or t.content]
    assert inline[0] == "strong_open" and inline[-1] == "strong_close", inline
    assert "strong_open" not in inline[1:], inline
    heading = tokens[1].content.strip("*")
    if kind == EXERCISE_TAG:
        assert re.fullmatch(r"Exercise [A-Z]?\d+\.\d+ · \S.*", heading), heading
    else:
        assert re.fullmatch(r"Solution [A-Z]?\d+\.\d+", heading), heading
    # No code block, no directive syntax anywhere in what the reader sees.
    assert not [t for t in tokens if t.type in ("fence", "code_block")], source
    shown = html.unescape(re.sub(r"<[^>]+>", "", md.render(source)))
    for markup in (":label:", ":nonumber:", ":class:", "{exercise}", "{solution", "```"):
        assert markup not in shown, f"{name} cell {index} shows {markup!r}"
    # Maths. Jupyter, Colab and MyST set formulas aside before parsing the Markdown (as the
    # dollarmath plugin does): each formula of the source must reach MathJax verbatim. A
    # renderer with no maths support shows the TeX, with every dollar sign kept.
    assert shown.count("$") == source.count("$"), f"{name} cell {index} loses a $"
    mathmd = MarkdownIt("commonmark").use(dollarmath_plugin, double_inline=True)
    formulas = [
        t.content
        for block in mathmd.parse(source)
        for t in ([block] + (block.children or []))
        if t.type in ("math_inline", "math_block", "math_inline_double")
    ]
    expected = [s.strip("$") for s in _math_spans(source)]
    # (Markdown drops a list item's indentation from a formula's continuation lines.)
    assert [" ".join(f.split()) for f in formulas] == [" ".join(e.split()) for e in expected]


# ---- to_directives: the rewrite the book's extension makes ----------------------------------
def _md(source: str, *tags: str, id_: str | None = None) -> dict:
    cell = {
        "cell_type": "markdown",
        "metadata": {"tags": list(tags)} if tags else {},
        "source": source,
    }
    if id_:
        cell["id"] = id_
    return cell


def _code(source: str, *tags: str, id_: str | None = None) -> dict:
    cell = {
        "cell_type": "code",
        "execution_count": 1,
        "metadata": {"tags": list(tags)} if tags else {},
        "outputs": [{"output_type": "stream", "name": "stdout", "text": "ok\n"}],
        "source": source,
    }
    if id_:
        cell["id"] = id_
    return cell


def _notebook(*cells: dict) -> dict:
    return {"cells": list(cells), "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def test_to_directives_writes_the_books_directives():
    nb = _notebook(
        _md("## Exercises", id_="a"),
        _md("**Exercise 99.1 · Twice $x$**\n\nWrite `twice(x)`.", EXERCISE_TAG, id_="b"),
        _md("**Solution 99.1**\n\nMultiply by $2$.", SOLUTION_TAG, id_="c"),
        _code("def twice(x):\n    return 2 * x", SOLUTION_TAG, id_="d"),
        _code('assert check("99.1", twice)', id_="e"),
        _md("**Exercise 99.2 · Prove it**\n\nShow that $2x = x + x$.", EXERCISE_TAG, id_="f"),
        _md("**Solution 99.2**", SOLUTION_TAG, id_="g"),
        _md("By definition.", SOLUTION_TAG, id_="h"),
        _md("## References", id_="i"),
    )
    out = to_directives(nb)
    sources = [cell_text(c) for c in out["cells"]]
    assert sources == [
        "## Exercises",
        "```{exercise} 99.1 · Twice $x$\n:label: ex-99-1\n:nonumber:\n\nWrite `twice(x)`.\n```\n",
        "```{solution-start} ex-99-1\n:class: dropdown\n```\n\nMultiply by $2$.\n",
        "def twice(x):\n    return 2 * x",
        "```{solution-end}\n```\n",
        'assert check("99.1", twice)',
        "```{exercise} 99.2 · Prove it\n:label: ex-99-2\n:nonumber:\n\n"
        "Show that $2x = x + x$.\n```\n",
        "```{solution-start} ex-99-2\n:class: dropdown\n```\n",
        "By definition.\n\n```{solution-end}\n```\n",
        "## References",
    ]
    assert (
        out["cells"][4]["id"] == "solution-end-99-1" and out["cells"][4]["cell_type"] == "markdown"
    )
    assert out["cells"][3] == nb["cells"][3]  # code cells, outputs included, as they were
    assert nb["cells"][1]["source"].startswith("**Exercise")  # the input is not modified
    assert SOLUTION_END == "```{solution-end}\n```\n"


def test_a_solution_can_end_in_a_code_cell_followed_by_another_solution():
    nb = _notebook(
        _md("**Exercise 99.1 · A**\n\ntext", EXERCISE_TAG),
        _md("**Solution 99.1**", SOLUTION_TAG),
        _code("a = 1", SOLUTION_TAG),
        _md("**Solution 99.1**\n\nA second way.", SOLUTION_TAG),
    )
    kinds = [(b.kind, b.cells) for b in blocks_in(nb["cells"])]
    assert kinds == [(EXERCISE_TAG, (0,)), (SOLUTION_TAG, (1, 2)), (SOLUTION_TAG, (3,))]
    out = to_directives(nb)["cells"]
    assert [cell_text(c).splitlines()[0] for c in out] == [
        "```{exercise} 99.1 · A",
        "```{solution-start} ex-99-1",
        "a = 1",
        "```{solution-end}",
        "```{solution-start} ex-99-1",
    ]
    assert "id" not in out[3]  # the notebook's cells have no ids, so the added one has none


def test_a_code_block_inside_an_exercise_gets_a_longer_fence():
    body = "Run this:\n\n```python\nprint(1)\n```"
    nb = _notebook(_md(f"**Exercise 99.1 · Code**\n\n{body}", EXERCISE_TAG))
    text = cell_text(to_directives(nb)["cells"][0])
    assert text == f"````{{exercise}} 99.1 · Code\n:label: ex-99-1\n:nonumber:\n\n{body}\n````\n"


def test_a_notebook_without_the_markup_comes_back_equal():
    old = _notebook(
        _md("```{exercise} 99.1 · Old\n:label: ex-99-1\n:nonumber:\n\ntext\n```"),
        _md("```{solution-start} ex-99-1\n:class: dropdown\n```"),
        _code("a = 1", SOLUTION_TAG),
        _md("```{solution-end}\n```"),
        _md("**Bold** prose"),
    )
    assert to_directives(old) == old


@pytest.mark.parametrize(
    ("cells", "message"),
    [
        ([_md("**Exercise 99.1 · A**\n\ntext")], "not tagged 'exercise'"),
        ([_md("Exercise 99.1: text", EXERCISE_TAG)], "does not open with"),
        ([_md("**Exercise 99.1 — A**\n\ntext", EXERCISE_TAG)], "looks like an exercise heading"),
        ([_md("**Exercise 99.1 · A.** Write it.", EXERCISE_TAG)], "looks like an exercise heading"),
        ([_code("x = 1", EXERCISE_TAG)], "not markdown"),
        ([_md("**Exercise 99.1 · A**\n\nt", EXERCISE_TAG, SOLUTION_TAG)], "both"),
        ([_md("**Exercise 99.1 · A**", EXERCISE_TAG)], "no text"),
        ([_md("**Solution 99.1**\n\ntext")], "not tagged 'solution'"),
        ([_md("**Solution 99.1.** Multiply.", SOLUTION_TAG)], "looks like a"),
        ([_md("t"), _code("a = 1", SOLUTION_TAG)], "no '**Solution NN.k**' cell opens"),
        (
            [_md("**Solution 99.1**", SOLUTION_TAG), _code("x"), _md("more", SOLUTION_TAG)],
            "no '**Solution NN.k**' cell opens",
        ),
    ],
)
def test_wrong_markup_is_refused_naming_the_cell(cells, message):
    with pytest.raises(MarkupError, match="cell") as err:
        to_directives(_notebook(*cells))
    assert message in str(err.value)


def test_labels_follow_the_check_ids():
    assert label_for("05.2") == "ex-05-2"
    assert label_for("A1.3") == "ex-A1-3"  # the case is kept, as the appendix writes it


# ---- the conversion script -------------------------------------------------------------------
OLD = _notebook(
    _md(
        "## Exercises\n\n```{exercise} 99.1 · Twice\n:label: ex-99-1\n:nonumber:\n\nWrite "
        "`twice(x)`.\n```\n\n```{solution-start} ex-99-1\n:class: dropdown\n```\n\nMultiply.",
        id_="m1",
    ),
    _code("def twice(x):\n    return 2 * x", SOLUTION_TAG, id_="c1"),
    _code("twice_of_one = twice(1)", id_="c2"),  # untagged, inside the old block
    _md("```{solution-end}\n```", id_="m2"),
    _code('assert check("99.1", twice)', id_="c3"),
    _md(
        "```{exercise} 99.2 · Prove\n:label: ex-99-2\n:nonumber:\n\nShow $a_1 = b$.\n```\n\n"
        "```{solution-start} ex-99-2\n:class: dropdown\n```\n\nBy $a_1$.\n\n```{solution-end}\n"
        "```\n\n## References\n\nNone.",
        id_="m3",
    ),
)


def _convert(nb: dict) -> nbformat.NotebookNode:
    return convert_exercises.convert(nbformat.from_dict(copy.deepcopy(nb)))


def test_convert_an_old_notebook():
    new = _convert(OLD)
    assert [(c.get("id"), cell_tags(c), c.source) for c in new.cells] == [
        ("m1", [], "## Exercises"),
        ("m1-1", [EXERCISE_TAG], "**Exercise 99.1 · Twice**\n\nWrite `twice(x)`."),
        ("m1-2", [SOLUTION_TAG], "**Solution 99.1**\n\nMultiply."),
        ("c1", [SOLUTION_TAG], "def twice(x):\n    return 2 * x"),
        ("c2", [SOLUTION_TAG], "twice_of_one = twice(1)"),
        ("c3", [], 'assert check("99.1", twice)'),
        ("m3", [EXERCISE_TAG], "**Exercise 99.2 · Prove**\n\nShow $a_1 = b$."),
        ("m3-1", [SOLUTION_TAG], "**Solution 99.2**\n\nBy $a_1$."),
        ("m3-2", [], "## References\n\nNone."),
    ]
    assert new.cells[3].outputs == OLD["cells"][1]["outputs"]


def _myst_stream(nb: dict) -> list[tuple[str, str]]:
    """What MyST reads: consecutive markdown cells joined, blank lines collapsed, code as is."""
    stream: list[tuple[str, str]] = []
    for cell in nb["cells"]:
        text = cell_text(cell).strip()
        if cell["cell_type"] == "markdown":
            if stream and stream[-1][0] == "markdown":
                stream[-1] = ("markdown", stream[-1][1] + "\n\n" + text)
            else:
                stream.append(("markdown", text))
        else:
            stream.append((cell["cell_type"], text))
    return [(kind, re.sub(r"\n{2,}", "\n\n", text)) for kind, text in stream]


def test_the_book_reads_the_same_myst_before_and_after_converting():
    assert _myst_stream(to_directives(_convert(OLD))) == _myst_stream(OLD)


def test_convert_is_idempotent_and_leaves_converted_notebooks_alone():
    once = _convert(OLD)
    assert _convert(once) == once
    for path in NOTEBOOKS:
        nb = _read(path)
        assert convert_exercises.convert(nb) == nb, path.name


def test_the_script_check_mode(tmp_path, capsys):
    old = tmp_path / "old.ipynb"
    old.write_text(json.dumps(OLD))
    assert convert_exercises.main(["--check", str(old)]) == 1
    assert json.loads(old.read_text()) == OLD  # --check writes nothing
    assert convert_exercises.main([str(old)]) == 0
    converted = old.read_text()
    assert convert_exercises.main([str(old)]) == 0 and old.read_text() == converted
    assert convert_exercises.main(["--check", str(old)]) == 0
    assert "already plain (2 exercises)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("```{solution} ex-99-1\ntext\n```", "not converted"),
        ("```{exercise} 99.1 · A\n:label: ex-99-3\n:nonumber:\n\nt\n```", "expected exactly"),
        ("```{exercise} 99.1 · A\n:label: ex-99-1\n\nt\n```", "expected exactly"),
        ("```{exercise} A title\n:label: ex-99-1\n:nonumber:\n\nt\n```", "does not start"),
        ("```{solution-start} ex-99-1\n```", "exactly ':class: dropdown'"),
        ("```{exercise} 99.1 · A\n:label: ex-99-1\n:nonumber:\n\nt", "never closed"),
    ],
)
def test_the_script_refuses_what_it_cannot_convert(source, message):
    with pytest.raises(MarkupError, match=re.escape(message)):
        _convert(_notebook(_md(source)))


# ---- end to end: a small Sphinx build with the extension ------------------------------------
def test_sphinx_builds_exercise_nodes_from_the_plain_markup(tmp_path):
    sphinx_application = pytest.importorskip("sphinx.application")
    pytest.importorskip("myst_nb")
    pytest.importorskip("sphinx_exercise")
    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT / 'book' / '_ext')!r})\n"
        "extensions = ['myst_nb', 'sphinx_exercise', 'attnlab_exercises']\n"
        "nb_execution_mode = 'off'\n"
        "myst_enable_extensions = ['dollarmath']\n"
    )
    (src / "index.md").write_text(
        "# Book\n\nSee {ref}`ex-99-1` and {ref}`the second <ex-99-2>`.\n\n"
        "```{toctree}\nchapter\nbad\n```\n"
    )
    nb = _notebook(
        _md("# Chapter"),
        _md("**Exercise 99.1 · Twice $x$**\n\nWrite `twice(x)`.", EXERCISE_TAG),
        _md("**Solution 99.1**\n\nMultiply by $2$.", SOLUTION_TAG),
        _code("def twice(x):\n    return 2 * x", SOLUTION_TAG),
        _code('print("check")'),
        _md("**Exercise 99.2 · Prove it**\n\nShow it.", EXERCISE_TAG),
        _md("**Solution 99.2**\n\nBy definition.", SOLUTION_TAG),
    )
    nb["metadata"] = {
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}
    }
    for i, cell in enumerate(nb["cells"]):
        cell["id"] = f"cell-{i}"
    (src / "chapter.ipynb").write_text(json.dumps(nb))
    bad = _notebook(_md("# Bad"), _md("**Exercise 99.3 · Untagged**\n\ntext"))
    bad["metadata"] = nb["metadata"]
    for i, cell in enumerate(bad["cells"]):
        cell["id"] = f"cell-{i}"
    (src / "bad.ipynb").write_text(json.dumps(bad))
    warnings = io.StringIO()
    app = sphinx_application.Sphinx(
        str(src),
        str(src),
        str(tmp_path / "html"),
        str(tmp_path / "doctrees"),
        "html",
        status=io.StringIO(),
        warning=warnings,
        freshenv=True,
    )
    app.build()
    page = (tmp_path / "html" / "chapter.html").read_text()
    index = (tmp_path / "html" / "index.html").read_text()
    # Two exercise admonitions with the book's titles and labels, each followed by its solution
    # as a dropdown whose title links back to the exercise; the heading lines are gone.
    exercises = re.findall(
        r'<div class="exercise admonition" id="([^"]+)">\s*<p class="admonition-title">([^<]*)',
        page,
    )
    assert exercises == [
        ("ex-99-1", "Exercise (99.1 · Twice "),
        ("ex-99-2", "Exercise (99.2 · Prove it)"),
    ]
    solutions = re.findall(
        r'<div class="solution dropdown admonition" id="[^"]+">\s*'
        r'<p class="admonition-title">Solution to<a class="reference internal" href="#([^"]+)">',
        page,
    )
    assert solutions == ["ex-99-1", "ex-99-2"]
    assert "**Exercise" not in page and "**Solution" not in page and "Solution 99.1" not in page
    start = page.index('class="solution dropdown')
    end = page.index("</section>\n</div>", start)  # the solution's content, then its div, close
    assert "Multiply by" in page[start:end] and "twice" in page[start:end]
    assert "check" not in page[start:end] and "check" in page[end : page.index('id="ex-99-2"')]
    # {ref} to an exercise resolves to its anchor. sphinx-exercise gives an unnumbered
    # exercise the link text "Exercise" (as before the markup changed), so the book writes
    # its own: {ref}`the second <ex-99-2>`.
    assert re.search(
        r'href="chapter.html#ex-99-1"><span class="std std-ref">Exercise</span>', index
    )
    assert re.search(r'href="chapter.html#ex-99-2"><span class="std std-ref">the second<', index)
    # The notebook with an untagged heading is reported, naming the cell.
    assert "exercise markup: cell 1" in warnings.getvalue() and "not tagged" in warnings.getvalue()
    assert "chapter" not in warnings.getvalue(), warnings.getvalue()
