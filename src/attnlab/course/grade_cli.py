"""Grade a folder of submitted notebooks, each in its own sandbox; write the CSV and reports.

Run it from the command line (Linux with bubblewrap, ``scripts/ensure_sandbox.sh``; as root
or as any user)::

    python -m attnlab.grade submissions/ --out grades.csv --source notebooks/ --jobs 2 \
        --seed 7 --gradebook gradebook.csv --feedback feedback/

``submissions/`` holds one folder per student (``submissions/alice/05_multi_head_attention.ipynb``),
or a Canvas or Moodle download (``--layout``, ``--roster``: :mod:`attnlab.course.lms`); a
notebook lying directly in a folder-per-student ``submissions/`` is graded under its own file
name as the student.

How it works (details in :mod:`attnlab.course.grade` and the instructor guide). Each notebook
runs top to bottom in a fresh kernel inside its own sandbox (:mod:`attnlab.course.sandbox`;
the mode, ``rootful``, ``rootless``, ``uid-only`` or ``unsandboxed``, is printed and recorded);
after its last cell the grader calls each exercise's answer by name on inputs drawn then,
and judges the numbers itself. The seed of those inputs (``--seed``) is in every output.

What is graded. The exercises of a notebook are the ``check("NN.k", ...)`` calls found in the
matching reference notebook (``--source``) and in the submission itself. Their specs come
from ``attnlab.exercises`` and from the instructor's check modules (``--checks``; by default
the ``*.py`` files next to the ``--source`` notebooks). A reference notebook missing from a
student's folder gets rows with ``run`` set to ``not submitted``.

The CSV has one row per student, notebook and exercise, with the columns of ``COLUMNS``;
every entry of the folder gets rows whatever it holds (links, fifos, odd names), cells are
never spreadsheet formulas, and the file (mode 0644) is replaced atomically. The command
exits 4 when a grade could not be computed (a fault of the host, never a silent zero).
"""

from __future__ import annotations

import argparse
import csv
import math
import re
import secrets
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from tqdm import tqdm

from attnlab._cli import file_in_the_way, is_inside, usable_cores
from attnlab.course import lms, reports, sandbox
from attnlab.course.assign import exercises_in, read_notebook
from attnlab.course.files import Submission, find_submissions, write_csv
from attnlab.course.grade import (
    COLUMNS,
    Settings,
    _id_key,
    _rows,
    expected_exercises,
    grade_notebook,
    load_checks,
    source_names,
)
from attnlab.exercises._registry import _load_chapters

__all__ = ["COLUMNS", "Settings", "Submission", "find_submissions", "grade", "grade_notebook",
           "main"]

WARNING = """\
################################################################################
#  WARNING: GRADING WITHOUT A SANDBOX (--allow-unsandboxed), mode {mode}.
#  Student code runs with {who}
#  and sees the file system as it is. Resource limits still apply. Do this only
#  for work you trust, or in a throwaway container or VM. Why no sandbox: {why}
################################################################################"""
_WHO = {
    "unsandboxed": ("YOUR user: it can read and write everything you can (other\n"
                    "#  students' notebooks, this grader, your files)"),
    "uid-only": ("a user id of its own (you are root): it can read what any user\n"
                 "#  may read, but not write your files or the results"),
}


def _missing(
    found: list[Submission], expected: dict[str, list[str]], students: list[str],
    roster: dict[str, lms.Student] | None, settings: Settings,
) -> list[dict[str, str]]:
    """Rows for the assigned notebooks that a student did not hand in."""
    handed_in = {(s.student, Path(s.notebook).name) for s in found}
    rows = []
    for student in students:
        entry = (roster or {}).get(student)
        for name, ids in expected.items():
            if (student, name) not in handed_in:
                submission = Submission(student, Path(name), name,
                                        student_id=entry.student_id if entry else "")
                verdicts = {i: (False, "notebook not submitted") for i in ids}
                rows += _rows(submission, ids, verdicts, "not submitted", 0.0, settings)
    return rows


def grade(
    submissions: Path,
    out: Path,
    *,
    source: Path | None = None,
    checks: list[Path] | None = None,
    timeout: float = 300.0,
    cell_timeout: float | None = None,
    jobs: int = 1,
    progress: bool = True,
    allow_unsandboxed: bool = False,
    limits: sandbox.Limits | None = None,
    seed: int | None = None,
    points: dict[str, float] | None = None,
    layout: str = "auto",
    roster: dict[str, lms.Student] | None = None,
) -> list[dict[str, str]]:
    """Grade every notebook under ``submissions`` and write the CSV ``out``; return its rows.

    ``seed`` (default: drawn now) fixes every exercise's cases and is written in every row;
    ``layout`` and ``roster`` say how to read an LMS download (:mod:`attnlab.course.lms`);
    ``points`` maps exercise ids to their points (default 1). Limits are lowered to the
    hard limits this process inherited. Raises ``RuntimeError`` when no sandbox is available and
    ``allow_unsandboxed`` is false, and ``ValueError`` when a ``source`` notebook is not
    valid or a check module does not import (both before any notebook runs). Rows are
    sorted by student, notebook and exercise; the CSV is readable by all (mode 0644).
    """
    source = Path(source) if source is not None else None
    expected = expected_exercises(source)
    if checks is None and source is not None and source.is_dir():
        checks = sorted(source.glob("*.py"))
    _load_chapters()
    load_checks(checks or [])
    isolated, why = sandbox.availability()
    mode = sandbox.sandbox_mode() if isolated else sandbox.unsandboxed_mode()
    if not isolated:
        if not allow_unsandboxed:
            raise RuntimeError(f"no sandbox: {why} (or pass --allow-unsandboxed, see the guide)")
        refusal = sandbox.uid_only_refusal() if mode == "uid-only" else None
        if refusal is not None:  # before any notebook runs: every answer would fail
            raise RuntimeError(refusal)
        print(WARNING.format(why=why, mode=mode, who=_WHO[mode]), file=sys.stderr)
    wanted = limits or sandbox.Limits(cpu_seconds=int(timeout + 300))
    limits, lowered = sandbox.effective_limits(wanted)
    seed = secrets.randbits(31) if seed is None else int(seed)
    settings = Settings(timeout=timeout, cell_timeout=cell_timeout, mode=mode, limits=limits,
                        seed=seed, names=source_names(source), points=dict(points or {}),
                        check_files=tuple(Path(c) for c in checks or []))
    if progress:
        print(f"attnlab.grade: mode {mode}; seed {seed}; limits: "
              f"{sandbox.describe_limits(limits)}", file=sys.stderr)
        for note in lowered:
            print(f"attnlab.grade: {note}", file=sys.stderr)
    found, odd, students = lms.collect(Path(submissions), layout=layout, roster=roster,
                                       assigned=set(expected))
    rows: list[dict[str, str]] = []
    bar = tqdm(total=len(found), desc="grading", unit="notebook", disable=not progress)

    def one(submission: Submission) -> list[dict[str, str]]:
        ids = expected.get(Path(submission.notebook).name, [])
        try:
            return grade_notebook(submission, ids, settings=settings)
        except Exception as error:  # a bug or a host problem: still one row per exercise
            verdicts = {i: (False, f"grader error: {type(error).__name__}: {error}") for i in ids}
            return _rows(submission, ids, verdicts, f"grader error: {error}", 0.0, settings)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for future in as_completed([pool.submit(one, s) for s in found]):
            rows += future.result()
            bar.update()
    bar.close()
    for entry in odd:
        rows += _rows(entry, [], {}, entry.problem or "not graded", 0.0, settings)
    rows += _missing(found, expected, students, roster, settings)
    rows.sort(key=lambda r: (r["student"], r["notebook"], _id_key(r["exercise"])))
    write_csv(rows, COLUMNS, Path(out))
    return rows


def grader_errors(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """The rows whose grade could not be computed (a fault of the grader or the host)."""
    return [r for r in rows if "grader error" in r["run"] or "not run (" in r["run"]]


def read_points(path: Path) -> dict[str, float]:
    """The ``--points`` CSV (columns ``exercise``, ``points``) as ``id → points``."""
    try:
        with Path(path).open(newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            if not {"exercise", "points"} <= set(reader.fieldnames or []):
                raise ValueError(f"--points {path}: needs the columns exercise and points")
            points = {}
            for row in reader:
                value = float(row["points"])
                if not (math.isfinite(value) and value >= 0):
                    raise ValueError(f"--points {path}: {row['exercise']} has {value} points")
                points[row["exercise"].strip()] = value
            return points
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise ValueError(f"--points {path}: cannot be read ({error})") from None
    except (TypeError, ValueError) as error:
        raise ValueError(str(error) if "--points" in str(error) else
                         f"--points {path}: not a number ({error})") from None


def written_exercises(source: Path | None) -> list[str]:
    """Ids of the exercises of ``source`` that have no self-check (marked by hand)."""
    if source is None:
        return []
    ids = []
    for path in ([source] if source.is_file() else sorted(source.rglob("*.ipynb"))):
        if ".ipynb_checkpoints" in path.parts:
            continue
        for exercise in exercises_in(read_notebook(path)):
            match = re.fullmatch(r"ex-(\d{2})-(\d+)", exercise.label)
            if match and not exercise.check_ids:
                ids.append(f"{match[1]}.{match[2]}")
    return ids


def _summary(rows: list[dict[str, str]]) -> str:
    totals: dict[str, list[int]] = {}
    for row in rows:
        if row["exercise"]:
            counts = totals.setdefault(row["student"], [0, 0])
            counts[0] += row["passed"] == "1"
            counts[1] += 1
    return "\n".join(f"{student}: {p}/{n} exercises passed" for student, (p, n) in totals.items())


_MAX_TIMEOUT = 86400


def _gib(text: str) -> float:
    """``--memory``'s type: GiB as a plain number (``4G`` or ``512M`` is a clear error)."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"takes GiB as a plain number, e.g. 6 or 0.5 (got {text!r})"
        ) from None


def _problem(args: argparse.Namespace) -> str | None:
    """The first bad option, in one line (``None`` if all are usable); reads, runs nothing."""
    cores = usable_cores()
    if not 1 <= args.jobs <= cores:
        return f"--jobs must be between 1 and {cores} (this machine's cores), got {args.jobs}"
    if args.cell_timeout is not None and not (math.isfinite(args.cell_timeout)
                                              and 0 < args.cell_timeout <= _MAX_TIMEOUT):
        return f"--cell-timeout must be a positive number of seconds, got {args.cell_timeout}"
    for name, value in (("--memory", args.memory), ("--timeout", args.timeout)):
        if not (math.isfinite(value) and value > 0):
            return f"{name} must be a positive finite number, got {value}"
    if args.timeout > _MAX_TIMEOUT:  # beyond it, the sandbox's CPU limit overflows
        return f"--timeout must be at most {_MAX_TIMEOUT} s (a day), got {args.timeout:g}"
    if not args.submissions.is_dir():
        return f"no folder {args.submissions}"
    if find_submissions(args.submissions) == ([], []):
        return f"no notebook under {args.submissions}"
    out = args.out
    if out.is_dir():
        return f"--out {out} is a folder; name the CSV file to write"
    blocker = file_in_the_way(out)
    if blocker is not None:
        return f"--out {out} cannot be created: {blocker} is a file"
    if is_inside(out, args.submissions):
        return f"--out {out} is inside the submissions folder (a sandbox could read it)"
    if args.source is not None:
        if not args.source.exists():
            return f"--source {args.source}: no notebook or folder there"
        if args.source.is_file() and args.source.suffix != ".ipynb":
            return f"--source {args.source} is not a notebook (.ipynb)"
        try:
            if not expected_exercises(args.source):
                return f"--source {args.source}: no notebook (.ipynb) in it"
        except ValueError as error:
            return f"--source: {error}"
    missing = [p for p in args.checks or [] if not p.is_file()]
    if missing:
        return f"--checks {missing[0]}: no such file"
    return None


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: ``python -m attnlab.grade SUBMISSIONS --out grades.csv``."""
    parser = argparse.ArgumentParser(
        prog="python -m attnlab.grade",
        description="Run submitted attnlab notebooks in sandboxes; one CSV row per exercise.",
    )
    parser.add_argument("submissions", type=Path, help="folder with one sub-folder per student")
    parser.add_argument("--out", type=Path, required=True, help="the CSV file to write")
    parser.add_argument(
        "--source", type=Path, default=None,
        help="the notebook(s) you assigned (file or folder): their check cells say which "
        "exercises each notebook must answer; a student who did not hand one in gets "
        "'not submitted' rows",
    )
    parser.add_argument(
        "--checks", type=Path, nargs="*", default=None,
        help="your check modules (*.py declaring exercise specs); default: the *.py files "
        "in the --source folder",
    )
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds allowed for each notebook (default 300, at most a day)")
    parser.add_argument("--cell-timeout", type=float, default=None,
                        help="seconds one cell may run before it is interrupted and the "
                        "run goes on (default: --timeout)")
    parser.add_argument("--seed", type=int, default=None,
                        help="seed of every exercise's cases (default: drawn and recorded in "
                        "every output; the same seed reproduces a grading)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="notebooks graded at once (at most this machine's cores)")
    parser.add_argument(
        "--memory", type=_gib, default=6.0,
        help="GiB of memory for one notebook's sandbox, all its processes together (default 6;"
        " one process gets at most 4 of them)",
    )
    lms_options = parser.add_argument_group("LMS input and output")
    lms_options.add_argument("--layout", default="auto",
                             choices=["auto", *lms.LAYOUTS],
                             help="how SUBMISSIONS is laid out (default: auto-detected)")
    lms_options.add_argument("--roster", type=Path, default=None,
                             help="CSV with columns key, student_id (optional: name, "
                             "sis_login, section)")
    lms_options.add_argument("--points", type=Path, default=None,
                             help="CSV with columns exercise, points (default: 1 each)")
    lms_options.add_argument("--gradebook", type=Path, default=None,
                             help="write the wide gradebook CSV here")
    lms_options.add_argument("--canvas", type=Path, default=None,
                             help="write a Canvas gradebook import CSV here")
    lms_options.add_argument("--canvas-assignment", default="attnlab",
                             help="the Canvas assignment column, e.g. 'HW 5 (12345)'")
    lms_options.add_argument("--feedback", type=Path, default=None,
                             help="write one Markdown feedback file per student here")
    lms_options.add_argument("--gradescope-results", type=Path, default=None,
                             help="write Gradescope's results.json here (one student)")
    parser.add_argument(
        "--allow-unsandboxed", action="store_true",
        help="grade even where no sandbox is available: student code then runs with your "
        "user and files (a loud warning is printed); only for trusted work",
    )
    args = parser.parse_args(argv)
    problem = _problem(args)
    if problem is not None:
        print(f"attnlab.grade: {problem}", file=sys.stderr)
        return 2
    try:
        roster = lms.read_roster(args.roster) if args.roster else None
        points = read_points(args.points) if args.points else None
    except ValueError as error:
        print(f"attnlab.grade: {error}", file=sys.stderr)
        return 2
    started = time.monotonic()
    total = int(args.memory * 2**30)
    limits = sandbox.Limits(memory=min(4 * 2**30, total), total_memory=total,
                            cpu_seconds=int(args.timeout + 300))
    try:
        rows = grade(args.submissions, args.out, source=args.source, checks=args.checks,
                     timeout=args.timeout, cell_timeout=args.cell_timeout, jobs=args.jobs,
                     limits=limits, allow_unsandboxed=args.allow_unsandboxed, seed=args.seed,
                     layout=args.layout, roster=roster, points=points)
    except RuntimeError as error:
        print(f"attnlab.grade: refusing to grade: {error}", file=sys.stderr)
        return 3
    except ValueError as error:  # an instructor's check module that does not import
        print(f"attnlab.grade: {error}", file=sys.stderr)
        return 2
    print(_summary(rows))
    print(f"wrote {len(rows)} rows to {args.out} in {time.monotonic() - started:.0f} s")
    if args.gradebook:
        reports.write_gradebook(rows, args.gradebook, manual=written_exercises(args.source))
        print(f"wrote the gradebook to {args.gradebook}")
    if args.canvas:
        reports.write_canvas(rows, args.canvas, args.canvas_assignment, roster)
        print(f"wrote the Canvas import to {args.canvas}")
    if args.feedback:
        written = reports.write_feedback(rows, args.feedback)
        print(f"wrote {len(written)} feedback files to {args.feedback}")
    if args.gradescope_results:
        reports.write_gradescope(rows, args.gradescope_results)
    failed = grader_errors(rows)
    if failed:
        first = failed[0]
        print(f"attnlab.grade: {len(failed)} grades could not be computed (first: "
              f"{first['student']}, {first['notebook']}: {first['run']}); see {args.out}",
              file=sys.stderr)
        return 4
    return 0


if __name__ == "__main__":
    sys.exit(main())
