"""Exercises written in plain Markdown become sphinx-exercise directives in the book.

In a notebook an exercise is a markdown cell tagged ``exercise`` that opens with
``**Exercise NN.k · Title**``, and its solution a run of cells tagged ``solution`` opened by
``**Solution NN.k**`` (see :mod:`attnlab.course.markup`, which also says why). JupyterLab and
Colab show that as it reads. Before MyST parses a notebook, this extension rewrites those cells
into the directives the book has always used (``{exercise}`` with ``:label: ex-NN-k``, a gated
``{solution-start}`` with ``:class: dropdown``, ``{solution-end}``), so sphinx-exercise builds
its own nodes: the same labels, titles, dropdowns, references and LaTeX as before.

The rewrite happens on Sphinx's ``source-read`` event, which hands over a notebook's file text
(its JSON) before myst-nb reads it. Only that in-memory text changes; the file does not. Wrong
markup is a warning naming the cell, so the strict build (``-W``) fails on it.
"""

from __future__ import annotations

import json
from typing import Any

from sphinx.util import logging

from attnlab.course.markup import MarkupError, to_directives

logger = logging.getLogger(__name__)


def _rewrite_exercises(app: Any, docname: str, source: list[str]) -> None:
    if not str(app.env.doc2path(docname)).endswith(".ipynb"):
        return
    try:
        notebook = json.loads(source[0])
    except ValueError:
        return  # not JSON: myst-nb will report the file itself
    try:
        rewritten = to_directives(notebook)
    except MarkupError as err:
        logger.warning("exercise markup: %s", err, location=docname, type="attnlab")
        return
    if rewritten != notebook:
        source[0] = json.dumps(rewritten, ensure_ascii=False)


def setup(app: Any) -> dict[str, Any]:
    app.connect("source-read", _rewrite_exercises)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
