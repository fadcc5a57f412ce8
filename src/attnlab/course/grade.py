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
import re
import shutil
import subprocess
import tempfile
import threading
import time
import zipfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import numpy as np

from attnlab.course import sandbox
from attnlab.course.adapters import MAX_NPZ_BYTES, _decode, save_plain
from attnlab.course.assign import read_notebook
from attnlab.course.cgroups import Cgroup, joining
from attnlab.course.files import Submission, copy_folder, read_notebook_bytes, safe_cell
from attnlab.course.spec import Case, ExerciseFailure, Spec, get_spec, judge
from attnlab.course.student import check_ids_in

#: The long CSV: one row per student, notebook and exercise. ``seconds`` is the only column
#: that differs between two gradings with the same ``--seed``.
COLUMNS = ["student", "student_id", "notebook", "exercise", "passed", "points", "max_points",
           "message", "cell", "run", "flags", "mode", "seed", "seconds"]
_MESSAGE_LIMIT = 1000
_STARTUP = 120.0
_uids = itertools.count()
_uid_lock = threading.Lock()


@dataclass(frozen=True)
class Settings:
    """How every notebook of one grading is run and scored.

    ``mode`` is ``rootful``, ``rootless`` or ``unsandboxed``; ``seed`` makes the cases of
    every exercise reproducible (each notebook and exercise draws from its own stream);
    ``names`` maps a notebook file name to ``{exercise id: the name its assigned check cell
    passes to check}``; ``points`` maps an exercise id to its points (default 1);
    ``check_files`` are the instructor's check modules, copied next to every notebook (over
    a student's own copy), so that ``import hw_checks`` works in any LMS layout.
    """

    timeout: float = 300.0
    cell_timeout: float | None = None
    mode: str = "rootful"
    limits: sandbox.Limits = field(default_factory=sandbox.Limits)
    seed: int = 0
    names: dict[str, dict[str, str]] = field(default_factory=dict)
    points: dict[str, float] = field(default_factory=dict)
    check_files: tuple[Path, ...] = ()


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


def _source_paths(source: Path) -> list[Path]:
    paths = [source] if source.is_file() else sorted(source.rglob("*.ipynb"))
    return [p for p in paths
            if p.is_file() and not {".ipynb_checkpoints", "_build"}.intersection(p.parts)]


def expected_exercises(source: Path | None) -> dict[str, list[str]]:
    """Notebook file name → the exercise ids its self-check cells call (from ``source``)."""
    if source is None:
        return {}
    expected = {}
    for path in _source_paths(source):
        nb = read_notebook(path)
        ids = [i for c in nb.cells if c.cell_type == "code" for i in check_ids_in(c.source)]
        expected[path.name] = list(dict.fromkeys(ids))
    return expected


_NAMED_CHECK = re.compile(r"\bcheck\(\s*['\"](?P<id>\d{2}\.\d+)['\"]\s*,\s*(?P<name>[A-Za-z_]\w*)")


def checked_names(cells: Iterable[str]) -> dict[str, str]:
    """Exercise id → the name a ``check("NN.k", name)`` call passes (first call wins).

    Examples
    --------
    >>> checked_names(['assert check("05.1", concat_heads)', 'check("05.1", other)'])
    {'05.1': 'concat_heads'}
    """
    found: dict[str, str] = {}
    for source in cells:
        for match in _NAMED_CHECK.finditer(source):
            found.setdefault(match["id"], match["name"])
    return found


def source_names(source: Path | None) -> dict[str, dict[str, str]]:
    """Notebook file name → ``{exercise id: name checked}`` in the assigned notebooks."""
    if source is None:
        return {}
    return {path.name: checked_names(c.source for c in read_notebook(path).cells
                                     if c.cell_type == "code")
            for path in _source_paths(source)}


def case_seed(seed: int, *parts: str) -> list[int]:
    """The seed sequence of one notebook's exercise: stable across runs and machines."""
    return [int(seed)] + [zlib.crc32(part.encode("utf-8", "surrogateescape")) for part in parts]


def _id_key(exercise_id: str) -> tuple[int, ...]:
    return tuple(int(part) for part in exercise_id.split(".")) if exercise_id else (0,)


def _short(text: object) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= _MESSAGE_LIMIT else text[: _MESSAGE_LIMIT - 3] + "..."


def _number(value: float) -> str:
    return f"{value:g}"


def _rows(
    submission: Submission, ids: Iterable[str], verdicts: dict[str, tuple],
    run: str, seconds: float, settings: Settings | None = None,
) -> list[dict[str, str]]:
    """The CSV rows of one notebook; a verdict is ``(passed, message[, cell, flags])``."""
    settings = settings or Settings()
    base = {"student": submission.student, "student_id": submission.student_id,
            "notebook": submission.notebook}
    tail = {"run": _short(run), "mode": settings.mode, "seed": str(settings.seed),
            "seconds": f"{seconds:.1f}"}
    rows = []
    for i in sorted(set(ids), key=_id_key):
        passed, message, cell, flags = (*verdicts[i], "", [])[:4]
        worth = float(settings.points.get(i, 1.0))
        rows.append({
            **base, "exercise": i, "passed": "1" if passed else "0",
            "points": _number(worth if passed else 0.0), "max_points": _number(worth),
            "message": _short(message), "cell": str(cell),
            "flags": _short("; ".join([*submission.flags, *flags])), **tail,
        })
    if not rows:
        ok = run == "completed"
        message = "no exercise to grade" + ("" if ok else f"; the run ended: {run}")
        rows.append({**base, "exercise": "", "passed": "1" if ok else "0", "points": "0",
                     "max_points": "0", "message": message, "cell": "",
                     "flags": "; ".join(submission.flags), **tail})
    return [{k: safe_cell(v) for k, v in row.items()} for row in rows]


def _prepare(ids: list[str], settings: Settings, submission: Submission,
             names: dict[str, list[str]]) -> tuple[dict[str, tuple[Spec, list[Case]]], dict]:
    """Cases and references for every id with a spec, and the inputs for the sandbox."""
    prepared, inputs = {}, {}
    scratch = Path(tempfile.mkdtemp(prefix="attnlab-inputs-"))
    try:
        for exercise_id in ids:
            spec = get_spec(exercise_id)
            if spec is None:
                continue
            rng = np.random.default_rng(case_seed(settings.seed, submission.student,
                                                  submission.notebook, exercise_id))
            cases = list(spec.cases(rng))
            record = {"adapter": spec.adapter, "timeout": float(spec.timeout),
                      "names": names.get(exercise_id, []), "args": [list(c.args) for c in cases]}
            save_plain(scratch / "case.npz", record)
            inputs[exercise_id] = base64.b64encode((scratch / "case.npz").read_bytes()).decode()
            prepared[exercise_id] = (spec, cases)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return prepared, inputs


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
    if isinstance(results, dict):  # {"name": the name evaluated, "cases": (...)}
        results = results.get("cases")
    if not isinstance(results, tuple) or not all(isinstance(r, dict) for r in results):
        raise ValueError("malformed")
    return results


def _verdict(spec: Spec, cases: list[Case], blob: object) -> tuple[bool, str]:
    """Judge the sandbox's results of one exercise against the grader's references."""
    try:
        results = _load_result(blob)
    except Exception as error:  # untrusted bytes: any decoding failure is a failed exercise
        return False, f"the answer's results could not be read ({type(error).__name__})"
    if not results:
        return False, "the answer's results are empty"
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


def _evaluated_name(blob: object) -> str:
    """The name the sandbox says it evaluated ("" if none or unreadable; a flag only)."""
    try:
        raw = base64.b64decode(str(blob), validate=True)
        with np.load(io.BytesIO(raw), allow_pickle=False) as data:
            tree = json.loads(str(data["__tree__"]))
        name = tree["d"]["name"]["s"]
        return name if isinstance(name, str) and name.isidentifier() else ""
    except Exception:  # untrusted bytes: no name
        return ""


def _runner_argv(settings: Settings, submitted: str, work: str, io_dir: str) -> list[str]:
    cell_timeout = settings.cell_timeout or settings.timeout
    return [sandbox.python_executable(), "-m", "attnlab.course.runner", str(settings.timeout),
            str(cell_timeout), str(_STARTUP), str(settings.limits.output), submitted, work,
            io_dir]


def _execute(
    request: dict, submission: Submission, tmp: Path, settings: Settings
) -> tuple[dict, str]:
    """Run the notebook (sandboxed unless the mode is ``unsandboxed``); the runner's report."""
    submitted = tmp / "submitted"
    if submission.own_folder and submission.folder is not None:
        copy_folder(submission.folder, submitted)
    submitted.mkdir(exist_ok=True)
    for module in settings.check_files:  # the instructor's copy, never the student's
        target = submitted / Path(module).name
        target.unlink(missing_ok=True)
        shutil.copyfile(module, target)
    request_path = tmp / "request.json"
    request_path.write_text(json.dumps(request), encoding="utf-8")
    limits = settings.limits
    rootful = settings.mode == "rootful"
    uid = _next_uid() if rootful else os.getuid()
    if settings.mode in ("rootful", "rootless"):
        if rootful:
            sandbox.kill_user(uid)  # a straggler of an earlier run must not count against it
        argv = _runner_argv(settings, sandbox.SUBMITTED, sandbox.WORK, "/tmp/io")
        cmd = sandbox.sandbox_command(argv, submitted=submitted, uid=uid, limits=limits,
                                      rootless=not rootful)
        env = {"PATH": "/usr/bin:/bin"}
        cwd = "/"
    else:
        (tmp / "io").mkdir()
        argv = _runner_argv(settings, str(submitted), str(tmp / "work"), str(tmp / "io"))
        cmd = [*sandbox._rlimits(limits), *argv]
        env = {**os.environ, **sandbox.sandbox_env(), "HOME": str(tmp), "MPLCONFIGDIR": str(tmp)}
        env.pop("JUPYTER_RUNTIME_DIR")
        env.pop("IPYTHONDIR")
        cwd = str(tmp)
    out_path, err_path = tmp / "report.json", tmp / "runner.log"
    group = Cgroup(f"attnlab-{uid}-{os.getpid()}-{next(_uids)}", limits.total_memory,
                   limits.processes)
    group.create()
    wait = settings.timeout + 3 * _STARTUP + float(request.get("evaluation_timeout", 0))
    with out_path.open("wb") as out, err_path.open("wb") as err, request_path.open("rb") as inp:
        process = subprocess.Popen(joining(group, cmd), stdout=out, stderr=err, stdin=inp,
                                   cwd=cwd, env=env, start_new_session=True)
        try:
            process.wait(timeout=wait)
            ended = ""
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait()
            ended = f"timeout (limit {settings.timeout:g} s)"
        finally:
            group.destroy()
            if rootful:
                sandbox.kill_user(uid)
    try:
        report = json.loads(out_path.read_bytes()[-(80 * 2**20):].decode("utf-8").splitlines()[-1])
        if not isinstance(report, dict):
            raise ValueError
    except (ValueError, IndexError, UnicodeDecodeError):
        return {}, ended or f"the run ended without a report (exit status {process.returncode})"
    return report, ""


def _indices(value: object) -> list[int]:
    items = value if isinstance(value, list) else list(value) if isinstance(value, dict) else []
    return sorted({int(i) for i in items if str(i).isdigit()})


def code_cell_numbers(nb: nbformat.NotebookNode) -> dict[int, int]:
    """Cell index → its number as JupyterLab shows it after Run All: code cells from 1."""
    numbers, count = {}, 0
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            count += 1
            numbers[index] = count
    return numbers


def _cells(indices: Iterable[int], numbers: dict[int, int]) -> str:
    """``code cell 4`` or ``code cells 4, 6`` (JupyterLab's numbers)."""
    shown = [str(numbers.get(i, i + 1)) for i in sorted(set(indices))]
    return ("code cell " if len(shown) == 1 else "code cells ") + ", ".join(shown)


def _run_text(report: dict, numbers: dict[int, int], settings: Settings) -> str:
    """How the run went, in one line, cells numbered as JupyterLab numbers them."""
    run = report.get("run")
    run = str(run) if isinstance(run, str) else "unknown"
    skipped = report.get("skipped") if isinstance(report.get("skipped"), dict) else {}
    errors = report.get("errors") if isinstance(report.get("errors"), dict) else {}
    timeouts, truncated = _indices(report.get("timeouts")), _indices(report.get("truncated"))
    hung = [i for i in _indices(skipped) if "interrupt" in str(skipped[str(i)])]
    killed = [i for i in _indices(skipped) if i not in hung]
    limit = settings.cell_timeout or settings.timeout
    parts = [run]
    if timeouts:
        parts.append(f"timeout in {_cells(timeouts, numbers)} (limit {limit:g} s"
                     + (", ignored the interrupt: skipped" if hung else ", interrupted") + ")")
    if killed:
        parts.append(f"kernel died in {_cells(killed, numbers)} (skipped, the other "
                     "cells re-ran in a fresh kernel)")
    crashed = [i for i in _indices(errors) if i not in timeouts]
    if crashed:
        parts.append(f"errors in {_cells(crashed, numbers)}")
    stopped = report.get("stopped_at")
    if isinstance(stopped, int):
        parts.append(f"notebook time limit ({settings.timeout:g} s) reached: code cells from "
                     f"{numbers.get(stopped, stopped + 1)} on not run")
    if truncated:
        parts.append(f"output of {_cells(truncated, numbers)} truncated")
    if report.get("evaluation"):
        parts.append(str(report["evaluation"]))
    return "; ".join(parts)


def _defining_cell(nb: nbformat.NotebookNode, name: str, numbers: dict[int, int]) -> str:
    """The number of the last code cell that defines ``name`` at its top level ("" if none)."""
    pattern = re.compile(rf"^(?:(?:async\s+)?def|class)\s+{re.escape(name)}\b|^{re.escape(name)}"
                         rf"\s*(?::[^=]*)?=(?!=)", re.MULTILINE)
    found = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and
             pattern.search(c.source)]
    return str(numbers[found[-1]]) if found else ""


def grade_notebook(
    submission: Submission,
    expected: Iterable[str] = (),
    *,
    settings: Settings | None = None,
) -> list[dict[str, str]]:
    """Grade one submitted notebook and return its CSV rows (see ``COLUMNS``); never raises
    for a problem with the submission.

    The notebook's cells run first (every cell may fail); then the grader calls each
    exercise's answer by name (the spec's ``answer``, else the name the assigned check cell
    passes, else the submission's) on inputs drawn now, and judges the numbers. A check cell
    is not needed; files the notebook writes where results used to travel are ignored and
    flagged.
    """
    settings = settings or Settings()
    started = time.monotonic()
    expected = list(expected)
    if submission.problem:
        verdicts = {i: (False, submission.problem) for i in expected}
        return _rows(submission, expected, verdicts, "not run", 0.0, settings)
    try:
        nb = nbformat.reads(read_notebook_bytes(submission.path).decode("utf-8"), as_version=4)
        nbformat.validate(nb)
    except Exception as error:  # not UTF-8, not JSON, not a notebook, not a regular file
        reason = f"malformed notebook, not run ({type(error).__name__}: {_short(error)[:120]})"
        verdicts = {i: (False, reason) for i in expected}
        return _rows(submission, expected, verdicts, "malformed", time.monotonic() - started,
                     settings)
    check_cells: dict[str, int] = {}
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            cell.outputs = []  # outputs of the student's own session say nothing about this run
            cell.execution_count = None
            for exercise_id in check_ids_in(cell.source):
                check_cells.setdefault(exercise_id, index)
    ids = list(dict.fromkeys(expected + list(check_cells)))
    assigned = settings.names.get(Path(submission.notebook).name, {})
    own = checked_names(c.source for c in nb.cells if c.cell_type == "code")
    names: dict[str, list[str]] = {}
    for exercise_id in ids:
        spec = get_spec(exercise_id)
        candidates = [spec.answer if spec else None, assigned.get(exercise_id),
                      own.get(exercise_id)]
        names[exercise_id] = list(dict.fromkeys(n for n in candidates if n))
    tmp = Path(tempfile.mkdtemp(prefix="attnlab-grade-"))
    try:
        os.chmod(tmp, 0o700)
        prepared, inputs = _prepare(ids, settings, submission, names)
        budget = sum(float(spec.timeout) + 5.0 for spec, _ in prepared.values())
        request = {"notebook": nbformat.writes(nb), "inputs": inputs,
                   "evaluation_timeout": budget}
        report, failure = _execute(request, submission, tmp, settings)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    numbers = code_cell_numbers(nb)
    run = failure or _run_text(report, numbers, settings)
    results = report.get("results") if isinstance(report.get("results"), dict) else {}
    planted = report.get("planted") if isinstance(report.get("planted"), list) else []
    flags = []
    if planted:
        shown = ", ".join(str(p)[:60] for p in planted[:5])
        flags.append(f"the notebook wrote files into the results folder ({shown}): ignored")
    verdicts: dict[str, tuple] = {}
    for exercise_id in ids:
        mine = list(flags)
        wanted = names.get(exercise_id, [])
        if exercise_id not in check_cells:
            mine.append("no check cell in the submission (graded anyway)")
        if exercise_id not in prepared:
            verdicts[exercise_id] = (False, "the grader has no spec for this exercise (give "
                                     "it the instructor's check module with --checks)", "", mine)
            continue
        blob = results.get(exercise_id)
        if blob is None:
            why = failure or (f"not evaluated: {run}" if run != "completed" else
                              "not evaluated: the grader's evaluation returned nothing")
            verdicts[exercise_id] = (False, why, "", mine)
            continue
        spec, cases = prepared[exercise_id]
        passed, message = _verdict(spec, cases, blob)
        used = _evaluated_name(blob)
        if used and wanted and used != wanted[0]:
            mine.append(f"graded `{used}` (the name its check cell uses), not `{wanted[0]}`")
        cell = _defining_cell(nb, used or (wanted[0] if wanted else ""), numbers) if (
            used or wanted) else ""
        verdicts[exercise_id] = (passed, message, cell, mine)
    return _rows(submission, ids, verdicts, run, time.monotonic() - started, settings)
