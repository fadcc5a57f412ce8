"""Submissions as an LMS hands them over: Canvas and Moodle downloads, a roster, renamed copies.

``python -m attnlab.grade SUBMISSIONS --layout canvas --roster roster.csv ...`` reads

* ``folders`` (the default): one folder per student, ``alice/05_multi_head_attention.ipynb``;
* ``canvas``: Canvas's "Download Submissions" zip, unpacked: one flat folder of files named
  ``doejane_12345_6789012_05_multi_head_attention.ipynb`` (login name, Canvas user id,
  submission id, the file's name; ``doejane_LATE_12345_...`` when late; a re-submission gets
  ``-1``, ``-2`` before the extension);
* ``moodle``: Moodle's "Download all submissions", unpacked: a folder per participant,
  ``Jane Doe_12345_assignsubmission_file_/`` (or the same prefix on flat files).

Renamed copies of an assigned notebook (``05_x (1).ipynb``, ``05_x-1.ipynb``, ``05_x copy``,
``LATE``) are mapped to the assigned name and flagged; when a student has several copies of
one notebook, exactly one is graded, the newest by its name (the highest copy number: Canvas
numbers re-submissions upwards, a browser its repeated downloads), and the others are listed
in its flags, never graded twice.
The roster (``--roster``) is a CSV with the columns ``key`` (a folder name, a Canvas login or
user id, a Moodle name or participant id) and ``student_id``, and optionally ``name``,
``sis_login`` and ``section`` (used by the Canvas export); students on the roster without
any submission get ``not submitted`` rows.
"""

from __future__ import annotations

import csv
import os
import re
import stat
from dataclasses import dataclass, replace
from pathlib import Path

from attnlab.course.files import (
    MAX_ENTRIES,
    SKIP_DIRS,
    Submission,
    _problem,
    _walk,
    display,
    find_submissions,
    kind_of,
)

LAYOUTS = ("folders", "canvas", "moodle")
_CANVAS = re.compile(
    r"^(?P<login>[^_]+?)(?P<late>_LATE)?_(?P<uid>\d+)_(?P<sub>\d+)_(?P<file>.+)$"
)
_MOODLE = re.compile(
    r"^(?P<name>.+?)_(?P<pid>\d+)_assignsubmission_(?:file|onlinetext)_(?P<file>.*)$"
)
_COPY = re.compile(
    r"^(?P<stem>.*?)(?:\s*\((?P<paren>\d+)\)|-(?P<dash>\d+)|[ _-]copy(?P<copy>\d*)|"
    r"[ _-]?LATE)$", re.IGNORECASE,
)


@dataclass(frozen=True)
class Student:
    """One roster line: the key that names the student in the download, and their ids."""

    key: str
    student_id: str
    name: str = ""
    sis_login: str = ""
    section: str = ""


def read_roster(path: Path) -> dict[str, Student]:
    """The roster CSV as ``key → Student``; ``ValueError`` naming the problem if malformed.

    Examples
    --------
    >>> import tempfile
    >>> roster = Path(tempfile.mkdtemp()) / "roster.csv"
    >>> _ = roster.write_text("key,student_id,name\\nalice,s001,Alice A\\n")
    >>> read_roster(roster)["alice"].student_id
    's001'
    """
    try:
        with Path(path).open(newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            columns = set(reader.fieldnames or [])
            if not {"key", "student_id"} <= columns:
                raise ValueError(f"--roster {path}: needs the columns key and student_id, "
                                 f"has {', '.join(sorted(columns)) or 'none'}")
            roster: dict[str, Student] = {}
            for number, row in enumerate(reader, start=2):
                key = (row.get("key") or "").strip()
                if not key:
                    raise ValueError(f"--roster {path}: line {number} has no key")
                if key in roster:
                    raise ValueError(f"--roster {path}: key {key!r} appears twice")
                roster[key] = Student(key, (row.get("student_id") or "").strip(),
                                      (row.get("name") or "").strip(),
                                      (row.get("sis_login") or "").strip(),
                                      (row.get("section") or "").strip())
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise ValueError(f"--roster {path}: cannot be read ({error})") from None
    return roster


def assigned_name(name: str, assigned: set[str]) -> tuple[str, int, str]:
    """``(the assigned notebook name, copy number, flag)`` for a submitted file name.

    The copy number is 0 for the exact name; the flag is empty unless the name was mapped.

    Examples
    --------
    >>> assigned_name("05_mha (1).ipynb", {"05_mha.ipynb"})
    ('05_mha.ipynb', 1, 'renamed copy 05_mha (1).ipynb graded as 05_mha.ipynb')
    >>> assigned_name("05_mha-2.ipynb", {"05_mha.ipynb"})[:2]
    ('05_mha.ipynb', 2)
    >>> assigned_name("notes.ipynb", {"05_mha.ipynb"})
    ('notes.ipynb', 0, '')
    """
    if name in assigned or not name.endswith(".ipynb"):
        return name, 0, ""
    stem = name[: -len(".ipynb")]
    for _ in range(3):  # "05_x-1 (2)" and the like
        match = _COPY.match(stem)
        if match is None or not match["stem"]:
            break
        number = next((int(g) for g in (match["paren"], match["dash"], match["copy"]) if g), 1)
        stem = match["stem"].rstrip()
        if stem + ".ipynb" in assigned:
            return stem + ".ipynb", number, f"renamed copy {name} graded as {stem}.ipynb"
    return name, 0, ""


def _with_roster(found: list[Submission], keys: dict[str, list[str]],
                 roster: dict[str, Student] | None) -> list[Submission]:
    """Each submission under its roster key and id (looked up by any of its keys)."""
    if not roster:
        return found
    out = []
    for submission in found:
        entry = next((roster[k] for k in keys.get(submission.student, [submission.student])
                      if k in roster), None)
        if entry is None:
            out.append(replace(submission, flags=(*submission.flags, "not on the roster")))
        else:
            out.append(replace(submission, student=entry.key, student_id=entry.student_id))
    return out


def _dedupe(found: list[Submission], assigned: set[str]) -> list[Submission]:
    """Map renamed copies to the assigned names; keep one submission per student and name."""
    groups: dict[tuple[str, str], list[tuple[int, Submission]]] = {}
    for submission in found:
        name, number, flag = assigned_name(Path(submission.notebook).name, assigned)
        parent = str(Path(submission.notebook).parent)
        notebook = name if parent == "." else f"{parent}/{name}"
        flags = (*submission.flags, flag) if flag else submission.flags
        mapped = replace(submission, notebook=notebook, flags=flags)
        groups.setdefault((submission.student, notebook), []).append((number, mapped))
    out = []
    for copies in groups.values():
        copies.sort(key=lambda item: (item[1].problem is None, item[0]))
        number, chosen = copies[-1]
        others = [Path(s.path).name for _, s in copies[:-1]]
        if others:
            chosen = replace(chosen, flags=(*chosen.flags, "other copies not graded: "
                                            + ", ".join(display(o) for o in others)))
        out.append(chosen)
    return out


def _canvas(folder: Path) -> tuple[list[Submission], list[Submission], dict[str, list[str]]]:
    found, odd, keys = [], [], {}
    for entry in sorted(os.scandir(folder), key=lambda e: e.name)[:MAX_ENTRIES]:
        info = entry.stat(follow_symlinks=False)
        name = display(entry.name)
        match = _CANVAS.match(name)
        if match is None or not name.endswith(".ipynb"):
            if not stat.S_ISDIR(info.st_mode) and name.endswith(".ipynb"):
                odd.append(Submission(name, Path(entry.path), "", False, None,
                                      "not graded: not a Canvas submission file name"))
            continue
        student = match["login"]
        keys[student] = [match["login"], match["uid"]]
        flags = ("late (Canvas)",) if match["late"] else ()
        found.append(Submission(student, Path(entry.path), match["file"], False, None,
                                _problem(info), flags=flags))
    return found, odd, keys


def _moodle(folder: Path) -> tuple[list[Submission], list[Submission], dict[str, list[str]]]:
    found, odd, keys = [], [], {}
    for entry in sorted(os.scandir(folder), key=lambda e: e.name)[:MAX_ENTRIES]:
        info = entry.stat(follow_symlinks=False)
        name = display(entry.name)
        match = _MOODLE.match(name)
        if match is None:
            if name not in SKIP_DIRS and name.endswith(".ipynb"):
                odd.append(Submission(name, Path(entry.path), "", False, None,
                                      "not graded: not a Moodle submission name"))
            continue
        student = match["name"]
        keys[student] = [match["name"], match["pid"]]
        if stat.S_ISDIR(info.st_mode):
            for notebook, nb_info in _walk(Path(entry.path)):
                relative = display(notebook.relative_to(entry.path).as_posix())
                found.append(Submission(student, notebook, relative, True, Path(entry.path),
                                        _problem(nb_info)))
        elif match["file"].endswith(".ipynb"):
            found.append(Submission(student, Path(entry.path), match["file"], False, None,
                                    _problem(info)))
        elif not stat.S_ISREG(info.st_mode):
            odd.append(Submission(student, Path(entry.path), "", False, None,
                                  f"not graded: {kind_of(info.st_mode)}"))
    return found, odd, keys


def detect_layout(folder: Path) -> str:
    """``canvas`` or ``moodle`` when most entries are named the LMS's way, else ``folders``."""
    names = [display(e.name) for e in os.scandir(folder)][:MAX_ENTRIES]
    for layout, pattern in (("canvas", _CANVAS), ("moodle", _MOODLE)):
        if names and sum(bool(pattern.match(n)) for n in names) * 2 > len(names):
            return layout
    return "folders"


def collect(
    folder: Path, *, layout: str = "auto", roster: dict[str, Student] | None = None,
    assigned: set[str] | frozenset[str] = frozenset(),
) -> tuple[list[Submission], list[Submission], list[str]]:
    """``(notebooks to grade, odd entries, every student)`` of a download folder.

    ``assigned`` holds the assigned notebook names (for renamed copies and duplicates);
    ``every student`` includes the roster's keys, so that missing work gets rows.
    Raises ``ValueError`` for an unknown layout.
    """
    folder = Path(folder)
    layout = detect_layout(folder) if layout == "auto" else layout
    if layout not in LAYOUTS:
        raise ValueError(f"--layout must be one of auto, {', '.join(LAYOUTS)}; got {layout!r}")
    keys: dict[str, list[str]] = {}
    if layout == "canvas":
        found, odd, keys = _canvas(folder)
        students = sorted({s.student for s in found})
    elif layout == "moodle":
        found, odd, keys = _moodle(folder)
        students = sorted({s.student for s in found})
    else:
        found, odd = find_submissions(folder)
        students = sorted({s.student for s in found if s.own_folder} | {
            display(p.name) for p in folder.iterdir()
            if p.is_dir() and not p.is_symlink() and p.name not in SKIP_DIRS})
    found = _dedupe(_with_roster(found, keys, roster), set(assigned))
    if roster:
        mapped = {roster[k].key for s in students for k in keys.get(s, [s]) if k in roster}
        unmatched = {s for s in students if not any(k in roster for k in keys.get(s, [s]))}
        students = sorted(mapped | unmatched | set(roster))
    return found, odd, students
