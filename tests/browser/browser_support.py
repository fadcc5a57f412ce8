"""Where the built book is and what it holds: shared by the browser tests and their fixtures."""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlsplit

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
# The source tree the site was built from (its _toc.yml and _config.yml): this repository,
# unless the site under test was built from a copy elsewhere.
BOOK_ROOT = Path(os.environ.get("ATTNLAB_BOOK_ROOT", REPO)).resolve()
SITE = Path(os.environ.get("ATTNLAB_SITE", REPO / "_build" / "html")).resolve()
SCREENSHOTS = Path(os.environ.get("ATTNLAB_SCREENSHOTS", SITE.parent / "screenshots")).resolve()
CHROMIUM = os.environ.get("ATTNLAB_CHROMIUM", "/usr/bin/chromium")
ON_CI = os.environ.get("CI", "").lower() == "true"
WIDTH, HEIGHT = 1280, 900

# Chromium with nothing that phones home; the profile is a fresh temporary folder per run.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

# Folders of the built site that hold assets, not pages.
ASSET_DIRS = {"_static", "_sources", "_images", "_downloads", "mathjax"}
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}


# ---- what the site holds ----------------------------------------------------------------------
def discover_pages(site: Path = SITE) -> list[str]:
    """Every HTML page of the built site, as a path relative to its root ('book/intro.html').

    ``index.html`` is left out: Jupyter Book writes it as a redirect to the root page, which
    ``test_index_redirects`` checks on its own.
    """
    if not site.is_dir():
        return []
    pages = []
    for path in sorted(site.rglob("*.html")):
        rel = path.relative_to(site)
        if rel.parts[0] in ASSET_DIRS or rel.as_posix() == "index.html":
            continue
        pages.append(rel.as_posix())
    return pages


def toc_files(toc_path: Path = BOOK_ROOT / "_toc.yml") -> list[str]:
    """Every page named in ``_toc.yml`` (the root first), without its extension."""
    import yaml

    toc = yaml.safe_load(toc_path.read_text(encoding="utf-8"))
    files = [toc["root"]]

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if "file" in node:
                files.append(node["file"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk({key: value for key, value in toc.items() if key != "root"})
    return [re.sub(r"\.(md|ipynb)$", "", f) for f in files]


def notebook_source(page: str, site: Path = SITE) -> Path | None:
    """The ``.ipynb`` copy the site ships for a notebook page, or None for a MyST page."""
    candidate = site / "_sources" / (page.removesuffix(".html") + ".ipynb")
    return candidate if candidate.is_file() else None


def is_loopback(url: str) -> bool:
    """True for URLs that stay on this machine (or never leave the page: data:, blob:)."""
    parts = urlsplit(url)
    if parts.scheme in {"data", "blob", "about", "chrome-error"}:
        return True
    return (parts.hostname or "") in LOOPBACK_HOSTS


def screenshot_path(page: str) -> Path:
    """Where the screenshot of ``page`` ('book/intro.html') goes: ``book__intro.png``."""
    return SCREENSHOTS / (page.removesuffix(".html").replace("/", "__") + ".png")


# Raw TeX a reader should never see: delimiters MathJax did not consume, or TeX commands.
RAW_TEX_PATTERNS = [
    re.compile(r"\\\(|\\\)|\\\[|\\\]"),
    re.compile(r"\$\$"),
    re.compile(r"\\begin\{|\\end\{"),
    re.compile(r"\$[^$\s][^$]{0,200}?[\\^_{}][^$]{0,200}?\$"),
    re.compile(r"\\[A-Za-z]+\{"),
]


def find_raw_tex(text: str) -> list[str]:
    """Fragments of ``text`` that look like TeX that was never typeset."""
    hits = []
    for pattern in RAW_TEX_PATTERNS:
        for match in pattern.finditer(text):
            start, end = max(0, match.start() - 30), min(len(text), match.end() + 30)
            hits.append(text[start:end].replace("\n", " "))
    return hits


# A path on the machine that executed a notebook (a traceback, a saved file) tells the reader
# nothing and leaks the build machine's layout.
LOCAL_PATH = re.compile(r"(?<![\w.:/~-])/(?:root|home|tmp|work|Users|var|opt)/[\w.+-]+(?:/\S*)?")


def find_local_paths(text: str) -> list[str]:
    """Absolute paths of the executing machine visible in a page's text."""
    return sorted(set(LOCAL_PATH.findall(text)))
