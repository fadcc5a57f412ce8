"""Grade a folder of submitted notebooks: run each one, collect its self-checks, write a CSV.

Run it from the command line::

    python -m attnlab.grade submissions/ --out grades.csv --source notebooks/ --timeout 300

``submissions/`` holds one folder per student (``submissions/alice/05_multi_head_attention.ipynb``);
a notebook lying directly in ``submissions/`` is graded under its own file name as the student.

How it works. Each notebook is executed top to bottom in a fresh kernel (nbclient) inside a
temporary copy of its folder, with every cell allowed to fail, so one broken answer does not
hide the others. Before the kernel starts, the grader sets the environment variable
``ATTNLAB_RESULTS`` to a fresh file; every call of ``attnlab.exercises.check`` in the
notebook appends its verdict there as a JSON line. The last verdict of each exercise counts.

What is graded. The exercises of a notebook are the ``check("NN.k", ...)`` calls found in the
matching reference notebook (``--source``: the notebook or folder of notebooks you assigned,
matched by file name) and in the submission itself. A reference notebook missing from a
student's folder gets rows too, with ``run`` set to ``not submitted``. An exercise whose
check never ran gets a row that says why: the check cell raised (for example a ``NameError``
because the answer cell crashed), the notebook hit its time limit, the kernel died, the
notebook is not valid JSON, or the student deleted the check cell.

The CSV has one row per student, notebook and exercise, with the columns of ``COLUMNS``:
``passed`` is ``True`` or ``False``; ``run`` says how the notebook's execution ended
(``completed``, ``completed, errors in cells 4, 9``, ``timeout in cell 7``,
``kernel died in cell 3``, ``malformed``, ``not submitted``), repeated on each of its rows;
``seconds`` is the wall time of that notebook. A notebook without any exercise still gets one
row (exercise empty) so that a crash is never silent.

The grader runs the students' code with your permissions: grade untrusted work inside a
container or a throwaway virtual machine.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from tqdm import tqdm

from attnlab.assign import check_ids_in
from attnlab.exercises._registry import EXERCISE_ID, RESULTS_ENV

COLUMNS = ["student", "notebook", "exercise", "passed", "message", "run", "seconds"]
_SKIP_DIRS = {".ipynb_checkpoints", "__pycache__"}
_MESSAGE_LIMIT = 400


@dataclass(frozen=True)
class Submission:
    """One notebook to grade: who submitted it, where it is, its name for the CSV.

    ``own_folder`` is true when the notebook sits in the student's own folder, whose other
    files (data, helper modules) the notebook may read: they are copied next to it.
    """

    student: str
    path: Path
    notebook: str
    own_folder: bool = True


def find_submissions(folder: Path) -> list[Submission]:
    """Every ``*.ipynb`` under ``folder``; the student is the first folder below ``folder``.

    Examples
    --------
    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> (root / "bob").mkdir()
    >>> _ = (root / "bob" / "05_heads.ipynb").write_text("{}")
    >>> _ = (root / "zoe.ipynb").write_text("{}")
    >>> [(s.student, s.notebook) for s in find_submissions(root)]
    [('bob', '05_heads.ipynb'), ('zoe', 'zoe.ipynb')]
    """
    found = []
    for path in sorted(Path(folder).rglob("*.ipynb")):
        relative = path.relative_to(folder)
        if _SKIP_DIRS.intersection(relative.parts):
            continue
        if len(relative.parts) == 1:
            found.append(Submission(path.stem, path, path.name, own_folder=False))
        else:
            found.append(Submission(relative.parts[0], path, Path(*relative.parts[1:]).as_posix()))
    return found


def expected_exercises(source: Path | None) -> dict[str, list[str]]:
    """Notebook file name → the exercise ids its self-check cells call (from ``source``)."""
    if source is None:
        return {}
    paths = [source] if source.is_file() else sorted(source.rglob("*.ipynb"))
    expected = {}
    for path in paths:
        if _SKIP_DIRS.intersection(path.parts):
            continue
        nb = nbformat.read(path, as_version=4)
        ids = [
            i for cell in nb.cells if cell.cell_type == "code" for i in check_ids_in(cell.source)
        ]
        expected[path.name] = list(dict.fromkeys(ids))
    return expected


def _id_key(exercise_id: str) -> tuple[int, ...]:
    return tuple(int(part) for part in exercise_id.split("."))


def _short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= _MESSAGE_LIMIT else text[: _MESSAGE_LIMIT - 3] + "..."


def _read_verdicts(path: Path) -> dict[str, tuple[bool, str]]:
    """The last verdict of each exercise in a results file (malformed lines are skipped)."""
    verdicts: dict[str, tuple[bool, str]] = {}
    if not path.exists():
        return verdicts
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
            exercise_id = str(record["exercise"])
            if EXERCISE_ID.match(exercise_id):
                verdicts[exercise_id] = (record["passed"] is True, str(record["message"]))
        except (ValueError, KeyError, TypeError):
            continue
    return verdicts


def _cell_errors(nb: nbformat.NotebookNode) -> dict[int, str]:
    """Cell index → ``"Name: value"`` of the first error output of that cell."""
    errors = {}
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if output.get("output_type") == "error":
                errors[index] = f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"
                break
    return errors


def _rows(
    submission: Submission,
    ids: Iterable[str],
    passed_message: dict[str, tuple[bool, str]],
    run: str,
    seconds: float,
) -> list[dict[str, str]]:
    ordered = sorted(set(ids), key=_id_key)
    base = {"student": submission.student, "notebook": submission.notebook}
    rows = [
        {
            **base,
            "exercise": i,
            "passed": str(passed_message[i][0]),
            "message": _short(passed_message[i][1]),
            "run": run,
            "seconds": f"{seconds:.1f}",
        }
        for i in ordered
    ]
    if not rows:
        ok = run == "completed"
        message = "no exercise to grade" + ("" if ok else f"; the run ended: {run}")
        rows.append(
            {
                **base,
                "exercise": "",
                "passed": str(ok),
                "message": message,
                "run": run,
                "seconds": f"{seconds:.1f}",
            }
        )
    return rows


def grade_notebook(
    submission: Submission,
    expected: Iterable[str] = (),
    *,
    timeout: float = 300.0,
    kernel_name: str = "python3",
    startup_timeout: float = 120.0,
) -> list[dict[str, str]]:
    """Execute one submitted notebook and return its CSV rows (see ``COLUMNS``).

    Never raises for a problem with the submission: a malformed file, a crash, a hang or a
    dead kernel is reported in the rows. ``timeout`` bounds the execution of the whole
    notebook, in seconds (kernel start-up has its own ``startup_timeout``).
    """
    started = time.monotonic()
    expected = list(expected)
    try:
        nb = nbformat.read(submission.path, as_version=4)
        nbformat.validate(nb)
    except Exception as error:  # not JSON, not a notebook, or not valid against the schema
        reason = f"malformed notebook, not run ({type(error).__name__}: {_short(error)[:120]})"
        verdicts = {i: (False, reason) for i in expected}
        return _rows(submission, expected, verdicts, "malformed", time.monotonic() - started)

    check_cells: dict[str, int] = {}
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            cell.outputs = []  # outputs of the student's own session say nothing about this run
            cell.execution_count = None
            for exercise_id in check_ids_in(cell.source):
                check_cells.setdefault(exercise_id, index)
    current = {"cell": -1}
    run = "completed"
    with tempfile.TemporaryDirectory(prefix="attnlab-grade-") as tmp:
        workdir = Path(tmp) / "work"
        if submission.own_folder:
            shutil.copytree(
                submission.path.parent, workdir, ignore=shutil.ignore_patterns("*.ipynb")
            )
        else:
            workdir.mkdir()
        results = Path(tmp) / "results.jsonl"
        deadline: list[float] = []  # set when the first cell starts (kernel start-up excluded)

        def remaining(cell: nbformat.NotebookNode) -> int:
            if not deadline:
                deadline.append(time.monotonic() + timeout)
            return max(1, int(deadline[0] - time.monotonic() + 0.999))

        def on_cell_start(**kwargs: object) -> None:
            current["cell"] = int(kwargs.get("cell_index", -1))  # type: ignore[arg-type]

        client = NotebookClient(
            nb,
            timeout_func=remaining,
            startup_timeout=int(startup_timeout),
            kernel_name=kernel_name,
            allow_errors=True,
            interrupt_on_timeout=False,
            resources={"metadata": {"path": str(workdir)}},
            on_cell_start=on_cell_start,
        )
        log_path = Path(tmp) / "kernel.log"
        with log_path.open("w") as kernel_log:  # the kernel's own stderr, kept off the terminal
            try:
                client.execute(env={**os.environ, RESULTS_ENV: str(results)}, stderr=kernel_log)
            except CellTimeoutError:
                run = f"timeout in cell {current['cell'] + 1} (limit {timeout:g} s)"
            except DeadKernelError:
                run = f"kernel died in cell {current['cell'] + 1}"
            except Exception as error:  # kernel failed to start, or nbclient itself failed
                run = f"not run ({type(error).__name__}: {_short(error)[:120]})"
        verdicts = _read_verdicts(results)
    seconds = time.monotonic() - started

    errors = _cell_errors(nb)
    if run == "completed" and errors:
        run = "completed, errors in cells " + ", ".join(str(i + 1) for i in sorted(errors))
    ids = list(dict.fromkeys(expected + list(check_cells) + list(verdicts)))
    for exercise_id in ids:
        if exercise_id in verdicts:
            continue
        cell = check_cells.get(exercise_id)
        if cell is None:
            reason = "no self-check cell for this exercise in the submission"
        elif cell in errors:
            reason = f"the check cell ({cell + 1}) raised {errors[cell]}"
        elif not run.startswith("completed"):
            reason = f"not reached: {run}"
        else:
            reason = "the check never ran"
        verdicts[exercise_id] = (False, reason)
    return _rows(submission, ids, verdicts, run, seconds)


def _missing(
    submissions: Path, found: list[Submission], expected: dict[str, list[str]]
) -> list[dict[str, str]]:
    """Rows for the reference notebooks that a student's folder does not contain."""
    handed_in = {(s.student, Path(s.notebook).name) for s in found}
    students = sorted(
        p.name for p in submissions.iterdir() if p.is_dir() and p.name not in _SKIP_DIRS
    )
    rows = []
    for student in students:
        for name, ids in expected.items():
            if (student, name) not in handed_in:
                submission = Submission(student, submissions / student / name, name)
                verdicts = {i: (False, "notebook not submitted") for i in ids}
                rows += _rows(submission, ids, verdicts, "not submitted", 0.0)
    return rows


def grade(
    submissions: Path,
    out: Path,
    *,
    source: Path | None = None,
    timeout: float = 300.0,
    kernel_name: str = "python3",
    jobs: int = 1,
    progress: bool = True,
) -> list[dict[str, str]]:
    """Grade every notebook under ``submissions`` and write the CSV ``out``; return its rows.

    Rows are sorted by student, notebook and exercise. ``jobs`` > 1 grades that many
    notebooks at once, each in its own process and kernel.
    """
    found = find_submissions(Path(submissions))
    expected = expected_exercises(Path(source) if source is not None else None)
    options = {"timeout": timeout, "kernel_name": kernel_name}
    rows: list[dict[str, str]] = []
    bar = tqdm(total=len(found), desc="grading", unit="notebook", disable=not progress)
    if jobs <= 1:
        for submission in found:
            bar.set_postfix_str(f"{submission.student}/{submission.notebook}")
            rows += grade_notebook(
                submission, expected.get(Path(submission.notebook).name, []), **options
            )
            bar.update()
    else:
        with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn")) as pool:
            futures = [
                pool.submit(grade_notebook, s, expected.get(Path(s.notebook).name, []), **options)
                for s in found
            ]
            for future in as_completed(futures):
                rows += future.result()
                bar.update()
    bar.close()
    rows += _missing(Path(submissions), found, expected)
    rows.sort(key=lambda r: (r["student"], r["notebook"], _id_key(r["exercise"] or "0")))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return rows


def _summary(rows: list[dict[str, str]]) -> str:
    totals: dict[str, list[int]] = {}
    for row in rows:
        if row["exercise"]:
            counts = totals.setdefault(row["student"], [0, 0])
            counts[0] += row["passed"] == "True"
            counts[1] += 1
    return "\n".join(f"{student}: {p}/{n} exercises passed" for student, (p, n) in totals.items())


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: ``python -m attnlab.grade SUBMISSIONS --out grades.csv``."""
    parser = argparse.ArgumentParser(
        prog="python -m attnlab.grade",
        description="Execute submitted attnlab notebooks and write one CSV row per exercise.",
    )
    parser.add_argument("submissions", type=Path, help="folder with one sub-folder per student")
    parser.add_argument("--out", type=Path, required=True, help="the CSV file to write")
    parser.add_argument(
        "--source",
        type=Path,
        default=None,
        help="the notebook(s) you assigned (file or folder): their check cells say which "
        "exercises each notebook must answer, and a student who did not hand one in gets "
        "'not submitted' rows",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        help="seconds allowed for each notebook (default 300)",
    )
    parser.add_argument("--kernel", default="python3", help="Jupyter kernel (default python3)")
    parser.add_argument("--jobs", type=int, default=1, help="notebooks graded at once")
    args = parser.parse_args(argv)
    if not args.submissions.is_dir():
        print(f"attnlab.grade: no folder {args.submissions}", file=sys.stderr)
        return 2
    if not find_submissions(args.submissions):
        print(f"attnlab.grade: no notebook under {args.submissions}", file=sys.stderr)
        return 2
    started = time.monotonic()
    rows = grade(
        args.submissions,
        args.out,
        source=args.source,
        timeout=args.timeout,
        kernel_name=args.kernel,
        jobs=args.jobs,
    )
    print(_summary(rows))
    print(f"wrote {len(rows)} rows to {args.out} in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
