"""scripts/check_pdf.py, the PDF stage's check: each rule fails on the fault it exists for.

These run without TeX (unit stage); the check itself runs on the real PDF in `make test`.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_SPEC = importlib.util.spec_from_file_location("check_pdf", ROOT / "scripts" / "check_pdf.py")
check_pdf = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(check_pdf)


# ---- XeLaTeX's log ---------------------------------------------------------------------------

LOG_CLEAN = """\
This is XeTeX, Version 3.141592653-2.6-0.999994 (TeX Live 2022/Debian)
Package: rerunfilecheck 2022-07-10 v1.10 Rerun checks for auxiliary files (HO)
Output written on attnlab.xdv (222 pages, 2446655 bytes).
"""


def test_a_clean_log_has_no_problem():
    assert check_pdf.log_problems(LOG_CLEAN) == []


@pytest.mark.parametrize(
    ("line", "what"),
    [
        ("LaTeX Warning: Reference `notebooks/02_x:eq-02-1' on page 24 undefined on input line 9.",
         "undefined reference"),
        ("LaTeX Warning: Hyper reference `notebooks/10_gam_study:ex-10-3' on page 140 undefined",
         "undefined reference"),
        ("LaTeX Warning: Citation `book/bibliography:id6' on page 3 undefined on input line 5.",
         "undefined citation"),
        ("LaTeX Warning: There were undefined references.", "undefined references"),
        ("LaTeX Warning: Label(s) may have changed. Rerun to get cross-references right.",
         "labels not stable"),
        ("LaTeX Warning: Label `x:y' multiply defined.", "label defined twice"),
        ("Missing character: There is no \u1d40 (U+1D40) in font [FreeMono.otf]/OT:script=latn;!",
         "missing character"),
    ],
)
def test_each_log_fault_is_reported(line, what):
    problems = check_pdf.log_problems(LOG_CLEAN + line + "\n")
    assert len(problems) >= 1
    assert any(what in problem for problem in problems), problems


def test_a_line_far_into_the_margin_is_reported_a_few_points_are_not():
    small = "Overfull \\hbox (5.27986pt too wide) in paragraph at lines 12395--12395\n"
    large = "Overfull \\hbox (84.1pt too wide) in paragraph at lines 700--712\n"
    vbox = "Overfull \\vbox (30.0pt too high) detected at line 20509\n"
    assert check_pdf.log_problems(LOG_CLEAN + small + vbox) == []
    problems = check_pdf.log_problems(LOG_CLEAN + large)
    assert len(problems) == 1 and "84.1pt" in problems[0], problems


# ---- the PDF's text --------------------------------------------------------------------------


def test_titles_found_across_line_breaks_ligatures_and_quotes():
    # pdftotext may break a title over lines, keep the fi ligature and a typographic quote
    text = "Contents\n09 Positions: sinusoidal, relative, and attention that is a\nconvolution\n"
    text += "A study: GAM\u2019s \ufb01t\n"
    titles = ["09 Positions: sinusoidal, relative, and attention that is a convolution",
              "A study: GAM's fit"]
    assert check_pdf.text_problems(text, titles) == []


def test_a_missing_title_is_reported():
    problems = check_pdf.text_problems("01 Local context: convolution", ["02 Dot-product"])
    assert problems == ["title not in the PDF: '02 Dot-product'"]


def test_question_marks_of_an_unresolved_reference_are_reported():
    problems = check_pdf.text_problems("as equation (??) shows", [])
    assert len(problems) == 1 and "'??'" in problems[0]


def test_a_single_question_mark_is_prose():
    assert check_pdf.text_problems("Why divide? Because.", []) == []


# ---- TeX shown as text -----------------------------------------------------------------------


def test_tex_in_code_is_fine_but_tex_in_prose_is_reported():
    code = (
        "\\begin{sphinxVerbatim}[commandchars=\\\\\\{\\}]\n"
        "label=\\textbackslash{}sqrt \\$x\\$\n\\end{sphinxVerbatim}\n"
        "\\sphinxcode{\\sphinxupquote{r\"\\textbackslash{}alpha{[}0{]}\"}} and \\(x^2\\)\n"
    )
    assert check_pdf.tex_as_text(code) == []
    prose = code + "after \\textbackslash{}emph Build a generator, and \\$d\\_k\\$ too\n"
    problems = check_pdf.tex_as_text(prose)
    assert len(problems) == 3, problems  # \emph, and the two dollars
    assert "emph Build" in problems[0]


# ---- sources: titles and images ----------------------------------------------------------------


def test_page_title_strips_markup_and_needs_a_heading():
    assert check_pdf.page_title("intro\n\n# The `attnlab` *API*\n\n## Sub") == "The attnlab API"
    with pytest.raises(ValueError, match="level-1 heading"):
        check_pdf.page_title("## only a subsection\n")


def test_expected_images_counts_png_outputs_and_figures():
    cells = [
        {"cell_type": "code", "outputs": [{"data": {"image/png": "...", "text/plain": "fig"}}]},
        {"cell_type": "code", "outputs": [{"data": {"text/plain": "3"}}, {"name": "stdout"}]},
        {"cell_type": "markdown", "source": ["no image"]},
    ]
    markdown = "```{figure} ../book/figures/a.png\n:alt: x\n```\n\ntext ![b](b.png)\n"
    assert check_pdf.expected_images(markdown, cells) == 3


def test_every_page_of_the_toc_has_a_title(tmp_path):
    # the real book: each page named in _toc.yml yields a title the check can look for
    pages, captions = check_pdf.toc_pages(ROOT)
    assert len(pages) >= 10 and captions
    for page in pages:
        markdown, _cells = check_pdf.page_source(ROOT, page)
        assert check_pdf.page_title(markdown), page


def test_main_fails_without_a_pdf(tmp_path, capsys):
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: intro\n", encoding="utf-8")
    assert check_pdf.main(["--build", str(tmp_path), "--root", str(tmp_path)]) == 1
    assert "run make pdf first" in capsys.readouterr().out


def test_notebook_markdown_is_read_from_cells(tmp_path):
    nb = {"cells": [{"cell_type": "markdown", "source": ["# 01 A title\n", "text"]}]}
    (tmp_path / "n.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    markdown, cells = check_pdf.page_source(tmp_path, "n")
    assert check_pdf.page_title(markdown) == "01 A title" and len(cells) == 1
