"""Sphinx extension for the book's PDF (``make pdf``); it changes nothing in the HTML build.

1. The lean class. sphinx-jupyterbook-latex (on through ``latex.use_jupyterbook_latex`` in
   ``_config.yml``) turns the toc's captions into parts and frames code cells, but at
   ``config-inited`` it also forces ``latex_theme = "jupyterBook"``, a class that needs
   ``bbm.sty`` (Debian's ~500 MB ``texlive-fonts-extra``) for macros the book never uses. A
   handler that runs after it points the theme at ``book/latex/attnlabBook`` (found through
   ``latex_theme_path``), and puts the repository's address (``repository.url``, the one place
   it is set) on the cover page where ``latex_elements["maketitle"]`` says ``@REPOSITORY_URL@``.
2. Exercise labels. sphinx-exercise labels an exercise ``exercise:<label>`` in LaTeX, while
   ``{ref}`` links to it as ``<docname>:<label>``, so every reference to an exercise came out
   undefined. The LaTeX visitors here write both labels.
3. Solutions in an appendix. In the HTML a solution is folded away under its exercise; on paper
   it would sit in plain view. The PDF moves every solution into the chapter "Solutions to the
   exercises" at the end of the appendix (one section per chapter) and leaves a "Solution:
   page N" link under each exercise.
4. Numbering. The chapters' titles carry their own numbers ("01 Local context", "1.1 The
   question"), so the PDF numbers chapters only, and so that chapter 01 is chapter 1 (and its
   figures and equations 1.n): the Getting started pages are unnumbered, the Chapters part
   starts at 1 and the Appendix pages are lettered (A, B, ...).
5. The HTML links the PDF. When ``make pdf`` has built ``_build/latex/attnlab.pdf``, the HTML
   build sets the tag ``attnlab_pdf`` (book/intro.md shows its download line only then, so a
   book built without TeX has no broken link) and copies the PDF into ``_build/html``.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.builders.latex import LaTeXBuilder
from sphinx.config import Config
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging
from sphinx_exercise import nodes as exercise_nodes

logger = logging.getLogger(__name__)

THEME = "attnlabBook"
SOLUTIONS_TITLE = "Solutions to the exercises"
# The appendix page the solutions chapter is placed before (the bibliography closes the book).
SOLUTIONS_BEFORE = "book/bibliography"
# latex.latex_documents.targetname in _config.yml, with .pdf for .tex.
PDF_NAME = "attnlab.pdf"
# LaTeX written right after each part's heading (the part is the toc caption in _toc.yml).
PART_SETUP = {
    "Getting started": r"\setcounter{secnumdepth}{-1}",
    "Chapters": r"\setcounter{secnumdepth}{0}\setcounter{chapter}{0}",
    "Appendix": r"\appendix",
}
PDF_TAG = "attnlab_pdf"


def _use_lean_class(app: Sphinx, config: Config) -> None:
    config["latex_theme"] = THEME
    elements = dict(config["latex_elements"])
    url = (config["html_theme_options"] or {}).get("repository_url", "")
    if "maketitle" in elements:
        elements["maketitle"] = elements["maketitle"].replace("@REPOSITORY_URL@", url)
    config["latex_elements"] = elements


# ---- 2. exercise labels ---------------------------------------------------------------------


def _doc_label(translator: Any, node: nodes.Element) -> str:
    """``\\label`` under the name ``{ref}`` uses: ``<docname>:<label>``."""
    label = node.attributes.get("label", "")
    registry = getattr(translator.builder.env, "sphinx_exercise_registry", {})
    docname = registry.get(label, {}).get("docname", "")
    if not label or not docname:
        return ""
    return r"\phantomsection\label{\detokenize{" + f"{docname}:{label}" + "}}"


def _visit_exercise(translator: Any, node: nodes.Element) -> None:
    translator.body.append(_doc_label(translator, node))
    exercise_nodes.visit_exercise_node(translator, node)


def _visit_exercise_enumerable(translator: Any, node: nodes.Element) -> None:
    translator.body.append(_doc_label(translator, node))
    exercise_nodes.visit_exercise_enumerable_node(translator, node)


def _register_latex_visitors(app: Sphinx) -> None:
    if not isinstance(app.builder, LaTeXBuilder):
        return
    app.registry.add_translation_handlers(
        exercise_nodes.exercise_node,
        latex=(_visit_exercise, exercise_nodes.depart_exercise_node),
    )
    app.registry.add_translation_handlers(
        exercise_nodes.exercise_enumerable_node,
        latex=(_visit_exercise_enumerable, exercise_nodes.depart_exercise_enumerable_node),
    )


# ---- 3. solutions in an appendix ------------------------------------------------------------


def _solution_label(env: Any, node: nodes.Element) -> str:
    """The label sphinx-exercise's LaTeX visitor writes for a solution (see its nodes.py)."""
    label = node.attributes.get("label", "")
    docname = env.sphinx_exercise_registry.get(label, {}).get("docname", "")
    return f"{docname}:{label}"


def _page_title(page: nodes.Element) -> str:
    """The title of a page (``start_of_file``) of the assembled document."""
    section = next(iter(page.findall(nodes.section)), None)
    title = next(iter(section.findall(nodes.title)), None) if section is not None else None
    return title.astext() if title is not None else page.get("docname", "")


def _solutions(document: nodes.Element) -> list[tuple[nodes.Element, nodes.Element, Any]]:
    """Every solution as (its parent, itself, its page), walking down from the root.

    sphinx-jupyterbook-latex rebuilds nodes without resetting their children's ``parent``, so
    walking up from a solution is not reliable; walking down the children lists is.
    """
    found = []

    def walk(node: nodes.Element, page: Any) -> None:
        for child in list(node.children):
            if isinstance(child, exercise_nodes.solution_node):
                found.append((node, child, page))
            elif isinstance(child, addnodes.start_of_file):
                walk(child, child)
            elif isinstance(child, nodes.Element):
                walk(child, page)

    walk(document, None)
    return found


class SolutionsAppendix(SphinxPostTransform):
    """Move every solution of the assembled LaTeX document into an appendix chapter."""

    builders = ("latex",)
    # after sphinx-jupyterbook-latex's LatexRootDocPostTransforms (700), which builds the parts
    default_priority = 750

    def run(self, **kwargs: Any) -> None:
        docname = self.app.project.path2doc(self.document["source"])
        if docname != self.config.root_doc:
            return
        anchor = next(
            (
                n
                for n in self.document.findall(addnodes.start_of_file)
                if n.get("docname") == SOLUTIONS_BEFORE
            ),
            None,
        )
        solutions = _solutions(self.document)
        if anchor is None or not solutions:
            return
        chapter = nodes.section(ids=["attnlab-solutions"], names=["attnlab-solutions"])
        chapter += nodes.title(text=SOLUTIONS_TITLE)
        chapter += nodes.paragraph(
            text=(
                "The solutions of every chapter's exercises, in order. In the HTML book and the "
                "notebooks each one is folded away under its exercise; a code solution there is "
                "executable, and attnlab.exercises.check tests any answer on fresh random cases."
            )
        )
        current = None
        for parent, solution, page in solutions:
            pagename = page.get("docname", "") if page is not None else ""
            if current is None or current["attnlab_page"] != pagename:
                current = nodes.section(ids=["attnlab-solutions-" + pagename.replace("/", "-")])
                current["attnlab_page"] = pagename
                current += nodes.title(text=_page_title(page) if page is not None else "")
                chapter += current
            label = _solution_label(self.env, solution)
            link = nodes.raw(
                "",
                r"\par\noindent{\small\sphinxstyleemphasis{Solution: \hyperref["
                + label
                + r"]{page~\pageref*{"
                + label
                + r"}}}}\par",
                format="latex",
            )
            parent[parent.index(solution)] = link
            current += solution
        wrapper = addnodes.start_of_file(docname="attnlab-solutions")
        wrapper += chapter
        anchor.parent.insert(anchor.parent.index(anchor), wrapper)


# ---- 4. numbering ---------------------------------------------------------------------------


class PartNumbering(SphinxPostTransform):
    """After each part heading, the numbering that part uses (``PART_SETUP``)."""

    builders = ("latex",)
    default_priority = 760

    def run(self, **kwargs: Any) -> None:
        docname = self.app.project.path2doc(self.document["source"])
        if docname != self.config.root_doc:
            return
        found = set()
        for section in self.document.findall(nodes.section):
            caption = section.get("docname")  # sphinx-jupyterbook-latex names parts so
            if caption in PART_SETUP and isinstance(section[0], nodes.title):
                section.insert(1, nodes.raw("", PART_SETUP[caption], format="latex"))
                found.add(caption)
        for caption in sorted(set(PART_SETUP) - found):
            logger.warning("attnlab_latex: no part %r in the LaTeX document (_toc.yml)", caption)


# ---- 5. the HTML links the PDF ---------------------------------------------------------------


def _built_pdf(app: Sphinx) -> Path:
    """Where ``make pdf`` leaves the PDF: ``_build/latex`` beside this build's ``_build/html``."""
    return Path(app.outdir).parent / "latex" / PDF_NAME


def _tag_when_pdf_exists(app: Sphinx) -> None:
    if app.builder.format == "html" and _built_pdf(app).is_file():
        app.tags.add(PDF_TAG)


def _copy_pdf(app: Sphinx, exception: Exception | None) -> None:
    if exception is None and app.builder.format == "html" and PDF_TAG in app.tags:
        shutil.copy2(_built_pdf(app), Path(app.outdir) / PDF_NAME)


def setup(app: Sphinx) -> dict[str, Any]:
    # priority 900: after sphinx-jupyterbook-latex's own config-inited handler (500)
    app.connect("config-inited", _use_lean_class, priority=900)
    app.connect("builder-inited", _register_latex_visitors)
    app.connect("builder-inited", _tag_when_pdf_exists)
    app.connect("build-finished", _copy_pdf)
    app.add_post_transform(SolutionsAppendix)
    app.add_post_transform(PartNumbering)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
