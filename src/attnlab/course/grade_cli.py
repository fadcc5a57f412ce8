"""Grade a folder of submitted notebooks, each in its own sandbox; write one CSV.

Run it from the command line (as root, with bubblewrap: ``scripts/ensure_sandbox.sh``)::

    python -m attnlab.grade submissions/ --out grades.csv --source notebooks/ --jobs 2

``submissions/`` holds one folder per student (``submissions/alice/05_multi_head_attention.ipynb``);
a notebook lying directly in ``submissions/`` is graded under its own file name as the student.

How it works (details in ``attnlab.course.grade`` and the instructor guide). Each notebook
runs top to bottom in a fresh kernel inside its own sandbox (``attnlab.course.sandbox``):
a private copy of only its own folder, its own user id, no network, limits on memory, CPU,
processes, file size and output. The grader draws every exercise's cases and computes the
references itself; each ``check("NN.k", answer)`` in the notebook evaluates the answer on
those inputs and only the numbers come back. Pass or fail is decided here, so patching
``attnlab`` inside the notebook, writing files or mutating inputs cannot change a grade.

What is graded. The exercises of a notebook are the ``check("NN.k", ...)`` calls found in the
matching reference notebook (``--source``) and in the submission itself. Their specs come
from ``attnlab.exercises`` and from the instructor's check modules (``--checks``; by default
the ``*.py`` files next to the ``--source`` notebooks). A reference notebook missing from a
student's folder gets rows with ``run`` set to ``not submitted``.

The CSV has one row per student, notebook and exercise, with the columns of ``COLUMNS``;
every entry of the folder gets rows whatever it holds (links, fifos, odd names), cells are
never spreadsheet formulas, and the file is replaced atomically.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from tqdm import tqdm

from attnlab._cli import file_in_the_way, is_inside, usable_cores
from attnlab.course import sandbox
from attnlab.course.files import Submission, display, find_submissions, write_csv
from attnlab.course.grade import (
    COLUMNS,
    _id_key,
    _rows,
    expected_exercises,
    grade_notebook,
    load_checks,
)
from attnlab.exercises._registry import _load_chapters

__all__ = ["COLUMNS", "Submission", "find_submissions", "grade", "grade_notebook", "main"]

WARNING = """\
################################################################################
#  WARNING: GRADING WITHOUT A SANDBOX (--allow-unsandboxed).
#  Student code runs with YOUR user and can read and write everything you can:
#  other students' notebooks, this grader, your files. Resource limits still
#  apply. Do this only for work you trust. Why no sandbox: {why}
################################################################################"""


def _missing(
    submissions: Path, found: list[Submission], expected: dict[str, list[str]]
) -> list[dict[str, str]]:
    """Rows for the reference notebooks that a student's folder does not contain."""
    handed_in = {(s.student, Path(s.notebook).name) for s in found if s.own_folder}
    students = sorted({s.student for s in found if s.own_folder} | {
        display(p.name) for p in submissions.iterdir()
        if p.is_dir() and not p.is_symlink() and p.name not in {".ipynb_checkpoints",
                                                                "__pycache__"}
    })
    rows = []
    for student in students:
        for name, ids in expected.items():
            if (student, name) not in handed_in:
                submission = Submission(student, submissions / name, name)
                verdicts = {i: (False, "notebook not submitted") for i in ids}
                rows += _rows(submission, ids, verdicts, "not submitted", 0.0)
    return rows


def grade(
    submissions: Path,
    out: Path,
    *,
    source: Path | None = None,
    checks: list[Path] | None = None,
    timeout: float = 300.0,
    jobs: int = 1,
    progress: bool = True,
    allow_unsandboxed: bool = False,
    limits: sandbox.Limits | None = None,
) -> list[dict[str, str]]:
    """Grade every notebook under ``submissions`` and write the CSV ``out``; return its rows.

    Raises ``RuntimeError`` when no sandbox is available and ``allow_unsandboxed`` is false,
    and ``ValueError`` when a ``source`` notebook is not valid or a check module does not
    import (both before any notebook runs).
    Rows are sorted by student, notebook and exercise.
    """
    source = Path(source) if source is not None else None
    expected = expected_exercises(source)
    if checks is None and source is not None and source.is_dir():
        checks = sorted(source.glob("*.py"))
    _load_chapters()
    load_checks(checks or [])
    isolated, why = sandbox.availability()
    if not isolated:
        if not allow_unsandboxed:
            raise RuntimeError(f"no sandbox: {why} (or pass --allow-unsandboxed, see the guide)")
        print(WARNING.format(why=why), file=sys.stderr)
    found, odd = find_submissions(Path(submissions))
    rows: list[dict[str, str]] = []
    bar = tqdm(total=len(found), desc="grading", unit="notebook", disable=not progress)

    def one(submission: Submission) -> list[dict[str, str]]:
        ids = expected.get(Path(submission.notebook).name, [])
        try:
            return grade_notebook(submission, ids, timeout=timeout, isolated=isolated,
                                  limits=limits)
        except Exception as error:  # a bug or a host problem: still one row per exercise
            verdicts = {i: (False, f"grader error: {type(error).__name__}") for i in ids}
            return _rows(submission, ids, verdicts, f"grader error: {error}", 0.0)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for future in as_completed([pool.submit(one, s) for s in found]):
            rows += future.result()
            bar.update()
    bar.close()
    for entry in odd:
        rows += _rows(entry, [], {}, entry.problem or "not graded", 0.0)
    rows += _missing(Path(submissions), found, expected)
    rows.sort(key=lambda r: (r["student"], r["notebook"], _id_key(r["exercise"])))
    write_csv(rows, COLUMNS, Path(out))
    return rows


def _summary(rows: list[dict[str, str]]) -> str:
    totals: dict[str, list[int]] = {}
    for row in rows:
        if row["exercise"]:
            counts = totals.setdefault(row["student"], [0, 0])
            counts[0] += row["passed"] == "True"
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
    parser.add_argument("--jobs", type=int, default=1,
                        help="notebooks graded at once (at most this machine's cores)")
    parser.add_argument(
        "--memory", type=_gib, default=6.0,
        help="GiB of memory for one notebook's sandbox, all its processes together (default 6;"
        " one process gets at most 4 of them)",
    )
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
    started = time.monotonic()
    total = int(args.memory * 2**30)
    limits = sandbox.Limits(memory=min(4 * 2**30, total), total_memory=total,
                            cpu_seconds=int(args.timeout + 300))
    try:
        rows = grade(args.submissions, args.out, source=args.source, checks=args.checks,
                     timeout=args.timeout, jobs=args.jobs, limits=limits,
                     allow_unsandboxed=args.allow_unsandboxed)
    except RuntimeError as error:
        print(f"attnlab.grade: refusing to grade: {error}", file=sys.stderr)
        return 3
    except ValueError as error:  # an instructor's check module that does not import
        print(f"attnlab.grade: {error}", file=sys.stderr)
        return 2
    print(_summary(rows))
    print(f"wrote {len(rows)} rows to {args.out} in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
