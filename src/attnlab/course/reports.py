"""What the grader's rows become for an LMS and for students: gradebook, Canvas, feedback.

All of them are made from the long CSV's rows (:data:`attnlab.course.grade.COLUMNS`), so
they agree with it by construction, and each records the grading's seed:

* :func:`write_gradebook`: one row per student, the points of each exercise, the automatic
  total, and empty ``manual`` columns for the written exercises the instructor marks;
* :func:`write_canvas`: Canvas's gradebook import (Student, ID, SIS User ID, SIS Login ID,
  Section, and one assignment column holding the points);
* :func:`write_feedback`: one Markdown file per student, each exercise with pass or fail,
  points, the check's message and the code cell (numbered as JupyterLab numbers them);
* :func:`gradescope_results`: the ``results.json`` of a Gradescope autograder.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path

from attnlab.course.files import write_csv
from attnlab.course.lms import Student

Row = dict[str, str]


def _key(exercise: str) -> tuple[int, ...]:
    return tuple(int(p) for p in exercise.split(".")) if exercise else (0,)


def _by_student(rows: Iterable[Row]) -> dict[str, list[Row]]:
    grouped: dict[str, list[Row]] = {}
    for row in rows:
        grouped.setdefault(row["student"], []).append(row)
    return grouped


def _points(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        return 0.0


def _number(value: float) -> str:
    return f"{value:g}"


def gradebook(rows: list[Row], manual: Iterable[str] = ()) -> tuple[list[Row], list[str]]:
    """The wide table: ``(rows, columns)``, one row per student (see the module docstring).

    Examples
    --------
    >>> rows = [{"student": "ann", "student_id": "7", "exercise": "01.1", "points": "2",
    ...          "max_points": "2", "seed": "5", "flags": ""}]
    >>> table, columns = gradebook(rows, manual=["01.3"])
    >>> columns
    ['student', 'student_id', '01.1', 'auto_points', 'auto_max', 'manual 01.3', 'seed', 'flags']
    >>> table[0]["auto_points"], table[0]["manual 01.3"]
    ('2', '')
    """
    exercises = sorted({r["exercise"] for r in rows if r["exercise"]}, key=_key)
    manual = sorted(set(manual) - set(exercises), key=_key)
    columns = ["student", "student_id", *exercises, "auto_points", "auto_max",
               *[f"manual {m}" for m in manual], "seed", "flags"]
    table = []
    for student, mine in sorted(_by_student(rows).items()):
        line = {c: "" for c in columns}
        line["student"] = student
        line["student_id"] = next((r["student_id"] for r in mine if r["student_id"]), "")
        graded = {r["exercise"]: r for r in mine if r["exercise"]}
        for exercise, row in graded.items():
            line[exercise] = row["points"]
        line["auto_points"] = _number(sum(_points(r["points"]) for r in graded.values()))
        line["auto_max"] = _number(sum(_points(r["max_points"]) for r in graded.values()))
        line["seed"] = ";".join(sorted({r["seed"] for r in mine}))
        line["flags"] = "; ".join(dict.fromkeys(f for r in mine for f in
                                                r["flags"].split("; ") if f))
        table.append(line)
    return table, columns


def write_gradebook(rows: list[Row], out: Path, manual: Iterable[str] = ()) -> None:
    """Write :func:`gradebook` as a CSV (atomically, mode 0644)."""
    table, columns = gradebook(rows, manual)
    write_csv(table, columns, out)


def write_canvas(rows: list[Row], out: Path, assignment: str,
                 roster: dict[str, Student] | None = None) -> None:
    """Canvas's gradebook import CSV, one assignment column with each student's points.

    ``student_id`` must be the Canvas user id (the roster's, or the one in the file names
    of a Canvas download); students without one are left out of the import, since Canvas
    matches on it.
    """
    column = assignment
    columns = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", column]
    table, _ = gradebook(rows)
    lines = []
    for line in table:
        entry = (roster or {}).get(line["student"])
        if not line["student_id"]:
            continue
        lines.append({"Student": entry.name if entry and entry.name else line["student"],
                      "ID": line["student_id"], "SIS User ID": "",
                      "SIS Login ID": entry.sis_login if entry else "",
                      "Section": entry.section if entry else "", column: line["auto_points"]})
    write_csv(lines, columns, out)


def _safe_name(student: str) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", student).strip("._") or "student"
    return name[:80]


def feedback(student: str, mine: list[Row]) -> str:
    """The Markdown feedback of one student (see the module docstring)."""
    seeds = ", ".join(sorted({r["seed"] for r in mine}))
    modes = ", ".join(sorted({r["mode"] for r in mine}))
    lines = [f"# Feedback for {student}", ""]
    graded = [r for r in mine if r["exercise"]]
    total = sum(_points(r["points"]) for r in graded)
    most = sum(_points(r["max_points"]) for r in graded)
    lines += [f"Automatic points: **{_number(total)} of {_number(most)}**.",
              f"(Graded with seed {seeds}, mode {modes}.)", ""]
    for notebook in sorted({r["notebook"] for r in mine}):
        rows = [r for r in mine if r["notebook"] == notebook]
        lines += [f"## {notebook}", "", f"How the notebook ran: {rows[0]['run']}", ""]
        for row in sorted(rows, key=lambda r: _key(r["exercise"])):
            if not row["exercise"]:
                lines += [f"- {row['message']}", ""]
                continue
            verdict = "passed" if row["passed"] == "1" else "not passed"
            where = f" (code cell {row['cell']})" if row["cell"] else ""
            lines += [f"### Exercise {row['exercise']}: {verdict}{where}", "",
                      f"Points: {row['points']} of {row['max_points']}.", "",
                      f"> {row['message'].replace(chr(10), ' ')}", ""]
            if row["flags"]:
                lines += [f"Note: {row['flags']}", ""]
    return "\n".join(lines).rstrip() + "\n"


def write_feedback(rows: list[Row], folder: Path) -> list[Path]:
    """One ``STUDENT.md`` per student in ``folder`` (made if needed); the paths written."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    used: set[str] = set()
    for student, mine in sorted(_by_student(rows).items()):
        name = _safe_name(student)
        while name in used:
            name += "_"
        used.add(name)
        path = folder / f"{name}.md"
        _write_text(path, feedback(student, mine))
        written.append(path)
    return written


def gradescope_results(rows: list[Row]) -> dict:
    """Gradescope's ``results.json`` for one student's rows (one test per exercise)."""
    graded = [r for r in rows if r["exercise"]]
    tests = [{"name": f"Exercise {r['exercise']}", "score": _points(r["points"]),
              "max_score": _points(r["max_points"]),
              "status": "passed" if r["passed"] == "1" else "failed",
              "output": r["message"] + (f"\n(code cell {r['cell']})" if r["cell"] else "")
              + (f"\nNote: {r['flags']}" if r["flags"] else "")} for r in graded]
    seeds = ", ".join(sorted({r["seed"] for r in rows}))
    runs = "; ".join(sorted({f"{r['notebook']}: {r['run']}" for r in rows}))
    return {"score": sum(t["score"] for t in tests), "tests": tests,
            "output": f"{runs}\nGraded with seed {seeds}, mode "
                      f"{', '.join(sorted({r['mode'] for r in rows}))}.",
            "visibility": "visible"}


def write_gradescope(rows: list[Row], out: Path) -> None:
    """Write :func:`gradescope_results` for all ``rows`` (one student) to ``out``."""
    _write_text(Path(out), json.dumps(gradescope_results(rows), indent=2) + "\n")


def _write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".attnlab-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
