"""Grade one submitted notebook in a sandbox; the grader alone decides pass or fail.

For each notebook: the grader draws every exercise's cases (seeded, :func:`case_seed`) and
computes the references itself, from the trusted specs (attnlab's chapters and the
instructor's ``--checks`` modules). The notebook runs top to bottom in a fresh sandbox
(:mod:`attnlab.course.runner`); only after its last cell does the runner receive the inputs
(sent on its stdin, never where the notebook's cells could see them) and call each answer
by the name its spec gives, in a forked child with its own time limit
(:mod:`attnlab.course.capture`). The grader judges the plain numbers that come back
(:mod:`attnlab.course.verdicts`). Nothing the notebook does to ``attnlab`` in its kernel, to
files, or to its inputs changes a grade: the only way to pass is to define an answer that
returns the right numbers for inputs drawn after the notebook ran.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import numpy as np

from attnlab.course import sandbox
from attnlab.course.adapters import save_plain
from attnlab.course.assigned import (  # noqa: F401  (re-exported: the grader's API)
    checked_names,
    expected_exercises,
    load_checks,
    source_names,
)
from attnlab.course.cgroups import Cgroup, joining
from attnlab.course.files import Submission, copy_folder, read_notebook_bytes, safe_cell
from attnlab.course.runner import _MAX_RESTARTS, STARTED
from attnlab.course.spec import Case, Spec, get_spec
from attnlab.course.student import check_ids_in
from attnlab.course.verdicts import (  # noqa: F401  (_load_result, _verdict: for tests)
    _defining_cell,
    _evaluated_name,
    _load_result,
    _run_text,
    _verdict,
    code_cell_numbers,
)

#: The long CSV, one row per student, notebook and exercise. ``seconds`` is the only column
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
                      "names": names.get(exercise_id, []), "forbid": list(spec.forbid),
                      "args": [list(c.args) for c in cases]}
            save_plain(scratch / "case.npz", record)
            inputs[exercise_id] = base64.b64encode((scratch / "case.npz").read_bytes()).decode()
            prepared[exercise_id] = (spec, cases)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return prepared, inputs


#: Every user id this process has handed to a sandbox (to check that none is still in use).
USED_UIDS: set[int] = set()
#: How many sandbox user ids a grader may claim, from ``UID_BASE + 1`` on
#: (``UID_BASE`` itself is the availability probe's).
UID_SLOTS = 4096


@contextlib.contextmanager
def _claimed_uid():
    """A sandbox user id that no other grader on this machine holds while the block runs.

    A grader claims an id by binding a Unix socket of the abstract namespace named after it
    (Linux; no file is left behind): a second bind of the name fails while the first is open,
    and the kernel releases it when the grader closes it or dies. So two graders, in one
    process or many, never share an id and never kill each other's processes. The search
    starts at a place that depends on the pid, so graders rarely try the same ids first.
    """
    with _uid_lock:
        start = (os.getpid() * 64 + next(_uids)) % UID_SLOTS
    for k in range(UID_SLOTS):
        uid = sandbox.UID_BASE + 1 + (start + k) % UID_SLOTS
        claim = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            claim.bind(f"\0attnlab-sandbox-uid-{uid}")
        except OSError:
            claim.close()
            continue
        try:
            with _uid_lock:
                USED_UIDS.add(uid)
            yield uid
        finally:
            claim.close()  # releases the name
        return
    raise RuntimeError(f"all {UID_SLOTS} sandbox user ids are held by running graders")


def _runner_argv(settings: Settings, submitted: str, work: str, io_dir: str) -> list[str]:
    cell_timeout = settings.cell_timeout or settings.timeout
    return [sandbox.python_executable(), "-m", "attnlab.course.runner", str(settings.timeout),
            str(cell_timeout), str(_STARTUP), str(settings.limits.output), submitted, work,
            io_dir]


def _execute(
    request: dict, submission: Submission, tmp: Path, settings: Settings
) -> tuple[dict, str]:
    """Run the notebook in the settings' mode (see :func:`_execute_as`); the runner's report."""
    if settings.mode in ("rootful", "uid-only"):
        with _claimed_uid() as uid:
            return _execute_as(request, submission, tmp, settings, uid)
    return _execute_as(request, submission, tmp, settings, os.getuid())


def _execute_as(
    request: dict, submission: Submission, tmp: Path, settings: Settings, uid: int
) -> tuple[dict, str]:
    """Run the notebook as user ``uid``; the runner's report.

    ``uid-only`` (root without a working bubblewrap, as in a Docker container) runs the
    runner under a user id of its own in ``tmp/box``: it cannot read the request (root's,
    mode 0600), the grader's files or the results file, and its stragglers are killed.
    """
    own_uid = settings.mode == "uid-only"
    box = tmp / "box" if own_uid else tmp
    box.mkdir(exist_ok=True)
    submitted = box / "submitted"
    if submission.own_folder and submission.folder is not None:
        copy_folder(submission.folder, submitted)
    submitted.mkdir(exist_ok=True)
    for module in settings.check_files:  # the instructor's copy, never the student's
        target = submitted / Path(module).name
        target.unlink(missing_ok=True)
        shutil.copyfile(module, target)
    request_path = tmp / "request.json"
    request_path.write_text(json.dumps(request), encoding="utf-8")
    request_path.chmod(0o600)
    limits = settings.limits
    rootful = settings.mode == "rootful"
    if rootful or own_uid:
        sandbox.kill_user(uid)  # a straggler of an earlier run must not count against it
    if settings.mode in ("rootful", "rootless"):
        argv = _runner_argv(settings, sandbox.SUBMITTED, sandbox.WORK, "/tmp/io")
        cmd = sandbox.sandbox_command(argv, submitted=submitted, uid=uid, limits=limits,
                                      rootless=not rootful)
        env = {"PATH": "/usr/bin:/bin"}
        cwd = "/"
    else:
        (box / "io").mkdir()
        argv = _runner_argv(settings, str(submitted), str(box / "work"), str(box / "io"))
        cmd = [*sandbox._rlimits(limits), *argv]
        env = {**os.environ, **sandbox.sandbox_env(), "HOME": str(box), "MPLCONFIGDIR": str(box)}
        env.pop("JUPYTER_RUNTIME_DIR")
        env.pop("IPYTHONDIR")
        cwd = str(box)
        if own_uid:
            os.chmod(tmp, 0o711)  # the box is reachable by name; nothing else here is
            for path in [box, *box.rglob("*")]:
                os.lchown(path, uid, uid)
            cmd = [*sandbox._rlimits(limits), "setpriv", f"--reuid={uid}", f"--regid={uid}",
                   "--clear-groups", "--no-new-privs", "--inh-caps=-all",
                   "--bounding-set=-all", "--", *argv]
    out_path, err_path = tmp / "report.json", tmp / "runner.log"
    group = Cgroup(f"attnlab-{uid}-{os.getpid()}-{next(_uids)}", limits.total_memory,
                   limits.processes)
    group.create()
    runs = _MAX_RESTARTS + 1  # each run of the notebook may take the whole --timeout
    wait = runs * (settings.timeout + 15) + 2 * _STARTUP + float(
        request.get("evaluation_timeout", 0))
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
            if rootful or own_uid:
                sandbox.kill_user(uid)
    try:
        report = json.loads(out_path.read_bytes()[-(80 * 2**20):].decode("utf-8").splitlines()[-1])
        if not isinstance(report, dict):
            raise ValueError
    except (ValueError, IndexError, UnicodeDecodeError):
        log = err_path.read_bytes()[:1 << 20].decode("utf-8", "replace")
        if STARTED not in log and not ended:  # the host's fault, not the notebook's
            last = (log.strip().splitlines() or [""])[-1][:300]
            raise RuntimeError(f"the runner did not start (exit status {process.returncode}"
                               f"{': ' + last if last else ''})") from None
        return {}, ended or f"the run ended without a report (exit status {process.returncode})"
    return report, ""


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
    run = failure or _run_text(report, numbers, settings.timeout, settings.cell_timeout)
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
