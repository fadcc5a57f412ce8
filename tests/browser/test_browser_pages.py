"""Every page of the built book, as a reader's browser shows it (see conftest.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest
import yaml
from browser_support import (
    BOOK_ROOT,
    SITE,
    discover_pages,
    is_loopback,
    notebook_source,
    screenshot_path,
    toc_files,
)

from attnlab.course.markup import blocks_in

CONFIG = yaml.safe_load((BOOK_ROOT / "_config.yml").read_text(encoding="utf-8"))


# ---- the site as a whole ------------------------------------------------------------------------
def test_every_toc_page_was_built(site: Path) -> None:
    """Each page of _toc.yml is in the site, so the per-page tests below cover the whole book."""
    built = set(discover_pages(site))
    missing = [f for f in toc_files() if f + ".html" not in built]
    assert not missing, f"pages in _toc.yml with no HTML in {site}: {missing}"


def test_index_redirects_to_the_root_page(visit, base_url: str, browser_context) -> None:
    tab = browser_context.new_page()
    try:
        tab.goto(base_url + "index.html", wait_until="load")
        tab.wait_for_url(f"**/{toc_files()[0]}.html")
    finally:
        tab.close()


# ---- one set of checks per page -----------------------------------------------------------------
def test_no_console_errors(visit, page: str) -> None:
    seen = visit(page)
    assert not seen.console_errors, f"{page}: console errors: {seen.console_errors}"
    assert not seen.failed_requests, f"{page}: failed requests: {seen.failed_requests}"


def test_page_declares_its_icon(visit, page: str) -> None:
    """Without <link rel="icon"> a browser asks the server root for /favicon.ico: a 404 in
    the console of every reader (on GitHub Pages the root is not even the book's folder)."""
    seen = visit(page)
    assert seen.icons, f"{page}: no <link rel='icon'> (set html.favicon in _config.yml)"
    assert all(is_loopback(icon) for icon in seen.icons), f"{page}: icon {seen.icons}"


def test_no_request_leaves_loopback(visit, page: str) -> None:
    seen = visit(page)
    assert not seen.external_requests, (
        f"{page} asked the network for {seen.external_requests}; the book must read offline"
    )


def test_maths_is_typeset(visit, page: str) -> None:
    seen = visit(page)
    if seen.math_elements:
        assert seen.mathjax == "typeset", f"{page}: MathJax {seen.mathjax}"
    assert not seen.math_untypeset, f"{page}: maths left untypeset: {seen.math_untypeset}"
    assert not seen.math_errors, f"{page}: MathJax errors (bad TeX?): {seen.math_errors}"
    assert not seen.raw_tex, f"{page}: raw TeX visible to the reader: {seen.raw_tex}"


def test_no_local_paths_on_page(visit, page: str) -> None:
    seen = visit(page)
    assert not seen.local_paths, (
        f"{page} shows paths of the machine that ran it (tracebacks? print a short message "
        f"instead): {seen.local_paths[:5]}"
    )


def test_every_image_loads(visit, page: str) -> None:
    seen = visit(page)
    assert not seen.broken_images, f"{page}: images that did not load: {seen.broken_images}"
    assert not seen.output_images_without_alt, (
        f"{page}: figures without alt text: {seen.output_images_without_alt}"
    )


def test_no_table_left_as_text(visit, page: str) -> None:
    """A Markdown table (a cell's ``display(Markdown(...))`` or the prose) renders as a table,
    never as a paragraph of pipes and dashes."""
    seen = visit(page)
    assert not seen.pipe_tables, f"{page}: Markdown tables shown as text: {seen.pipe_tables}"


def test_no_empty_outputs(visit, page: str) -> None:
    seen = visit(page)
    assert seen.empty_outputs == 0, f"{page}: {seen.empty_outputs} empty cell output(s)"


def test_page_does_not_scroll_sideways(visit, page: str, layout_report) -> None:
    """At 1280 px a wide equation or table may scroll in its own box, never the whole page."""
    seen = visit(page)
    if seen.scrolled_elements:
        layout_report[page] = seen.scrolled_elements
    assert seen.page_overflow_px == 0, (
        f"{page} is {seen.page_overflow_px} px wider than a 1280 px window; "
        f"wide blocks: {seen.scrolled_elements}"
    )


def test_sidebar_lists_every_chapter(visit, page: str, base_url: str) -> None:
    seen = visit(page)
    expected = {base_url + f + ".html" for f in toc_files()}
    missing = sorted(expected - seen.sidebar_links)
    assert not missing, f"{page}: sidebar lacks {missing}"


def test_screenshot_taken(visit, page: str) -> None:
    visit(page)
    shot = screenshot_path(page)
    assert shot.is_file() and shot.stat().st_size > 0, f"no screenshot {shot}"
    with shot.open("rb") as handle:
        header = handle.read(24)
    width = int.from_bytes(header[16:20], "big")
    assert header[:8] == b"\x89PNG\r\n\x1a\n" and width == 1280, f"{shot}: width {width}"


# ---- exercises: solutions are dropdowns, collapsed until clicked --------------------------------
def _expected_solutions(notebook: Path) -> int:
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    plain = [b for b in blocks_in(cells) if b.kind == "solution"]  # attnlab.course.markup
    return text.count("{solution-start}") + text.count("{solution}") + len(plain)


def _expected_exercises(notebook: Path) -> list[tuple[str, str]]:
    """(label, title as the book shows it) of each plain-Markdown exercise of a notebook."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return [
        (b.label, re.sub(r"\$[^$]+\$", "$math$", f"Exercise ({b.exercise_id} · {b.title})"))
        for b in blocks_in(cells)
        if b.kind == "exercise"
    ]


def test_exercises_are_admonitions_with_their_titles_and_solutions(visit, page: str) -> None:
    """Each exercise cell of the notebook is a sphinx-exercise admonition on its page: its
    label as anchor, "Exercise (NN.k · Title)" as title (a formula in it compared as "$math$"),
    its maths typeset, no markup left of
    the notebook's heading, and its solution dropdown right after it, linking back to it."""
    seen = visit(page)
    notebook = notebook_source(page)
    expected = _expected_exercises(notebook) if notebook is not None else []
    # (Sphinx's smart quotes turn the apostrophe of "PyTorch's" into a typographic one.)
    shown = [(e["id"], e["title"].strip().replace("\u2019", "'")) for e in seen.exercises]
    assert shown == expected, page
    for exercise in seen.exercises:
        name = f"{page}: {exercise['id']}"
        assert "exercise" in exercise["classes"].split() and exercise["body"].strip(), name
        assert "**" not in exercise["body"] and ":label:" not in exercise["body"], name
        assert exercise["untypeset"] == 0, f"{name}: maths not typeset"
        assert "solution" in exercise["next"].split() and "dropdown" in exercise["next"], name
        assert exercise["solutionFor"] == f"#{exercise['id']}", name


def test_solution_dropdowns(visit, page: str) -> None:
    seen = visit(page)
    notebook = notebook_source(page)
    if notebook is not None:
        expected = _expected_solutions(notebook)
        assert len(seen.solutions) == expected, (
            f"{page}: {expected} solution(s) in the notebook, {len(seen.solutions)} on the page"
        )
    for solution in seen.solutions:
        name = f"{page}: {solution['id']}"
        assert solution["dropdown"], f"{name} is not a dropdown (add `:class: dropdown`)"
        assert solution["has_button"], f"{name} has no toggle button"
        assert solution["hidden_before"], f"{name} is open before any click"
        assert solution["visible_after"], f"{name} did not open on click"


def test_some_page_has_an_exercise(visit, site: Path) -> None:
    """The exercise checks above must check something: the chapters have exercises."""
    pages = [p for p in discover_pages(site) if notebook_source(p) is not None]
    assert sum(len(visit(p).exercises) for p in pages) >= 30


def test_some_page_has_a_solution_dropdown(visit, site: Path) -> None:
    """The dropdown checks above must check something once a chapter has exercises."""
    pages = [p for p in discover_pages(site) if notebook_source(p) is not None]
    with_solutions = [p for p in pages if _expected_solutions(notebook_source(p)) > 0]
    if not with_solutions:
        pytest.skip("no notebook page has a solution yet")
    assert any(visit(p).solutions for p in with_solutions)


# ---- launch and download buttons on notebook pages ----------------------------------------------
def _repo_slug() -> str:
    url = CONFIG["repository"]["url"].rstrip("/").removesuffix(".git")
    return "/".join(urlsplit(url).path.strip("/").split("/")[:2])


def test_launch_and_download_buttons(visit, notebook_page: str, base_url: str, browser_context):
    if notebook_page.startswith("<"):
        pytest.skip("no notebook page in the built site yet")
    seen = visit(notebook_page)
    branch = CONFIG["repository"].get("branch", "main")
    ipynb = notebook_page.removesuffix(".html") + ".ipynb"
    assert (BOOK_ROOT / ipynb).is_file(), f"the launch buttons would point at a missing {ipynb}"
    hrefs = [link["href"] for link in seen.links]
    colab = CONFIG["launch_buttons"]["colab_url"].rstrip("/")
    binder = CONFIG["launch_buttons"]["binderhub_url"].rstrip("/")
    colab_url = f"{colab}/github/{_repo_slug()}/blob/{branch}/{ipynb}"
    assert colab_url in hrefs, f"{notebook_page}: no Colab button to {colab_url}"
    binder_prefix = f"{binder}/v2/gh/{_repo_slug()}/{branch}"
    assert any(h.startswith(binder_prefix) and h.endswith(ipynb) for h in hrefs), (
        f"{notebook_page}: no Binder button to {binder_prefix}…{ipynb}"
    )
    downloads = [h for h in hrefs if is_loopback(h) and h.endswith(".ipynb")]
    assert downloads, f"{notebook_page}: no .ipynb download button"
    response = browser_context.request.get(urljoin(base_url, urlsplit(downloads[0]).path))
    assert response.ok, f"{notebook_page}: .ipynb download gives HTTP {response.status}"
    assert json.loads(response.body())["cells"], "the downloaded notebook has no cells"


def test_student_edition_buttons(visit, notebook_page: str, base_url: str, browser_context):
    """Each chapter page links to its student edition on Colab, on Binder and as a download;
    the download is the stub notebook (no solution, a note on how to submit it)."""
    if notebook_page.startswith("<"):
        pytest.skip("no notebook page in the built site yet")
    if not notebook_page.startswith("notebooks/"):
        pytest.skip("not a chapter")
    seen = visit(notebook_page)
    branch = CONFIG["repository"].get("branch", "main")
    edition = "student/" + notebook_page.split("/", 1)[1].removesuffix(".html") + ".ipynb"
    assert (BOOK_ROOT / edition).is_file(), f"no committed {edition} (make student)"
    hrefs = [link["href"] for link in seen.links]
    colab = CONFIG["launch_buttons"]["colab_url"].rstrip("/")
    binder = CONFIG["launch_buttons"]["binderhub_url"].rstrip("/")
    colab_url = f"{colab}/github/{_repo_slug()}/blob/{branch}/{edition}"
    assert colab_url in hrefs, f"{notebook_page}: no student-edition Colab link {colab_url}"
    assert any(
        h.startswith(f"{binder}/v2/gh/{_repo_slug()}/{branch}") and h.endswith(edition)
        for h in hrefs
    ), f"{notebook_page}: no student-edition Binder link"
    downloads = [h for h in hrefs if is_loopback(h) and h.endswith(edition)]
    assert downloads, f"{notebook_page}: no download of {edition}"
    response = browser_context.request.get(urljoin(base_url, urlsplit(downloads[0]).path))
    assert response.ok, f"{notebook_page}: {edition} gives HTTP {response.status}"
    cells = json.loads(response.body())["cells"]
    note = "".join(next(c["source"] for c in cells if c.get("id") == "attnlab-student-note"))
    assert "How to submit" in note
    assert not any("solution" in c.get("metadata", {}).get("tags", []) for c in cells)


# ---- search -------------------------------------------------------------------------------------
def test_search_finds_softmax(site: Path, base_url: str, browser_context) -> None:
    tab = browser_context.new_page()
    errors: list[str] = []
    tab.on(
        "console",
        lambda msg: (
            errors.append(f"{msg.text} (at {msg.location.get('url')})")
            if msg.type == "error"
            else None
        ),
    )
    tab.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    try:
        tab.goto(base_url + "search.html?q=softmax", wait_until="load")
        # Sphinx writes a summary paragraph once the search has finished.
        tab.wait_for_selector("#search-results .search-summary", state="attached")
        tab.wait_for_function(
            "() => !document.querySelector('#search-results .search-summary')"
            ".textContent.includes('Searching')"
        )
        hits = tab.locator("#search-results ul.search li a").evaluate_all(
            "links => links.map(a => a.href)"
        )
    finally:
        tab.close()
    assert not errors, f"search page console errors: {errors}"
    assert hits, "searching the book for 'softmax' finds nothing"
    for hit in hits:
        path = urlsplit(hit).path.lstrip("/")
        assert (SITE / path).is_file(), f"search result points at a missing page: {hit}"
