"""LMS input and output of the grader: Canvas and Moodle downloads, roster, renamed copies,
gradebook, Canvas import, feedback files and Gradescope's results.json.

The downloads are made here, named the way Canvas and Moodle name their files; the expected
mapping is written out by hand. One small end-to-end grading (three notebooks of the fixture
assignment) checks that a Canvas download gives one correct row set per student.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from attnlab.course import lms, reports

COURSEWORK = Path(__file__).parent / "fixtures" / "coursework"
HW = "softmax_hw.ipynb"
ASSIGNED = {HW, "05_heads.ipynb"}


def _touch(path: Path, text: str = "{}") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _pairs(found):
    return sorted((s.student, s.notebook, s.path.name) for s in found)


def test_renamed_copies_map_to_the_assigned_name():
    cases = {
        "softmax_hw.ipynb": ("softmax_hw.ipynb", 0),
        "softmax_hw (1).ipynb": ("softmax_hw.ipynb", 1),
        "softmax_hw(2).ipynb": ("softmax_hw.ipynb", 2),
        "softmax_hw-1.ipynb": ("softmax_hw.ipynb", 1),
        "softmax_hw copy.ipynb": ("softmax_hw.ipynb", 1),
        "softmax_hw_LATE.ipynb": ("softmax_hw.ipynb", 1),
        "softmax_hw-1 (1).ipynb": ("softmax_hw.ipynb", 1),
        "05_heads-3.ipynb": ("05_heads.ipynb", 3),
        "notes-1.ipynb": ("notes-1.ipynb", 0),  # not assigned: left as it is
    }
    for name, (mapped, number) in cases.items():
        got = lms.assigned_name(name, ASSIGNED)
        assert got[:2] == (mapped, number), name
        assert bool(got[2]) == (name != mapped), name


def test_a_canvas_download_gives_one_submission_per_student_and_notebook(tmp_path):
    for name in (
        "doejane_12345_900001_softmax_hw.ipynb",
        "doejane_12345_900002_softmax_hw-1.ipynb",  # her re-submission: the one graded
        "roeivan_LATE_23456_900003_softmax_hw (1).ipynb",
        "roeivan_LATE_23456_900004_05_heads.ipynb",
        "smithal_34567_900005_scratch.ipynb",
        "README.txt",
    ):
        _touch(tmp_path / name)
    assert lms.detect_layout(tmp_path) == "canvas"
    found, odd, students = lms.collect(tmp_path, assigned=ASSIGNED)
    assert _pairs(found) == [
        ("doejane", HW, "doejane_12345_900002_softmax_hw-1.ipynb"),
        ("roeivan", "05_heads.ipynb", "roeivan_LATE_23456_900004_05_heads.ipynb"),
        ("roeivan", HW, "roeivan_LATE_23456_900003_softmax_hw (1).ipynb"),
        ("smithal", "scratch.ipynb", "smithal_34567_900005_scratch.ipynb"),
    ]
    jane = next(s for s in found if s.student == "doejane")
    assert any("other copies not graded: doejane_12345_900001_softmax_hw.ipynb" in f
               for f in jane.flags), jane.flags
    ivan = [s for s in found if s.student == "roeivan"]
    assert all("late (Canvas)" in s.flags for s in ivan)
    assert odd == [] and students == ["doejane", "roeivan", "smithal"]


def test_a_roster_names_canvas_students_by_user_id_and_adds_the_missing(tmp_path):
    _touch(tmp_path / "subs" / "doejane_12345_900001_softmax_hw.ipynb")
    _touch(tmp_path / "subs" / "ghost_99999_900009_softmax_hw.ipynb")
    roster_file = _touch(tmp_path / "roster.csv",
                         "key,student_id,name,sis_login,section\n"
                         "12345,12345,Jane Doe,jdoe,A\nabsent,55555,Al Absent,aabs,B\n")
    roster = lms.read_roster(roster_file)
    found, _, students = lms.collect(tmp_path / "subs", roster=roster, assigned=ASSIGNED)
    by_student = {s.student: s for s in found}
    assert by_student["12345"].student_id == "12345"
    assert "not on the roster" in by_student["ghost"].flags
    assert students == ["12345", "absent", "ghost"]


def test_a_moodle_download_in_folders_and_flat(tmp_path):
    _touch(tmp_path / "Jane Doe_12345_assignsubmission_file_" / HW)
    _touch(tmp_path / "Jane Doe_12345_assignsubmission_file_" / "softmax_hw (1).ipynb")
    _touch(tmp_path / "Jane Doe_12345_assignsubmission_file_" / "data.csv", "1,2")
    _touch(tmp_path / "Ivan Roe_23456_assignsubmission_file_softmax_hw-2.ipynb")
    assert lms.detect_layout(tmp_path) == "moodle"
    found, _, students = lms.collect(tmp_path, assigned=ASSIGNED)
    assert _pairs(found) == [
        ("Ivan Roe", HW, "Ivan Roe_23456_assignsubmission_file_softmax_hw-2.ipynb"),
        ("Jane Doe", HW, "softmax_hw (1).ipynb"),  # the newest copy, by its name
    ]
    jane = next(s for s in found if s.student == "Jane Doe")
    assert jane.own_folder and jane.folder.name.startswith("Jane Doe_12345")
    assert "other copies not graded: softmax_hw.ipynb" in jane.flags
    assert students == ["Ivan Roe", "Jane Doe"]


def test_folders_with_renamed_copies_are_never_double_counted(tmp_path):
    _touch(tmp_path / "ivan" / "softmax_hw (1).ipynb")
    _touch(tmp_path / "judy" / HW)
    _touch(tmp_path / "judy" / "softmax_hw-1.ipynb")
    found, _, students = lms.collect(tmp_path, layout="folders", assigned=ASSIGNED)
    assert _pairs(found) == [("ivan", HW, "softmax_hw (1).ipynb"),
                             ("judy", HW, "softmax_hw-1.ipynb")]
    judy = next(s for s in found if s.student == "judy")
    assert judy.flags == ("renamed copy softmax_hw-1.ipynb graded as softmax_hw.ipynb",
                          "other copies not graded: softmax_hw.ipynb")
    assert students == ["ivan", "judy"]


@pytest.mark.parametrize("text, phrase", [
    ("name,id\na,1\n", "needs the columns key and student_id"),
    ("key,student_id\na,1\na,2\n", "appears twice"),
    ("key,student_id\n,1\n", "has no key"),
])
def test_a_bad_roster_is_refused_naming_the_problem(tmp_path, text, phrase):
    with pytest.raises(ValueError, match=phrase):
        lms.read_roster(_touch(tmp_path / "roster.csv", text))


def _row(student, exercise, passed, points=1.0, **extra):
    row = {"student": student, "student_id": extra.get("student_id", ""), "notebook": HW,
           "exercise": exercise, "passed": "1" if passed else "0",
           "points": f"{points if passed else 0:g}", "max_points": f"{points:g}",
           "message": extra.get("message", "ok"), "cell": extra.get("cell", ""),
           "run": "completed", "flags": extra.get("flags", ""), "mode": "rootful",
           "seed": "42", "seconds": "1.0"}
    return row


ROWS = [
    _row("ann", "99.1", True, 2.0, student_id="111", cell="2"),
    _row("ann", "99.2", False, 1.0, student_id="111", message="expected log(4)", cell="4"),
    _row("bob", "99.1", False, 2.0, student_id="222", flags="renamed copy x graded as y"),
    _row("bob", "99.2", True, 1.0, student_id="222"),
]


def test_the_gradebook_has_points_totals_and_manual_columns(tmp_path):
    out = tmp_path / "gradebook.csv"
    reports.write_gradebook(ROWS, out, manual=["99.3"])
    with out.open(newline="") as handle:
        table = list(csv.DictReader(handle))
    assert list(table[0]) == ["student", "student_id", "99.1", "99.2", "auto_points",
                              "auto_max", "manual 99.3", "seed", "flags"]
    assert [(r["student"], r["99.1"], r["99.2"], r["auto_points"], r["auto_max"])
            for r in table] == [("ann", "2", "0", "2", "3"), ("bob", "0", "1", "1", "3")]
    assert table[1]["flags"] == "renamed copy x graded as y" and table[0]["seed"] == "42"
    assert out.stat().st_mode & 0o777 == 0o644


def test_the_canvas_import_has_canvas_columns(tmp_path):
    out = tmp_path / "canvas.csv"
    roster = {"ann": lms.Student("ann", "111", "Ann A", "aa", "S1")}
    reports.write_canvas(ROWS, out, "HW 9 (777)", roster)
    with out.open(newline="") as handle:
        lines = list(csv.reader(handle))
    assert lines[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "HW 9 (777)"]
    assert lines[1:] == [["Ann A", "111", "", "aa", "S1", "2"], ["bob", "222", "", "", "", "1"]]


def test_feedback_names_each_exercise_its_cell_and_the_message(tmp_path):
    written = reports.write_feedback(ROWS, tmp_path / "feedback")
    assert [p.name for p in written] == ["ann.md", "bob.md"]
    text = (tmp_path / "feedback" / "ann.md").read_text()
    assert "Automatic points: **2 of 3**" in text and "seed 42" in text
    assert "### Exercise 99.1: passed (code cell 2)" in text
    assert "### Exercise 99.2: not passed (code cell 4)" in text
    assert "> expected log(4)" in text


def test_gradescope_results_follow_its_format():
    results = reports.gradescope_results(ROWS[:2])
    assert results["score"] == 2.0
    assert [(t["name"], t["score"], t["max_score"], t["status"]) for t in results["tests"]] == [
        ("Exercise 99.1", 2.0, 2.0, "passed"), ("Exercise 99.2", 0.0, 1.0, "failed")]
    assert "seed 42" in results["output"]
    json.dumps(results)  # plain JSON


# ---- end to end: a Canvas download, graded -----------------------------------------------
def test_a_canvas_download_is_graded_once_per_student(tmp_path):
    from attnlab.course import sandbox
    from attnlab.grade import main

    if not sandbox.availability()[0]:
        pytest.skip(f"no grading sandbox here: {sandbox.availability()[1]}")
    subs = tmp_path / "canvas"
    subs.mkdir()
    header = ("import hw_checks  # noqa: F401\nimport numpy as np\n"
              "from attnlab.exercises import check")
    right = new_notebook(cells=[new_code_cell(header),
                                new_code_cell("uniform_entropy = float(np.log(4))")])
    wrong = new_notebook(cells=[new_code_cell(header), new_code_cell("uniform_entropy = 1.0")])
    nbformat.write(right, subs / "doejane_12345_1_softmax_hw.ipynb")
    nbformat.write(wrong, subs / "doejane_12345_2_softmax_hw-1.ipynb")  # graded: the latest
    nbformat.write(right, subs / "roeivan_LATE_23456_3_softmax_hw (1).ipynb")
    source = tmp_path / "source"
    source.mkdir()
    shutil.copy(COURSEWORK / "hw_checks.py", source)
    only_99_2 = new_notebook(cells=[new_code_cell(header),
                                    new_code_cell('check("99.2", uniform_entropy)')])
    nbformat.write(only_99_2, source / HW)
    roster = _touch(tmp_path / "roster.csv", "key,student_id,name\n12345,12345,Jane Doe\n"
                    "23456,23456,Ivan Roe\n55555,55555,Al Absent\n")
    out = tmp_path / "out"
    status = main([str(subs), "--out", str(out / "grades.csv"), "--source", str(source),
                   "--roster", str(roster), "--seed", "3", "--timeout", "60",
                   "--gradebook", str(out / "book.csv"), "--canvas", str(out / "canvas.csv"),
                   "--feedback", str(out / "feedback")])
    assert status == 0
    with (out / "grades.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["student"], r["student_id"], r["exercise"], r["passed"], r["run"])
            for r in rows] == [
        ("12345", "12345", "99.2", "0", "completed"),
        ("23456", "23456", "99.2", "1", "completed"),
        ("55555", "55555", "99.2", "0", "not submitted"),
    ]
    assert "other copies not graded" in rows[0]["flags"]
    assert "late (Canvas)" in rows[1]["flags"] and "renamed copy" in rows[1]["flags"]
    with (out / "canvas.csv").open(newline="") as handle:
        canvas = list(csv.reader(handle))
    assert canvas[1:] == [["Jane Doe", "12345", "", "", "", "0"],
                          ["Ivan Roe", "23456", "", "", "", "1"],
                          ["Al Absent", "55555", "", "", "", "0"]]
    assert sorted(p.name for p in (out / "feedback").iterdir()) == [
        "12345.md", "23456.md", "55555.md"]


def test_the_gradescope_bundle_grades_one_submission_into_results_json(tmp_path):
    import os
    import subprocess
    import sys
    import zipfile

    from attnlab.course import gradescope, sandbox

    source = tmp_path / "assignment"
    source.mkdir()
    shutil.copy(COURSEWORK / "hw_checks.py", source)
    shutil.copy(COURSEWORK / HW, source)
    bundle = tmp_path / "autograder.zip"
    names = gradescope.build(source, bundle, requirement="attnlab", timeout=60)
    assert sorted(names) == ["assignment/hw_checks.py", f"assignment/{HW}", "run_autograder",
                             "setup.sh"]
    with pytest.raises(ValueError, match="either --wheel"):
        gradescope.build(source, tmp_path / "x.zip")
    root = tmp_path / "autograder"
    with zipfile.ZipFile(bundle) as archive:
        archive.extractall(root / "source")
        assert archive.getinfo("run_autograder").external_attr >> 16 & 0o111
    assert "pip install attnlab" in (root / "source" / "setup.sh").read_text()
    if not sandbox.availability()[0] and sandbox.unsandboxed_mode() == "unsandboxed":
        pytest.skip("no sandbox and not root: run_autograder would grade unsandboxed")
    (root / "submission").mkdir()
    header = "import hw_checks  # noqa: F401\nimport numpy as np"
    answer = new_notebook(cells=[new_code_cell(header),
                                 new_code_cell("uniform_entropy = float(np.log(4))")])
    nbformat.write(answer, root / "submission" / "softmax_hw (2).ipynb")
    env = {**os.environ, "AUTOGRADER": str(root), "ATTNLAB_PYTHON": sys.executable,
           "ATTNLAB_SEED": "11", "PYTHONPATH": str(Path(sandbox.__file__).parents[2])}
    done = subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads((root / "results" / "results.json").read_text())
    assert results["score"] == 1.0, results  # 99.2 right, 99.1 not answered
    assert [(t["name"], t["status"]) for t in results["tests"]] == [
        ("Exercise 99.1", "failed"), ("Exercise 99.2", "passed")]
    assert "seed 11" in results["output"] and "renamed copy" in results["tests"][1]["output"]
    broken = {**env, "ATTNLAB_PYTHON": "/bin/false"}  # a grader that fails: a zero, said so
    done = subprocess.run(["bash", str(root / "source" / "run_autograder")], env=broken,
                          capture_output=True, text=True, timeout=60)
    results = json.loads((root / "results" / "results.json").read_text())
    assert results["score"] == 0 and "could not grade" in results["output"], results
