"""Exercises as a learner sees them in Jupyter: nbconvert's JupyterLab page, read in Chromium.

JupyterLab itself is not started here. nbconvert's ``lab`` template is the closest stand-in
that runs offline: JupyterLab's stylesheet and cell structure, Markdown rendered with maths
set aside first (as JupyterLab does before its own Markdown renderer runs), then MathJax 3,
configured as JupyterLab configures it (``$...$`` and ``$$...$$``, escapes processed), loaded
from the book's copy in ``_extra/mathjax``. What is not covered: JupyterLab's own renderer
(marked) and its sanitizer, and Colab's; ``tests/test_exercise_markup.py`` checks the same
cells with markdown-it-py, a CommonMark renderer.

For every chapter, a page of its exercise cells and solution heading cells must show: a first
paragraph that is the bold number and title alone, no code block, none of the directive
markup, and every formula typeset, with no MathJax error and no dollar sign left over.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from browser_support import REPO, find_raw_tex, is_loopback

from attnlab.course.markup import blocks_in

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
MATHJAX = REPO / "_extra" / "mathjax" / "tex-svg-full.js"
# JupyterLab's MathJax 3 settings (@jupyterlab/mathjax-extension): the delimiters it typesets.
MATHJAX_CONFIG = """<script>
window.MathJax = {tex: {inlineMath: [["$", "$"], ["\\\\(", "\\\\)"]],
                        displayMath: [["$$", "$$"], ["\\\\[", "\\\\]"]],
                        processEscapes: true, processEnvironments: true}};
</script>
"""

_MEASURE = r"""
async () => {
  for (let i = 0; i < 400 && !(window.MathJax && window.MathJax.startup
                                && window.MathJax.startup.promise); i++) {
    await new Promise((r) => setTimeout(r, 25));
  }
  if (!(window.MathJax && window.MathJax.startup)) return null;
  await window.MathJax.startup.promise;
  return Array.from(document.querySelectorAll(".jp-MarkdownCell .jp-RenderedMarkdown")).map(
    (cell) => {
      const first = cell.firstElementChild;
      const firstCopy = first ? first.cloneNode(true) : document.createElement("p");
      firstCopy.querySelectorAll("mjx-container").forEach((m) => m.replaceWith("$math$"));
      const copy = cell.cloneNode(true);
      copy.querySelectorAll("mjx-container, code").forEach((m) => m.replaceWith(" "));
      return {
        firstTag: first ? first.tagName : "",
        firstOnlyBold: !!first && first.children.length === 1 && first.children[0].tagName
          === "STRONG" && first.textContent.trim() === first.children[0].textContent.trim(),
        heading: firstCopy.textContent.trim(),  // each formula as "$math$"
        blocks: cell.querySelectorAll("pre").length,
        formulas: cell.querySelectorAll("mjx-container").length,
        errors: cell.querySelectorAll("mjx-merror").length,
        text: copy.textContent,
      };
    });
}
"""


def _jupyter_page(path: Path) -> tuple[str, list[nbformat.NotebookNode]]:
    """nbconvert's JupyterLab HTML of the exercise and solution heading cells of a notebook."""
    nbconvert = pytest.importorskip("nbconvert")
    nb = nbformat.read(path, as_version=4)
    cells = [nb.cells[block.cells[0]] for block in blocks_in(nb.cells)]
    exporter = nbconvert.HTMLExporter(template_name="lab")
    exporter.mathjax_url = MATHJAX.as_uri()
    body, _ = exporter.from_notebook_node(nbformat.v4.new_notebook(cells=cells))
    tag = f'<script src="{exporter.mathjax_url}"'
    assert body.count(tag) == 1, "nbconvert's template no longer loads MathJax as expected"
    return body.replace(tag, MATHJAX_CONFIG + tag), cells


def _formulas(source: str) -> int:
    """How many formulas a cell's source has: ``$$...$$`` and ``$...$``, outside code."""
    text = re.sub(r"`[^`]*`", " ", source)
    return len(re.findall(r"\$\$.+?\$\$|\$[^$]+?\$", text, flags=re.S))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_exercises_read_well_in_jupyter(path: Path, browser_context, tmp_path: Path) -> None:
    if not MATHJAX.is_file():
        pytest.skip(f"no MathJax at {MATHJAX}: run `make setup`")
    page, cells = _jupyter_page(path)
    if not cells:
        pytest.skip(f"{path.name} has no exercises")
    html_file = tmp_path / f"{path.stem}.html"
    html_file.write_text(page, encoding="utf-8")
    tab = browser_context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    # nbconvert's page also asks a CDN for require.js: refused, nothing leaves the machine.
    tab.route("**/*", lambda r: r.continue_() if _local(r.request.url) else r.abort())
    try:
        tab.goto(html_file.as_uri(), wait_until="load")
        seen = tab.evaluate(_MEASURE)
    finally:
        tab.close()
    assert seen is not None, f"{path.name}: MathJax did not start ({errors})"
    assert len(seen) == len(cells), f"{path.name}: {len(cells)} cells, {len(seen)} rendered"
    for cell, shown in zip(cells, seen, strict=True):
        name = f"{path.name}, cell {cell.get('id')}"
        heading = re.sub(r"\$[^$]+\$", "$math$", cell.source.lstrip().splitlines()[0].strip("*"))
        assert shown["firstTag"] == "P" and shown["firstOnlyBold"], f"{name}: {shown['heading']!r}"
        assert shown["heading"] == heading, name
        assert shown["blocks"] == 0, f"{name} shows a code block"
        for markup in (":label:", ":nonumber:", ":class:", "{exercise}", "{solution", "```"):
            assert markup not in shown["text"], f"{name} shows {markup!r}"
        assert shown["errors"] == 0, f"{name}: MathJax error"
        assert shown["formulas"] == _formulas(cell.source), name
        assert "$" not in shown["text"] and not find_raw_tex(shown["text"]), shown["text"]


def _local(url: str) -> bool:
    return url.startswith("file:") or is_loopback(url)
