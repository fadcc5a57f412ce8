"""Sphinx fix for the rendered book: each inline script once per page.

Sphinx 7.4 registers an inline script (``app.add_js_file(None, body=...)``) that an extension
adds after the builder started twice: once as ``None`` and once as ``''`` (its dedup compares
the two as different). sphinx-thebe adds ``const THEBE_JS_URL = ...`` that way, so every page
threw "Identifier 'THEBE_JS_URL' has already been declared" in the browser console. This
extension drops the second copy of any script with the same file and body.
"""

from __future__ import annotations

from typing import Any


def _dedupe_scripts(app: Any, pagename: str, template: str, context: dict, doctree: Any) -> None:
    seen: set[tuple[str, str]] = set()
    unique = []
    for script in context.get("script_files", []):
        filename = getattr(script, "filename", script) or ""
        key = (str(filename), str(getattr(script, "attributes", {}).get("body", "")))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    context["script_files"] = unique


def setup(app: Any) -> dict[str, Any]:
    app.connect("html-page-context", _dedupe_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
