"""Student editions in the rendered book: every chapter page links to its student version.

The student version of each chapter (solutions replaced by stubs, self-checks kept, made by
``python -m attnlab.assign notebooks/ --out student/``; ``make student``) is committed in
``student/``, because Colab and Binder open notebooks from the repository.
``tests/test_student_editions.py`` checks that those files are what the command makes from
today's chapters. This extension

- copies ``student/*.ipynb`` into the site (``_build/html/student/``), so the edition can be
  downloaded from the book itself, and
- puts a box under the title of every chapter page with three links: the student edition on
  Colab, on Binder, and as a download.

The launch addresses come from the same settings as the theme's own buttons (``repository``
and ``launch_buttons`` in ``_config.yml``).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

STUDENT_DIR = "student"


def _student_file(app: Any, pagename: str) -> Path | None:
    """The committed student edition of a chapter page, if there is one."""
    if not pagename.startswith("notebooks/"):
        return None
    path = Path(app.srcdir) / STUDENT_DIR / (pagename.split("/", 1)[1] + ".ipynb")
    return path if path.is_file() else None


def _links(app: Any, pagename: str, name: str) -> str:
    options = app.config.html_theme_options
    repo = options.get("repository_url", "").rstrip("/").removesuffix(".git")
    slug = "/".join(repo.split("/")[-2:])
    branch = options.get("repository_branch", "main")
    launch = options.get("launch_buttons", {})
    colab = launch.get("colab_url", "https://colab.research.google.com").rstrip("/")
    binder = launch.get("binderhub_url", "https://mybinder.org").rstrip("/")
    path = f"{STUDENT_DIR}/{name}"
    download = "../" * pagename.count("/") + path
    return (
        '<div class="admonition tip attnlab-student-edition">\n'
        '<p class="admonition-title">Student edition</p>\n'
        "<p>This chapter with its solutions replaced by stubs, ready to work on and to "
        "submit (it says how): "
        f'<a class="reference external" href="{colab}/github/{slug}/blob/{branch}/{path}">'
        "open in Colab</a> · "
        f'<a class="reference external" href="{binder}/v2/gh/{slug}/{branch}?urlpath=tree/'
        f'{path}">open on Binder</a> · '
        f'<a class="reference download" href="{download}" download>download {name}</a>.</p>\n'
        "</div>\n"
    )


def _add_box(app: Any, pagename: str, template: str, context: dict, doctree: Any) -> None:
    student = _student_file(app, pagename)
    body = context.get("body", "")
    if student is None or "</h1>" not in body:
        return
    end = body.index("</h1>") + len("</h1>")
    context["body"] = body[:end] + "\n" + _links(app, pagename, student.name) + body[end:]


def _copy_editions(app: Any, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    source = Path(app.srcdir) / STUDENT_DIR
    if not source.is_dir():
        return
    target = Path(app.outdir) / STUDENT_DIR
    target.mkdir(parents=True, exist_ok=True)
    for path in sorted(source.glob("*.ipynb")):
        shutil.copy2(path, target / path.name)


def setup(app: Any) -> dict[str, Any]:
    app.connect("html-page-context", _add_box)
    app.connect("build-finished", _copy_editions)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
