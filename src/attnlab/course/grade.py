"""Grade a folder of submitted notebooks in sandboxes; the grader alone decides pass or fail.

For each notebook: the grader makes every exercise's cases and references itself (from the
trusted specs: attnlab's chapters and the instructor's ``--checks`` modules), hands only the
inputs to a fresh sandbox (:mod:`attnlab.course.sandbox`) in which the notebook runs top to
bottom; each ``check(...)`` call there evaluates the answer on those inputs and the runner
sends back plain numbers. The grader judges them against its references. Nothing the
notebook does to ``attnlab`` in its kernel, to files, or to the inputs changes a grade:
the only way to pass is to return the right numbers for inputs drawn after submission.
"""

from __future__ import annotations

import base64
import importlib.util
import io
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
import zipfile
from collections.abc import Iterable
from pathlib import Path

import nbformat
import numpy as np

from attnlab.course import sandbox
from attnlab.course.adapters import MAX_NPZ_BYTES, _decode, save_plain
from attnlab.course.assign import check_ids_in, read_notebook
from attnlab.course.cgroups import Cgroup, joining
from attnlab.course.files import Submission, read_notebook_bytes, safe_cell
from attnlab.course.spec import Case, ExerciseFailure, Spec, get_spec, judge

COLUMNS = ["student", "notebook", "exercise", "passed", "message", "run", "seconds"]
_MESSAGE_LIMIT = 400
_STARTUP = 120.0
_uids = itertools.count()
_uid_lock = threading.Lock()


def load_checks(paths: Iterable[Path]) -> list[str]:
    """Import the instructor's check modules (``*.py`` files); the names imported."""
    names = []
    for path in paths:
        name = f"attnlab_instructor_{Path(path).stem}"
        module_spec = importlib.util.spec_from_file_location(name, path)
        if module_spec is None or module_spec.loader is None:
            raise ValueError(f"cannot import check module {path}")
        module = importlib.util.module_from_spec(module_spec)
        try:
            module_spec.loader.exec_module(module)
        except Exception as error:  # the instructor's code: say which file, in one line
            reason = (str(error).strip().splitlines() or [""])[0][:200]
            raise ValueError(
                f"check module {path} does not import: {type(error).__name__}: {reason}"
            ) from None
        names.append(name)
    return names


def expected_exercises(source: Path | None) -> dict[str, list[str]]:
    """Notebook file name → the exercise ids its self-check cells call (from ``source``)."""
    if source is None:
        return {}
    paths = [source] if source.is_file() else sorted(source.rglob("*.ipynb"))
    expected = {}
    for path in paths:
        if {".ipynb_checkpoints", "_build"}.intersection(path.parts) or not path.is_file():
            continue
        nb = read_notebook(path)
        ids = [i for c in nb.cells if c.cell_type == "code" for i in check_ids_in(c.source)]
        expected[path.name] = list(dict.fromkeys(ids))
    return expected


def _id_key(exercise_id: str) -> tuple[int, ...]:
    return tuple(int(part) for part in exercise_id.split(".")) if exercise_id else (0,)


def _short(text: object) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= _MESSAGE_LIMIT else text[: _MESSAGE_LIMIT - 3] + "..."


def _rows(
    submission: Submission, ids: Iterable[str], verdicts: dict[str, tuple[bool, str]],
    run: str, seconds: float,
) -> list[dict[str, str]]:
    base = {"student": submission.student, "notebook": submission.notebook}
    tail = {"run": _short(run), "seconds": f"{seconds:.1f}"}
    rows = [
        {**base, "exercise": i, "passed": str(verdicts[i][0]),
         "message": _short(verdicts[i][1]), **tail}
        for i in sorted(set(ids), key=_id_key)
    ]
    if not rows:
        ok = run == "completed"
        message = "no exercise to grade" + ("" if ok else f"; the run ended: {run}")
        rows.append({**base, "exercise": "", "passed": str(ok), "message": message, **tail})
    return [{k: safe_cell(v) for k, v in row.items()} for row in rows]


def _prepare(ids: list[str], inputs: Path) -> dict[str, tuple[Spec, list[Case]]]:
    """Cases and references for every id with a spec; inputs (only) written for the sandbox."""
    prepared = {}
    for exercise_id in ids:
        spec = get_spec(exercise_id)
        if spec is None:
            continue
        cases = list(spec.cases(np.random.default_rng()))
        record = {"adapter": spec.adapter, "timeout": float(spec.timeout),
                  "args": [list(c.args) for c in cases]}
        save_plain(inputs / f"{exercise_id}.npz", record)
        prepared[exercise_id] = (spec, cases)
    return prepared


def _load_result(blob: object) -> tuple:
    """Decode one base64 ``.npz`` from the sandbox: a tuple of ``{"ok"|"error": ...}``."""
    if not isinstance(blob, str) or len(blob) > MAX_NPZ_BYTES * 4 // 3 + 4:
        raise ValueError("missing or too large")
    raw = base64.b64decode(blob, validate=True)
    with zipfile.ZipFile(io.BytesIO(raw)) as archive:  # no zip bomb: sizes before reading
        members = archive.infolist()
        if len(members) > 10_000 or sum(m.file_size for m in members) > 4 * MAX_NPZ_BYTES:
            raise ValueError("too large once unpacked")
    with np.load(io.BytesIO(raw), allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    tree = arrays.pop("__tree__")
    results = _decode(json.loads(str(tree)), arrays)
    if not isinstance(results, tuple) or not all(isinstance(r, dict) for r in results):
        raise ValueError("malformed")
    return results


def _verdict(spec: Spec, cases: list[Case], blob: object) -> tuple[bool, str]:
    """Judge the sandbox's results of one exercise against the grader's references."""
    try:
        results = _load_result(blob)
    except Exception as error:  # untrusted bytes: any decoding failure is a failed exercise
        return False, f"the answer's results could not be read ({type(error).__name__})"
    for index, case in enumerate(cases):
        if index >= len(results):
            return False, f"the answer stopped before case {index + 1} of {len(cases)}"
        result = results[index]
        if "error" in result:
            return False, str(result["error"])
        try:
            judge(result.get("ok"), case)
        except ExerciseFailure as failure:
            return False, str(failure)
        except Exception as error:  # numbers a judge cannot use (wrong nesting, strings)
            return False, f"the answer's results could not be judged ({type(error).__name__})"
    return True, spec.passed


#: Every user id this process has handed to a sandbox (to check that none is still in use).
USED_UIDS: set[int] = set()


def _next_uid() -> int:
    with _uid_lock:
        uid = sandbox.UID_BASE + (os.getpid() % 64) * 64 + next(_uids) % 64
        USED_UIDS.add(uid)
        return uid


def _execute(
    nb_text: str, submission: Submission, tmp: Path, timeout: float, isolated: bool,
    limits: sandbox.Limits,
) -> tuple[dict, str]:
    """Run the notebook (sandboxed unless ``isolated`` is false); the runner's report."""
    submitted, inputs = tmp / "submitted", tmp / "inputs"
    if submission.own_folder and submission.folder is not None:
        from attnlab.course.files import copy_folder

        copy_folder(submission.folder, submitted)
    submitted.mkdir(exist_ok=True)
    (inputs / "notebook.ipynb").write_text(nb_text, encoding="utf-8")
    uid = _next_uid()
    if isolated:
        sandbox.kill_user(uid)  # a straggler of an earlier run must not count against it
        argv = [sandbox.python_executable(), "-m", "attnlab.course.runner",
                f"{sandbox.INPUTS}/notebook.ipynb", str(timeout), str(_STARTUP),
                str(limits.output), sandbox.SUBMITTED, sandbox.WORK, "/tmp/io"]
        cmd = sandbox.sandbox_command(argv, submitted=submitted, inputs=inputs, uid=uid,
                                      limits=limits)
        env = {"PATH": "/usr/bin:/bin"}
        cwd = "/"
    else:
        argv = [sandbox.python_executable(), "-m", "attnlab.course.runner",
                str(inputs / "notebook.ipynb"), str(timeout), str(_STARTUP), str(limits.output),
                str(submitted), str(tmp / "work"), str(tmp)]
        cmd = [*sandbox._prlimit(limits), *argv]
        env = {**os.environ, **sandbox.sandbox_env(), "HOME": str(tmp), "MPLCONFIGDIR": str(tmp)}
        env.pop("JUPYTER_RUNTIME_DIR")
        env.pop("IPYTHONDIR")
        cwd = str(tmp)
    out_path, err_path = tmp / "report.json", tmp / "runner.log"
    group = Cgroup(f"attnlab-{uid}-{os.getpid()}", limits.total_memory, limits.processes)
    group.create()
    with out_path.open("wb") as out, err_path.open("wb") as err:
        process = subprocess.Popen(joining(group, cmd), stdout=out, stderr=err,
                                   stdin=subprocess.DEVNULL, cwd=cwd, env=env,
                                   start_new_session=True)
        try:
            process.wait(timeout=timeout + 2 * _STARTUP)
            ended = ""
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait()
            ended = f"timeout (limit {timeout:g} s)"
        finally:
            group.destroy()
            if isolated:
                sandbox.kill_user(uid)
    try:
        report = json.loads(out_path.read_bytes()[-(80 * 2**20):].decode("utf-8").splitlines()[-1])
        if not isinstance(report, dict):
            raise ValueError
    except (ValueError, IndexError, UnicodeDecodeError):
        return {}, ended or f"the run ended without a report (exit status {process.returncode})"
    return report, ""


def _report_fields(report: dict) -> tuple[str, dict[int, str], dict]:
    run = report.get("run")
    errors = report.get("errors")
    results = report.get("results")
    errors = {int(k): str(v) for k, v in errors.items() if str(k).isdigit()} if isinstance(
        errors, dict) else {}
    return (str(run) if isinstance(run, str) else "unknown", errors,
            results if isinstance(results, dict) else {})


def grade_notebook(
    submission: Submission,
    expected: Iterable[str] = (),
    *,
    timeout: float = 300.0,
    isolated: bool = True,
    limits: sandbox.Limits | None = None,
) -> list[dict[str, str]]:
    """Grade one submitted notebook and return its CSV rows (see ``COLUMNS``); never raises
    for a problem with the submission."""
    started = time.monotonic()
    expected = list(expected)
    limits = limits or sandbox.Limits(cpu_seconds=int(timeout + 2 * _STARTUP))
    if submission.problem:
        verdicts = {i: (False, submission.problem) for i in expected}
        return _rows(submission, expected, verdicts, "not run", 0.0)
    try:
        nb = nbformat.reads(read_notebook_bytes(submission.path).decode("utf-8"), as_version=4)
        nbformat.validate(nb)
    except Exception as error:  # not UTF-8, not JSON, not a notebook, not a regular file
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
    ids = list(dict.fromkeys(expected + list(check_cells)))
    tmp = Path(tempfile.mkdtemp(prefix="attnlab-grade-"))
    try:
        os.chmod(tmp, 0o700)
        (tmp / "inputs").mkdir()
        prepared = _prepare(ids, tmp / "inputs")
        report, failure = _execute(nbformat.writes(nb), submission, tmp, timeout, isolated,
                                   limits)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    run, errors, results = _report_fields(report)
    run = failure or run
    if run == "completed" and errors:
        run = "completed, errors in cells " + ", ".join(str(i + 1) for i in sorted(errors))
    verdicts: dict[str, tuple[bool, str]] = {}
    for exercise_id in ids:
        cell = check_cells.get(exercise_id)
        if exercise_id not in prepared:
            verdicts[exercise_id] = (False, "the grader has no spec for this exercise (give "
                                     "it the instructor's check module with --checks)")
        elif exercise_id in results:
            spec, cases = prepared[exercise_id]
            verdicts[exercise_id] = _verdict(spec, cases, results[exercise_id])
        elif cell is None:
            verdicts[exercise_id] = (False, "no self-check cell for this exercise in the "
                                     "submission")
        elif cell in errors:
            verdicts[exercise_id] = (False, f"the check cell ({cell + 1}) raised {errors[cell]}")
        elif not run.startswith("completed"):
            verdicts[exercise_id] = (False, f"not reached: {run}")
        else:
            verdicts[exercise_id] = (False, "the check never ran")
    return _rows(submission, ids, verdicts, run, time.monotonic() - started)
