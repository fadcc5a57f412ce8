"""Browser tests of the rendered book: serve the built site on loopback, read it in Chromium.

These tests open every page of the built HTML book in headless Chromium (Debian's
``/usr/bin/chromium`` driven by Playwright) and check what a reader sees. They need a built
site, so they run as the last stage of ``make test``, after the book build, and are *not*
collected by the unit stage's plain ``pytest tests/``:

- ``pytest tests/browser`` (the directory named on the command line) runs them;
- ``ATTNLAB_BROWSER=1 pytest tests/`` runs them too;
- a run that does not name this directory skips collecting it entirely.

Environment variables (all optional):

``ATTNLAB_SITE``
    The built HTML to test (default ``_build/html`` in the repository).
``ATTNLAB_BOOK_ROOT``
    The source tree the site was built from, for its ``_toc.yml`` and ``_config.yml``
    (default: this repository).
``ATTNLAB_SCREENSHOTS``
    Where the 1280 px full-page screenshots go (default ``screenshots/`` next to the site,
    that is ``_build/screenshots/``).
``ATTNLAB_CHROMIUM``
    The browser executable (default ``/usr/bin/chromium``).
``CI``
    When ``true``, a missing browser, Playwright or site is a failure; elsewhere it is a skip
    with a loud reason.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from browser_support import (
    CHROMIUM,
    CHROMIUM_FLAGS,
    HEIGHT,
    HERE,
    ON_CI,
    SCREENSHOTS,
    SITE,
    WIDTH,
    discover_pages,
    find_local_paths,
    find_raw_tex,
    is_loopback,
    notebook_source,
    screenshot_path,
)


# ---- collection: only when asked for ------------------------------------------------------------
def _browser_tests_requested(config: pytest.Config) -> bool:
    """True when this directory (or a file in it) is named on the command line, or env asks."""
    if os.environ.get("ATTNLAB_BROWSER") == "1":
        return True
    for arg in config.args:
        path = Path(arg.split("::")[0])
        if not path.is_absolute():
            path = Path(config.invocation_params.dir) / path
        path = path.resolve()
        if path == HERE or HERE in path.parents:
            return True
    return False


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Leave the browser tests out of a run that did not ask for them (the unit stage)."""
    if collection_path.parent == HERE and not _browser_tests_requested(config):
        return True
    return None


def unavailable(reason: str) -> None:
    """Fail under CI, skip loudly elsewhere."""
    message = f"BROWSER TESTS NOT RUN: {reason}"
    if ON_CI:
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``page`` over every page of the built site (discovered, not listed)."""
    if "page" in metafunc.fixturenames:
        pages = discover_pages()
        # No site: one placeholder case, so the `site` fixture can say why (skip or CI failure).
        metafunc.parametrize("page", pages or ["<no built site>"])
    if "notebook_page" in metafunc.fixturenames:
        pages = [p for p in discover_pages() if notebook_source(p) is not None]
        metafunc.parametrize("notebook_page", pages or ["<no notebook page>"])


# ---- the server and the browser -----------------------------------------------------------------
class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (stdlib name)
        pass


@pytest.fixture(scope="session")
def site() -> Path:
    """The built site's folder; skip (or fail under CI) when there is none."""
    if not (SITE / "index.html").is_file():
        unavailable(f"no built book at {SITE}: run `make book` (or set ATTNLAB_SITE)")
    return SITE


@pytest.fixture(scope="session")
def base_url(site: Path) -> Iterator[str]:
    """Serve the site from a thread on a free loopback port; yield its root URL."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="session")
def browser_context(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """One headless Chromium with a fresh profile, a 1280 px viewport and no network."""
    if not Path(CHROMIUM).exists():
        unavailable(f"no browser at {CHROMIUM}: run `bash scripts/ensure_chromium.sh`")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("the Python package `playwright` is not installed (see requirements.txt)")
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": WIDTH, "height": HEIGHT},
            service_workers="block",
        )
        context.set_default_timeout(30_000)
        # Every page is read as on a reader's first visit: nothing remembered from earlier pages.
        context.add_init_script("try { window.localStorage.clear(); } catch (e) {}")
        try:
            yield context
        finally:
            context.close()


# ---- one visit per page: everything the tests assert, collected once ----------------------------
@dataclass
class Visit:
    """What a reader's browser saw on one page."""

    page: str
    console_errors: list[str] = field(default_factory=list)
    external_requests: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)
    mathjax: str = ""
    math_elements: int = 0
    math_untypeset: list[str] = field(default_factory=list)
    math_errors: list[str] = field(default_factory=list)
    raw_tex: list[str] = field(default_factory=list)
    images: int = 0
    broken_images: list[str] = field(default_factory=list)
    output_images_without_alt: list[str] = field(default_factory=list)
    empty_outputs: int = 0
    sidebar_links: set[str] = field(default_factory=set)
    page_overflow_px: int = 0
    scrolled_elements: list[str] = field(default_factory=list)
    solutions: list[dict[str, object]] = field(default_factory=list)
    exercises: list[dict[str, object]] = field(default_factory=list)
    links: list[dict[str, str]] = field(default_factory=list)
    icons: list[str] = field(default_factory=list)
    local_paths: list[str] = field(default_factory=list)
    pipe_tables: list[str] = field(default_factory=list)


# Runs in the page once it has loaded: waits for MathJax and images, then measures.
_MEASURE_JS = r"""
async () => {
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  // MathJax: wait for the library to start, then for its first typeset to finish.
  let mathjax = "absent";
  if (document.querySelector('script[src*="mathjax"]')) {
    for (let i = 0; i < 400; i++) {
      if (window.MathJax && window.MathJax.startup && window.MathJax.startup.promise) break;
      await sleep(25);
    }
    if (window.MathJax && window.MathJax.startup && window.MathJax.startup.promise) {
      await window.MathJax.startup.promise;
      mathjax = "typeset";
    } else {
      mathjax = "did not start";
    }
  }
  // Images: load every one now (lazy ones too) and wait for each to finish or fail.
  const images = Array.from(document.images);
  images.forEach((img) => { img.loading = "eager"; });
  await Promise.all(images.map((img) => img.complete ? null : new Promise((r) => {
    img.addEventListener("load", r, { once: true });
    img.addEventListener("error", r, { once: true });
    setTimeout(r, 10000);
  })));
  const broken = images.filter((img) => !(img.complete && img.naturalWidth > 0))
                      .map((img) => img.getAttribute("src"));
  const noAlt = Array.from(document.querySelectorAll(".cell_output img"))
                     .filter((img) => !(img.getAttribute("alt") || "").trim())
                     .map((img) => img.getAttribute("src"));
  // Maths: every Sphinx math element must hold MathJax output; no MathJax error boxes.
  const maths = Array.from(document.querySelectorAll(".math"));
  const untypeset = maths.filter((el) => !el.querySelector("mjx-container"))
                         .map((el) => el.textContent.trim().slice(0, 80));
  const mathErrors = Array.from(document.querySelectorAll("mjx-merror")).map((el) =>
    (el.getAttribute("data-mjx-error") || el.textContent).slice(0, 80));
  // The page's reading text, without code, scripts and typeset maths (raw TeX is looked for here).
  const skip = "pre, code, script, style, textarea, mjx-container, .highlight";
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT, {
    acceptNode: (node) => node.parentElement && node.parentElement.closest(skip)
      ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT,
  });
  const texts = [];
  while (walker.nextNode()) texts.push(walker.currentNode.nodeValue);
  // Outputs with nothing in them.
  const emptyOutputs = Array.from(document.querySelectorAll(".cell_output")).filter((el) =>
    !el.textContent.trim() && !el.querySelector("img, svg, iframe, video, canvas, table")).length;
  // Sidebar navigation links (absolute URLs, without fragments).
  const sidebar = Array.from(document.querySelectorAll(".bd-sidebar-primary a[href]"))
                       .map((a) => a.href.split("#")[0]);
  // Layout at 1280 px: the page itself must not scroll sideways; wide blocks are listed.
  const root = document.documentElement;
  const overflow = Math.max(0, root.scrollWidth - root.clientWidth);
  const wide = Array.from(document.querySelectorAll(
      "article mjx-container[display='true'], article table, article .cell_output, article pre"))
    .filter((el) => el.scrollWidth > el.clientWidth + 2 && el.clientWidth > 0)
    .map((el) => el.tagName.toLowerCase() + ": " + el.textContent.trim().slice(0, 60));
  const links = Array.from(document.querySelectorAll("a[href]")).map((a) => ({
    href: a.href, text: a.textContent.trim(), title: a.getAttribute("title") || "",
  }));
  // A page without <link rel="icon"> makes every browser ask for /favicon.ico, a 404.
  const icons = Array.from(document.querySelectorAll("link[rel~='icon']")).map((l) => l.href);
  // A Markdown table left as text: a paragraph holding its delimiter row |---|---| (whose
  // dashes Sphinx's smart quotes may have turned into en or em dashes).
  const pipeTables = Array.from(document.querySelectorAll("article p, article li"))
    .filter((el) => /\|\s*:?(?:-{3,}|[\u2013\u2014]+):?\s*\|/.test(el.textContent))
    .map((el) => el.textContent.trim().slice(0, 80));
  const fullText = document.body.innerText;
  // Exercises (sphinx-exercise admonitions): label, title, and what follows each one.
  const exercises = Array.from(document.querySelectorAll("div.exercise")).map((el) => {
    const next = el.nextElementSibling;
    const title = el.querySelector(":scope > .admonition-title");
    const titleCopy = title ? title.cloneNode(true) : document.createElement("p");
    titleCopy.querySelectorAll(".math").forEach((m) => m.replaceWith("$math$"));
    return {
      id: el.id,
      classes: el.className,
      title: titleCopy.textContent,  // each formula as "$math$"
      body: (el.querySelector(":scope > section") || {}).innerText || "",
      untypeset: Array.from(el.querySelectorAll(".math"))
                      .filter((m) => !m.querySelector("mjx-container")).length,
      next: next ? next.className : "",
      solutionFor: next && next.matches("div.solution")
        ? (next.querySelector(".admonition-title a") || {}).getAttribute?.("href") || "" : "",
    };
  });
  return { fullText, exercises, icons, mathjax, images: images.length, broken, noAlt,
           maths: maths.length, untypeset, mathErrors, text: texts.join(" "), emptyOutputs,
           sidebar, overflow, wide, links, pipeTables };
}
"""


def _check_solutions(tab: object) -> list[dict[str, object]]:
    """Every solution on the page: collapsed at first, open after a click on its toggle."""
    results = []
    solutions = tab.locator("div.solution")
    for i in range(solutions.count()):
        solution = solutions.nth(i)
        body = solution.locator(":scope > :not(.admonition-title)").first
        record: dict[str, object] = {
            "id": solution.get_attribute("id") or f"solution {i + 1}",
            "dropdown": "dropdown" in (solution.get_attribute("class") or "").split(),
            "has_body": body.count() > 0,
        }
        record["hidden_before"] = record["has_body"] and not body.is_visible()
        button = solution.locator("button.toggle-button")
        record["has_button"] = button.count() > 0
        if record["has_button"]:
            button.first.click()
            tab.wait_for_timeout(100)
        record["visible_after"] = record["has_body"] and body.is_visible()
        results.append(record)
    return results


@pytest.fixture(scope="session")
def visit(browser_context: object, base_url: str) -> Callable[[str], Visit]:
    """Open a page once (screenshot included) and return what was seen; later calls reuse it."""
    cache: dict[str, Visit] = {}
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    def _visit(page: str) -> Visit:
        if page in cache:
            return cache[page]
        seen = Visit(page)
        tab = browser_context.new_page()

        def on_route(route: object) -> None:
            url = route.request.url
            if is_loopback(url):
                route.continue_()
            else:
                seen.external_requests.append(url)
                route.abort()

        tab.route("**/*", on_route)
        tab.on(
            "console",
            lambda msg: (
                seen.console_errors.append(f"{msg.text} (at {msg.location.get('url')})")
                if msg.type == "error"
                else None
            ),
        )
        tab.on("pageerror", lambda exc: seen.console_errors.append(f"uncaught: {exc}"))
        tab.on(
            "response",
            lambda r: (
                seen.failed_requests.append(f"{r.status} {r.url}") if r.status >= 400 else None
            ),
        )
        tab.on(
            "requestfailed",
            lambda r: (
                seen.failed_requests.append(f"{r.failure} {r.url}") if is_loopback(r.url) else None
            ),
        )
        try:
            tab.goto(base_url + page, wait_until="load")
            measured = tab.evaluate(_MEASURE_JS)
            seen.mathjax = measured["mathjax"]
            seen.math_elements = measured["maths"]
            seen.math_untypeset = measured["untypeset"]
            seen.math_errors = measured["mathErrors"]
            seen.raw_tex = find_raw_tex(measured["text"])
            seen.images = measured["images"]
            seen.broken_images = measured["broken"]
            seen.output_images_without_alt = measured["noAlt"]
            seen.empty_outputs = measured["emptyOutputs"]
            seen.sidebar_links = set(measured["sidebar"])
            seen.page_overflow_px = measured["overflow"]
            seen.scrolled_elements = measured["wide"]
            seen.links = measured["links"]
            seen.icons = measured["icons"]
            seen.local_paths = find_local_paths(measured["fullText"])
            seen.pipe_tables = measured["pipeTables"]
            seen.exercises = measured["exercises"]
            tab.screenshot(path=str(screenshot_path(page)), full_page=True)
            seen.solutions = _check_solutions(tab)
        finally:
            tab.close()
        cache[page] = seen
        return seen

    return _visit


@pytest.fixture(scope="session")
def layout_report() -> Iterator[dict[str, list[str]]]:
    """Collects wide blocks per page; written next to the screenshots for chapter authors."""
    report: dict[str, list[str]] = {}
    yield report
    if report:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        (SCREENSHOTS / "wide_blocks.json").write_text(json.dumps(report, indent=2))
