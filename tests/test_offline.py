"""The built book reads offline: no page needs a script, stylesheet, font or image from the web.

A static check of the built HTML (``_build/html``, or ``ATTNLAB_SITE``): every script,
stylesheet, preload, icon, image and frame a page loads is a file of the site itself, and so is
everything the site's CSS imports. Links (``<a href>``) to the repository, Colab or Binder are
fine: a reader follows them on purpose. Thebe's address is a string in an inline script that is
used only when a reader clicks "live code", so it is not a load. The browser tests
(tests/browser) check the same thing live, by failing on any request that leaves loopback.
Skipped, with the reason, when the book has not been built.
"""

from __future__ import annotations

import os
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SITE = Path(os.environ.get("ATTNLAB_SITE", ROOT / "_build" / "html")).resolve()
BOOK_ROOT = Path(os.environ.get("ATTNLAB_BOOK_ROOT", ROOT)).resolve()  # tree the site came from
ASSET_DIRS = {"_static", "_sources", "_images", "_downloads", "mathjax"}
LOADED_RELS = {"stylesheet", "preload", "modulepreload", "icon", "manifest", "prefetch"}
CSS_URL = re.compile(r"""(?:@import\s+(?:url\()?|url\()\s*["']?([^"')\s]+)""")

pytestmark = pytest.mark.skipif(
    not (SITE / "index.html").is_file(),
    reason=f"no built book at {SITE}: run `make book` first (or set ATTNLAB_SITE)",
)


class AssetParser(HTMLParser):
    """Collects what a page loads: (tag, url) pairs, and the text of inline <style> blocks."""

    def __init__(self) -> None:
        super().__init__()
        self.loads: list[tuple[str, str]] = []
        self.styles: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag in {"script", "img", "iframe", "audio", "video", "source", "embed", "track"}:
            if a.get("src"):
                self.loads.append((tag, a["src"]))
            for candidate in a.get("srcset", "").split(","):
                if candidate.strip():
                    self.loads.append((tag, candidate.split()[0]))
        elif tag == "link" and LOADED_RELS & set(a.get("rel", "").lower().split()):
            self.loads.append((f"link rel={a['rel']}", a.get("href", "")))
        elif tag == "object" and a.get("data"):
            self.loads.append((tag, a["data"]))
        elif tag == "style":
            self._in_style = True
        if a.get("style"):
            self.styles.append(a["style"])

    def handle_endtag(self, tag: str) -> None:
        if tag == "style":
            self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.styles.append(data)


def is_external(url: str) -> bool:
    return url.startswith("//") or urlsplit(url).scheme in {"http", "https", "ftp", "ws", "wss"}


def pages() -> list[Path]:
    if not SITE.is_dir():
        return []
    return [
        p for p in sorted(SITE.rglob("*.html")) if p.relative_to(SITE).parts[0] not in ASSET_DIRS
    ]


def parse(page: Path) -> AssetParser:
    parser = AssetParser()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


def local_target(base: Path, url: str) -> Path | None:
    """The site file a relative URL points at (None for data: and other non-file URLs)."""
    parts = urlsplit(url)
    if parts.scheme or not parts.path:
        return None
    return (base.parent / unquote(parts.path)).resolve()


def test_the_site_has_pages():
    assert len(pages()) >= 2, f"no pages found under {SITE}"


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.relative_to(SITE).as_posix())
def test_page_loads_nothing_from_the_network(page: Path):
    parsed = parse(page)
    external = [f"<{tag}> {url}" for tag, url in parsed.loads if is_external(url)]
    external += [f"<style> {url}" for s in parsed.styles for url in CSS_URL.findall(s)
                 if is_external(url)]  # fmt: skip
    assert not external, f"{page.name} needs the network to be read: {external}"


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.relative_to(SITE).as_posix())
def test_page_assets_exist_in_the_site(page: Path):
    missing = []
    for tag, url in parse(page).loads:
        target = local_target(page, url)
        if target is not None and not target.is_file():
            missing.append(f"<{tag}> {url}")
    assert not missing, f"{page.name} loads files the site does not have: {missing}"


class LinkParser(HTMLParser):
    """Every ``<a href>`` of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        href = dict(attrs).get("href")
        if tag == "a" and href:
            self.hrefs.append(href)


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.relative_to(SITE).as_posix())
def test_page_links_resolve_in_the_site(page: Path):
    # e.g. the intro page's link to the PDF, which make pdf builds and the HTML build copies in
    parser = LinkParser()
    parser.feed(page.read_text(encoding="utf-8"))
    broken = []
    for href in parser.hrefs:
        if is_external(href) or href.startswith(("#", "mailto:", "javascript:")):
            continue
        target = local_target(page, href)
        if target is not None and not (target.is_file() or (target / "index.html").is_file()):
            broken.append(href)
    assert not broken, f"{page.name} links to files the site does not have: {broken}"


def stylesheets() -> list[Path]:
    """Every CSS file some page of the site loads."""
    found = set()
    for page in pages():
        for tag, url in parse(page).loads:
            target = local_target(page, url)
            if tag.startswith("link") and target is not None and target.suffix == ".css":
                found.add(target)
    return sorted(found)


def test_stylesheets_import_nothing_from_the_network():
    sheets = [s for s in stylesheets() if s.is_file()]
    assert sheets, "the site's pages load no stylesheet at all"
    external = {
        s.relative_to(SITE).as_posix(): [
            u for u in CSS_URL.findall(s.read_text()) if is_external(u)
        ]
        for s in sheets
    }
    external = {k: v for k, v in external.items() if v}
    assert not external, f"stylesheets that fetch from the network: {external}"


def test_mathjax_is_shipped_and_configured_locally():
    config = yaml.safe_load((BOOK_ROOT / "_config.yml").read_text(encoding="utf-8"))
    path = config["sphinx"]["config"]["mathjax_path"]
    assert not is_external(path), f"mathjax_path {path} is on the network"
    math_pages = [p for p in pages() if 'class="math' in p.read_text(encoding="utf-8")]
    assert math_pages, "no page of the book has maths: the MathJax check would check nothing"
    for page in math_pages:
        scripts = [url for tag, url in parse(page).loads if tag == "script" and "mathjax" in url]
        assert scripts, f"{page.name} has maths but loads no MathJax"
        for url in scripts:
            target = local_target(page, url)
            assert target is not None and target.is_file(), f"{page.name}: MathJax {url} missing"
            assert target.name == "tex-svg-full.js", f"{page.name} loads {target.name}"


def test_is_external_and_css_url():
    assert is_external("https://unpkg.com/x.js") and is_external("//cdn.example/x.css")
    assert not is_external("../_static/x.js") and not is_external("data:image/png;base64,AA")
    css = "@import url('https://fonts.example/a.css'); b { background: url(../img/x.png) }"
    assert CSS_URL.findall(css) == ["https://fonts.example/a.css", "../img/x.png"]
