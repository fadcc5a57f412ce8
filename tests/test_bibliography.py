"""book/references.bib parses, entry by entry (a merge once dropped a closing brace, which
only the book build, minutes later, noticed)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pybtex = pytest.importorskip("pybtex.database")
BIB = Path(__file__).resolve().parents[1] / "book" / "references.bib"


def test_every_entry_of_the_bibliography_parses():
    text = BIB.read_text(encoding="utf-8")
    starts = re.findall(r"^@\w+\{([^,]+),", text, flags=re.M)
    parsed = pybtex.parse_string(text, "bibtex")
    assert sorted(parsed.entries) == sorted(starts), "an entry is unclosed or duplicated"
