"""The committed student editions (``student/``) are what ``python -m attnlab.assign`` makes today.

Colab and Binder open notebooks from the repository, so the book links to committed files;
these tests keep them from going stale (``make student`` rewrites them) and check what a
student finds in each: the note on how to submit under the right name, and no solution.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from attnlab.course.assign import read_notebook
from attnlab.course.student import SOLUTION_TAG, student_version

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_there_is_one_edition_per_chapter_and_nothing_else():
    editions = sorted(p.name for p in (ROOT / "student").iterdir())
    assert editions == [p.name for p in CHAPTERS], "run `make student` to rewrite student/"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_each_edition_is_the_transform_of_todays_chapter(chapter):
    expected = nbformat.writes(student_version(read_notebook(chapter), filename=chapter.name))
    stored = (ROOT / "student" / chapter.name).read_text(encoding="utf-8")
    assert stored.rstrip("\n") == expected.rstrip("\n"), (
        f"student/{chapter.name} is stale: run `make student`"
    )


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_each_edition_says_how_to_submit_and_holds_no_solution(chapter):
    edition = nbformat.read(ROOT / "student" / chapter.name, as_version=4)
    note = next(c for c in edition.cells if c.get("id") == "attnlab-student-note")
    assert "How to submit" in note.source and f"`{chapter.name}`" in note.source
    assert not any(SOLUTION_TAG in c.metadata.get("tags", []) for c in edition.cells)
    assert not any(c.get("outputs") for c in edition.cells if c.cell_type == "code")
