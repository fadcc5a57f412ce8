"""Tests of attnlab.grade on the fixture class (honest, wrong, crashing, hanging students).

One grading run (module fixture) over a temporary copy of ``tests/fixtures/submissions``
plus three more students made here: dave (a malformed file), reference (the instructor's
notebook with its solutions) and blank (the untouched student version from attnlab.assign).
The expected grades below are written by hand from the table in
``tests/fixtures/make_fixtures.py``, which says what each student did.

Set ``ATTNLAB_GRADE_REAL=1`` to also grade every chapter in ``notebooks/`` and its student
version end to end (slow: one kernel per notebook).
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import time
from pathlib import Path

import pytest
from _grading import require_sandbox

from attnlab.assign import assign
from attnlab.exercises import ExerciseFailure, check, register
from attnlab.grade import COLUMNS, Submission, grade, grade_notebook, main

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures"
COURSEWORK = FIXTURES / "coursework"
NAME = "softmax_hw.ipynb"
TIMEOUT = 10.0  # seconds per notebook: erin's endless loop costs exactly this

# student -> exercise -> (passed, a phrase the message must contain); and how the run ended.
EXPECTED = {
    "alice": ({"99.1": (True, "matches attnlab.softmax"), "99.2": (True, "log(4)")}, "completed"),
    "bob": (
        {"99.1": (False, "on logits of size about 1000"), "99.2": (False, "got 0.2500")},
        "completed; errors in code cells 3, 5",  # the two failing `assert check(...)` cells
    ),
    "carol": (  # her answer cell raised ImportError, so the name was never defined
        {"99.1": (False, "the notebook defines no `stable_softmax`"), "99.2": (True, "log(4)")},
        "completed; errors in code cells 2, 3",  # her ImportError, then the check's NameError
    ),
    "dave": (
        {"99.1": (False, "malformed notebook"), "99.2": (False, "malformed notebook")},
        "malformed",
    ),
    "erin": (  # the endless loop is interrupted after the notebook's whole time limit (the
        # cell limit is the same); the cells after it are not run, yet her answers are still
        # evaluated: 99.1 passes, 99.2 is the 0.0 her loop started from
        {"99.1": (True, "matches attnlab.softmax"), "99.2": (False, "got 0.0000")},
        f"completed; timeout in code cell 4 (limit {TIMEOUT:g} s, interrupted); notebook time "
        f"limit ({TIMEOUT:g} s) reached: code cells from 5 on not run",
    ),
    "frank": (  # the segfaulting cell is skipped in a fresh kernel; 99.1 keeps its grade
        {"99.1": (True, "matches attnlab.softmax"),
         "99.2": (False, "the notebook defines no `uniform_entropy`")},
        "completed; kernel died in code cell 4 (skipped, the other cells re-ran in a fresh "
        "kernel); errors in code cell 5",
    ),
    "gina": (  # an empty folder: she handed nothing in
        {"99.1": (False, "notebook not submitted"), "99.2": (False, "notebook not submitted")},
        "not submitted",
    ),
    "reference": (
        {"99.1": (True, "matches attnlab.softmax"), "99.2": (True, "log(4)")},
        "completed",
    ),
    "deaf": (  # ignores the interrupt in an endless loop: skipped, the rest re-runs
        {"99.1": (True, "matches attnlab.softmax"), "99.2": (True, "log(4)")},
        f"completed; timeout in code cell 4 (limit {TIMEOUT:g} s, ignored the interrupt: "
        "skipped)",
    ),
    "blank": (
        {
            "99.1": (False, "not answered yet"),
            "99.2": (False, "the notebook defines no `uniform_entropy`"),
        },
        "completed; errors in code cells 3, 4, 5",  # failed check, stub's raise, NameError
    ),
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    require_sandbox()
    root = tmp_path_factory.mktemp("grading")
    submissions = root / "submissions"
    shutil.copytree(FIXTURES / "submissions", submissions)
    (submissions / "dave").mkdir()
    # Every student received the assignment's check module with the notebook; the repository
    # keeps one copy of it (in coursework/) and hands it out here.
    for folder in submissions.iterdir():
        shutil.copy(COURSEWORK / "hw_checks.py", folder)
    text = (submissions / "alice" / NAME).read_text()
    (submissions / "dave" / NAME).write_text(text[: len(text) // 2])  # cut off mid-JSON
    # erin's file carries an error output from her own session in the check cell after her
    # endless loop: a stale output must not be mistaken for what happened while grading.
    erin = json.loads((submissions / "erin" / NAME).read_text())
    erin["cells"][9]["outputs"] = [
        {"output_type": "error", "ename": "StaleError", "evalue": "old", "traceback": []}
    ]
    (submissions / "erin" / NAME).write_text(json.dumps(erin))
    (submissions / "gina").mkdir()
    deaf = json.loads((submissions / "alice" / NAME).read_text())
    looping = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass"
    deaf["cells"].insert(6, {"cell_type": "code", "execution_count": None, "id": "deaf",
                             "metadata": {}, "outputs": [], "source": looping})
    (submissions / "deaf").mkdir()
    shutil.copy(COURSEWORK / "hw_checks.py", submissions / "deaf")
    (submissions / "deaf" / NAME).write_text(json.dumps(deaf))
    shutil.copytree(COURSEWORK, submissions / "reference")
    assign(COURSEWORK, submissions / "blank")
    # A second notebook for alice, with no exercise and a crash: it must still get a row.
    scratch = '{"cells": [{"cell_type": "code", "execution_count": null, "id": "a1",'
    scratch += ' "metadata": {}, "outputs": [], "source": "1 / 0"}], "metadata": {},'
    scratch += ' "nbformat": 4, "nbformat_minor": 5}'
    (submissions / "alice" / "scratch.ipynb").write_text(scratch)
    before = {p: p.read_bytes() for p in submissions.rglob("*") if p.is_file()}
    out = root / "grades.csv"
    started = time.monotonic()
    rows = grade(submissions, out, source=COURSEWORK, timeout=TIMEOUT, jobs=2, progress=False)
    print(f"\ngraded the test folder in {time.monotonic() - started:.1f} s")
    after = {p: p.read_bytes() for p in submissions.rglob("*") if p.is_file()}
    return rows, out, before == after


def test_csv_has_one_row_per_student_notebook_and_exercise(graded):
    rows, out, _ = graded
    with out.open(newline="") as handle:
        reader = csv.DictReader(handle)
        assert reader.fieldnames == COLUMNS
        assert list(reader) == rows
    keys = [(r["student"], r["notebook"], r["exercise"]) for r in rows]
    expected_keys = [(s, NAME, e) for s in sorted(EXPECTED) for e in ("99.1", "99.2")]
    expected_keys.insert(0, ("alice", "scratch.ipynb", ""))  # "scratch" sorts before "softmax"
    assert keys == expected_keys


@pytest.mark.parametrize("student", sorted(EXPECTED))
def test_each_submission_gets_the_right_grades(graded, student):
    rows, _, _ = graded
    verdicts, run = EXPECTED[student]
    mine = {r["exercise"]: r for r in rows if r["student"] == student and r["notebook"] == NAME}
    assert sorted(mine) == sorted(verdicts)
    for exercise, (passed, phrase) in verdicts.items():
        row = mine[exercise]
        assert row["passed"] == ("1" if passed else "0"), row
        assert row["points"] == ("1" if passed else "0") and row["max_points"] == "1", row
        assert phrase in row["message"], row
        assert row["run"] == run, row
        assert "\n" not in row["message"]


def test_a_notebook_without_exercises_still_reports_its_crash(graded):
    rows, _, _ = graded
    (row,) = [r for r in rows if r["notebook"] == "scratch.ipynb"]
    assert row["student"] == "alice" and row["exercise"] == "" and row["passed"] == "0"
    assert row["run"] == "completed; errors in code cell 1"
    assert "no exercise to grade" in row["message"]


def test_the_hanging_notebook_is_stopped_near_its_time_limit(graded):
    rows, _, _ = graded
    seconds = float(next(r["seconds"] for r in rows if r["student"] == "erin"))
    assert TIMEOUT <= seconds < TIMEOUT + 60  # start-up and shut-down of a loaded machine


def test_grading_leaves_the_submissions_untouched(graded):
    # Notebooks run from an in-memory copy, in a temporary working folder.
    _, _, unchanged = graded
    assert unchanged


# ---- checks declared the old way (a function) ----------------------------------------------
@register("99.9")
def _is_three(answer) -> str:
    if answer != 3:
        raise ExerciseFailure(f"expected 3, got {answer!r}")
    return "three"


def test_a_check_registered_as_a_function_still_works_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert check("99.9", 4, verbose=False) is False
    assert check("99.9", 3, verbose=False) is True
    assert list(tmp_path.iterdir()) == []


def test_malformed_notebook_without_reference_gets_one_row(tmp_path):
    path = tmp_path / "broken.ipynb"
    path.write_text('{"cells": [')
    (row,) = grade_notebook(Submission("zoe", path, "broken.ipynb"))
    assert row["exercise"] == "" and row["passed"] == "0" and row["run"] == "malformed"


def test_command_rejects_a_missing_or_empty_folder(tmp_path, capsys):
    assert main([str(tmp_path / "missing"), "--out", str(tmp_path / "g.csv")]) == 2
    assert main([str(tmp_path), "--out", str(tmp_path / "g.csv")]) == 2
    assert "no notebook" in capsys.readouterr().err
    assert not (tmp_path / "g.csv").exists()


# ---- opt-in: the real chapters, end to end --------------------------------------------------
@pytest.mark.skipif(
    os.environ.get("ATTNLAB_GRADE_REAL") != "1", reason="slow; set ATTNLAB_GRADE_REAL=1"
)
def test_real_chapters_reference_passes_and_student_version_fails(tmp_path):
    notebooks = ROOT / "notebooks"
    submissions = tmp_path / "submissions"
    shutil.copytree(notebooks, submissions / "reference")
    assign(notebooks, submissions / "student")
    require_sandbox()
    rows = grade(submissions, tmp_path / "g.csv", source=notebooks, timeout=600, jobs=2)
    graded = [r for r in rows if r["exercise"]]
    assert graded, "no exercise with a check in notebooks/"
    for row in graded:
        assert row["passed"] == ("1" if row["student"] == "reference" else "0"), row
