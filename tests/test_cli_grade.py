"""Worst cases of the instructor's inputs to ``python -m attnlab.grade`` (not the students').

Every bad option is refused in one line (exit status 2) *before* any notebook runs and
before the CSV is written: a grader that silently clamps ``--jobs 0``, runs with no memory
(every kernel dies: every student fails) or forgets a misspelt ``--source`` (no "not
submitted" rows) hands out wrong grades. Adversarial submissions are in
``tests/test_course_grade.py``; the missing and empty submissions folder in
``tests/test_grade.py``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attnlab.course import grade as course_grade
from attnlab.grade import main

COURSEWORK = Path(__file__).parent / "fixtures" / "coursework"


@pytest.fixture
def subs(tmp_path: Path) -> Path:
    folder = tmp_path / "subs"
    (folder / "alice").mkdir(parents=True)
    shutil.copy(COURSEWORK / "softmax_hw.ipynb", folder / "alice")
    return folder


class Graded(BaseException):
    """Raised if a notebook is graded (a BaseException: the grader's per-notebook
    ``except Exception`` that turns errors into rows does not swallow it)."""


@pytest.fixture(autouse=True)
def no_grading(monkeypatch):
    """Refusals must come before any notebook runs: running one fails the test."""

    def refuse(*args, **kwargs):
        raise Graded("a notebook was graded despite a bad option")

    monkeypatch.setattr("attnlab.course.grade_cli.grade_notebook", refuse)
    monkeypatch.setattr(course_grade, "grade_notebook", refuse)


def _refused(capsys, status: int, *phrases: str) -> None:
    err = capsys.readouterr().err
    assert status == 2, err
    lines = err.strip().splitlines()
    assert "Traceback" not in err and lines, err
    assert all(p in lines[-1] for p in phrases), lines[-1]


def _grade(subs: Path, *options: str) -> int:
    return main([str(subs), "--out", str(subs.parent / "g.csv"), *options])


@pytest.mark.parametrize("jobs", ["0", "-2", "1000000"])
def test_jobs_out_of_range_is_refused(subs, capsys, jobs):
    _refused(capsys, _grade(subs, "--jobs", jobs), "--jobs")
    assert not (subs.parent / "g.csv").exists()


@pytest.mark.parametrize("jobs", ["x", "1.5", ""])
def test_jobs_not_an_integer_is_refused(subs, capsys, jobs):
    with pytest.raises(SystemExit) as exit_:
        _grade(subs, "--jobs", jobs)
    _refused(capsys, exit_.value.code, "--jobs")


@pytest.mark.parametrize("memory", ["0", "-1", "nan", "inf", "-inf"])
def test_memory_not_a_positive_finite_number_is_refused(subs, capsys, memory):
    _refused(capsys, _grade(subs, f"--memory={memory}"), "--memory")
    assert not (subs.parent / "g.csv").exists()


@pytest.mark.parametrize("memory", ["4G", "4GiB", "512M", "4,5", "six"])
def test_memory_with_a_unit_is_refused_and_says_it_takes_gib(subs, capsys, memory):
    with pytest.raises(SystemExit) as exit_:
        _grade(subs, "--memory", memory)
    _refused(capsys, exit_.value.code, "--memory", "GiB")


@pytest.mark.parametrize("timeout", ["0", "-5", "nan", "inf"])
def test_timeout_not_a_positive_finite_number_is_refused(subs, capsys, timeout):
    _refused(capsys, _grade(subs, f"--timeout={timeout}"), "--timeout")


@pytest.mark.parametrize("timeout", ["86401", "1e308"])
def test_a_timeout_beyond_a_day_is_refused(subs, capsys, timeout):
    """1e308 s overflowed the sandbox's CPU limit: every run ended at once, every student
    failed (``the run ended without a report``) and the command exited 0."""
    _refused(capsys, _grade(subs, f"--timeout={timeout}"), "--timeout", "86400")


def test_a_missing_source_is_refused(subs, capsys, tmp_path):
    _refused(capsys, _grade(subs, "--source", str(tmp_path / "notebok")), "--source", "notebok")
    assert not (subs.parent / "g.csv").exists()


def test_a_source_without_notebooks_or_not_a_notebook_is_refused(subs, capsys, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    _refused(capsys, _grade(subs, "--source", str(empty)), "--source", "no notebook")
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    _refused(capsys, _grade(subs, "--source", str(text)), "--source", "not a notebook")


def test_a_source_notebook_that_is_not_json_is_refused(subs, capsys, tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    (source / "hw.ipynb").write_text("{not json")
    _refused(capsys, _grade(subs, "--source", str(source)), "hw.ipynb", "not a valid notebook")


def test_a_missing_or_broken_check_module_is_refused(subs, capsys, tmp_path):
    _refused(capsys, _grade(subs, "--checks", str(tmp_path / "nope.py")), "--checks", "nope.py")
    broken = tmp_path / "broken_checks.py"
    broken.write_text("def oops(:\n")
    _refused(capsys, _grade(subs, "--checks", str(broken)), "broken_checks.py", "SyntaxError")


def test_out_naming_a_folder_or_below_a_file_is_refused(subs, capsys, tmp_path):
    folder = tmp_path / "results"
    folder.mkdir()
    _refused(capsys, main([str(subs), "--out", str(folder)]), "--out", "is a folder")
    note = tmp_path / "note.txt"
    note.write_text("mine")
    _refused(capsys, main([str(subs), "--out", str(note / "g.csv")]), "--out", "is a file")
    assert note.read_text() == "mine"


def test_out_inside_the_submissions_is_refused(subs, capsys):
    """Grades written into a student's folder would be copied into that student's sandbox."""
    for out in (subs / "alice" / "grades.csv", subs / "grades.csv"):
        _refused(capsys, main([str(subs), "--out", str(out)]), "--out", "inside")
        assert not out.exists()


def test_submissions_naming_a_file_is_refused(tmp_path, capsys):
    path = tmp_path / "alice.ipynb"
    shutil.copy(COURSEWORK / "softmax_hw.ipynb", path)
    _refused(capsys, main([str(path), "--out", str(tmp_path / "g.csv")]), "no folder")


def test_the_real_command_refuses_quickly_without_a_traceback(subs):
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "attnlab.grade", str(subs), "--out", "g.csv", "--memory", "nan"],
        capture_output=True, text=True, timeout=120, cwd=subs.parent,
    )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "--memory" in done.stderr and not (subs.parent / "g.csv").exists()
    assert time.monotonic() - start < 60  # it refused; it did not grade (under load)
