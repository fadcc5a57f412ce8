"""Adversarial tests of the grader: a class of students who try to cheat, sabotage and break it.

One grading run (module fixture, ``--jobs 2``) over a folder made here. Every student below
answers 99.1 (stable softmax) and 99.2 (the value log 4) of the fixture assignment, and
each tries one attack. The bar: every cheat fails, every honest answer keeps its grade,
every entry gets rows, the CSV is complete, nothing keeps running, no temp folder is left.

The saboteur's 99.2 answer is ``log(4) + (number of things it managed to reach)``: it passes
exactly when the sandbox held (no other submission, no host path, no network, no writes
outside). That turns "what could the notebook see?" into a grade the test can read.
"""

from __future__ import annotations

import csv
import os
import shutil
import tempfile
import time
import tracemalloc
from pathlib import Path

import nbformat
import numpy as np
import pytest
from _grading import COURSEWORK, NAME, SOFTMAX, count_reached, require_sandbox
from _grading import notebook as _notebook

from attnlab.course import sandbox
from attnlab.course.sandbox import user_processes
from attnlab.grade import COLUMNS, grade, main

# Seconds per notebook. No notebook here runs into it (the spinner's exercise has its own
# second), so it only bounds a notebook that runs slowly: 20 s once failed the herd's cell on
# a machine loaded well past its two cores (make test runs the unit tests in parallel).
TIMEOUT = 60.0
ENTROPY = "uniform_entropy = float(np.log(4))"
CHECK_1 = 'assert check("99.1", stable_softmax)'
CHECK_2 = 'assert check("99.2", uniform_entropy)'


def _honest() -> nbformat.NotebookNode:
    return _notebook(SOFTMAX, CHECK_1, ENTROPY, CHECK_2)


WRONG = "def stable_softmax(x):\n    return np.zeros_like(x)"

PATCHER = (  # replaces check, the spec judge and the capture inside its kernel
    "import attnlab.course.check as cc\nimport attnlab.course.spec as cs\n"
    "import attnlab.exercises as ex\n"
    "cs.judge = lambda got, case: None\ncc.run_spec = lambda *a, **k: (True, 'forged')\n"
    "ex.check = lambda *a, **k: True\ncheck = ex.check"
)
FORGER = (  # forges the results channels: old results file, capture outputs, a pickle
    "import os, pickle\nfrom pathlib import Path\nfrom attnlab.course.adapters import save_plain\n"
    "cap = Path(os.environ.get('ATTNLAB_CAPTURE', '.'))\n(cap / 'outputs').mkdir(exist_ok=True)\n"
    "save_plain(cap / 'outputs' / '99.1.npz', [{'ok': np.zeros((3, 5))}] * 2)\n"
    "np.save(cap / 'outputs' / '99.2.npz', np.array([pickle.dumps(1)], dtype=object),\n"
    "        allow_pickle=True)\n"
    "os.replace(cap / 'outputs' / '99.2.npz.npy', cap / 'outputs' / '99.2.npz')\n"
    "Path(os.environ.get('ATTNLAB_RESULTS', 'r.jsonl')).write_text(\n"
    "    '{\"exercise\": \"99.1\", \"passed\": true, \"message\": \"ok\"}\\n')\n"
    "check = lambda *a, **k: True"
)
MUTATOR = (
    "def stable_softmax(x):\n    x[...] = 0.0  # the reference was computed on these\n"
    "    return np.full_like(x, 1 / x.shape[-1])"
)


def _saboteur(victim: Path) -> str:
    host_marker = victim.parent.parent / "escape-marker"
    reached = count_reached(
        ["open(victim).read()", "open(victim, 'a').write('x')",
         "os.listdir(os.path.dirname(os.path.dirname(victim)))",
         f"open({str(host_marker)!r}, 'w').write('x')",
         "socket.create_connection(('1.1.1.1', 53), timeout=2)",
         "socket.create_connection(('127.0.0.1', 22), timeout=2)"],
        ["/home", "/tmp", "/root", "/srv", "/mnt", "/var/tmp"],
    )  # fmt: skip
    return f"""
import os, socket
victim = {str(victim)!r}
{reached}
for harmless in ('/tmp/attnlab-escape-marker', '../escape-marker'):  # its own tmpfs
    try:
        open(harmless, 'w').write('x')
    except OSError:
        pass
uniform_entropy = float(np.log(4)) + found
"""


HOG = """
import os, subprocess, time
subprocess.Popen(['sleep', '1000'], start_new_session=True)  # a detached child
if os.fork() == 0:  # a double-forked daemon
    os.setsid()
    if os.fork() == 0:
        time.sleep(1000)
    os._exit(0)
pids = []
try:
    for _ in range(100_000):  # a fork bomb, within limits
        pid = os.fork()
        if pid == 0:
            time.sleep(1000)
            os._exit(0)
        pids.append(pid)
except OSError:
    pass
for pid in pids:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
assert len(pids) < 100_000, 'the process limit did not hold'
try:
    hog = np.ones(6 * 2**30 // 8)  # 6 GiB
    raise AssertionError('the memory limit did not hold')
except MemoryError:
    pass
"""

CRASHER = "import ctypes\n\n\ndef stable_softmax(x):\n    return ctypes.string_at(0)  # segfault"
SPINNER = (  # blocks the alarm that would stop it, then never returns
    "import signal\n\n\ndef echo(x):\n"
    "    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})\n"
    "    while True:\n        pass"
)
EXTRA_CHECKS = '''"""A one-second exercise for the spinner (instructor's extra check module)."""

from attnlab.exercises import Case, exercise


@exercise("99.4", passed="echoes", timeout=1.0)
def _echo(rng):
    x = rng.normal(size=3)
    yield Case((x,), x.copy(), on="x")
'''
HERD = """
import os, time
children = []
for _ in range(6):  # 6 x 700 MiB, each under the per-process limit, 4.2 GiB together
    pid = os.fork()
    if pid == 0:
        block = bytearray(700 * 2**20)
        block[::4096] = b"x" * len(range(0, len(block), 4096))  # touch every page
        time.sleep(2)
        os._exit(0)
    children.append(pid)
statuses = [os.waitpid(pid, 0)[1] for pid in children]
killed = sum(os.WIFSIGNALED(s) and os.WTERMSIG(s) == 9 for s in statuses)
assert killed >= 1, "the sandbox's total memory limit did not hold"
"""
SHOUTER = "for _ in range(100):\n    print('x' * 2**20)"  # 100 MB: truncated, not fatal
FORGED_RESULTS = (  # no answer and no check cell: a results file it made itself instead
    "import os\nfrom pathlib import Path\nfrom attnlab import softmax\n"
    "from attnlab.course.adapters import save_plain\n"
    "cap = Path(os.environ.get('ATTNLAB_CAPTURE', '/tmp/io'))\n"
    "seen = [p for p in cap.rglob('*.npz')]  # the grader's inputs, if they were there\n"
    "(cap / 'outputs').mkdir(parents=True, exist_ok=True)\n"
    "guess = [{'ok': softmax(np.ones((3, 5)))}] * 3\n"
    "save_plain(cap / 'outputs' / '99.1.npz', guess)\n"
    "save_plain(cap / 'outputs' / '99.1.npz.tmp2', {'name': 'stable_softmax', 'cases': guess})"
)
GARBAGE = (  # a correct answer, no check cell, and garbage where results used to travel
    "import os\nfrom pathlib import Path\n"
    "cap = Path(os.environ.get('ATTNLAB_CAPTURE', '/tmp/io'))\n"
    "(cap / 'outputs').mkdir(parents=True, exist_ok=True)\n"
    "(cap / 'outputs' / '99.1.npz').write_bytes(os.urandom(4096))"
)

PARRICIDE = "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)"

#: The rows of a notebook that keeps both grades (an honest answer the attack did not spoil).
PASSES = {"99.1": (True, "matches"), "99.2": (True, "log(4)")}

# student -> (notebook or None, {exercise: (passed, phrase)}); None = made by hand below.
CLASS = {
    "honest": (_honest(), PASSES),
    "patcher": (
        _notebook(WRONG, PATCHER, CHECK_1, "uniform_entropy = 0.5", CHECK_2),
        {"99.1": (False, ""), "99.2": (False, "")},
    ),
    "forger": (
        _notebook(WRONG, FORGER, CHECK_1, "uniform_entropy = 0.5", CHECK_2),
        {"99.1": (False, ""), "99.2": (False, "")},
    ),
    "mutator": (
        _notebook(MUTATOR, CHECK_1, ENTROPY, CHECK_2),
        {"99.1": (False, "expected"), "99.2": (True, "log(4)")},
    ),
    "hog": (_notebook(HOG, SOFTMAX, CHECK_1, ENTROPY, CHECK_2), PASSES),
    "herd": (_notebook(HERD, SOFTMAX, CHECK_1, ENTROPY, CHECK_2), PASSES),
    "shouter": (
        _notebook(SOFTMAX, CHECK_1, SHOUTER, ENTROPY, CHECK_2),
        {"99.1": (True, "matches"), "99.2": (True, "output of code cells 4, 6 truncated")},
    ),
    "mallory": (  # deleted check cell, hand-made results file: it must not pass through it
        _notebook(FORGED_RESULTS, ENTROPY, CHECK_2),
        {"99.1": (False, "defines no `stable_softmax`"), "99.2": (True, "results folder")},
    ),
    "garbage": (  # the garbage is ignored and flagged; the answer without a check is graded
        _notebook(SOFTMAX, GARBAGE, ENTROPY, CHECK_2),
        {"99.1": (True, "no check cell"), "99.2": (True, "results folder (99.1.npz)")},
    ),
    "links": (_honest(), PASSES),
    "big": (_honest(), PASSES),
    "dirnb": (None, {"99.1": (False, "not submitted"), "99.2": (False, "not submitted")}),
    "linknb": (None, {"99.1": (False, "symbolic link"), "99.2": (False, "symbolic link")}),
    "caf\udce9": (_honest(), PASSES),
    '=2+3*HYPERLINK("http:x")': (_honest(), {"99.1": (True, ""), "99.2": (True, "")}),
}


def _sandbox_uids() -> list[int]:
    from attnlab.course.grade import USED_UIDS

    assert USED_UIDS
    return [pid for uid in sorted(USED_UIDS) for pid in user_processes(uid)]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    require_sandbox()
    root = tmp_path_factory.mktemp("class")
    subs = root / "submissions"
    subs.mkdir()
    for student, (nb, _) in CLASS.items():
        folder = subs / student
        folder.mkdir()
        shutil.copy(COURSEWORK / "hw_checks.py", folder)
        (folder / "extra_checks.py").write_text(EXTRA_CHECKS)
        if nb is not None:
            nbformat.write(nb, folder / NAME)
    saboteur = _notebook(SOFTMAX, CHECK_1, _saboteur(subs / "honest" / NAME), CHECK_2)
    (subs / "saboteur").mkdir()
    shutil.copy(COURSEWORK / "hw_checks.py", subs / "saboteur")
    nbformat.write(saboteur, subs / "saboteur" / NAME)
    links = subs / "links"
    (links / "dangling").symlink_to(root / "nowhere")
    (links / "loop").symlink_to(links / "loop")
    os.mkfifo(links / "fifo")
    (links / "etc").symlink_to("/etc")
    with open(subs / "big" / "huge.bin", "wb") as handle:  # sparse: 1 GiB, no disk used
        handle.truncate(2**30)
    (subs / "dirnb" / NAME).mkdir()
    (subs / "linknb" / NAME).symlink_to(subs / "honest" / NAME)
    os.mkfifo(subs / "pipe")
    (subs / "ghost").symlink_to(root / "nowhere")
    notebooks = [p for p in subs.rglob("*.ipynb") if p.is_file() and not p.is_symlink()]
    before = {p: p.read_bytes() for p in notebooks}
    private = root / "tmp"  # the grader's own temp folders land here, not among a neighbour's
    private.mkdir()
    default_tmp, tempfile.tempdir = tempfile.tempdir, str(private)
    out = root / "grades.csv"
    started = time.monotonic()
    (root / "extra_checks.py").write_text(EXTRA_CHECKS)
    checks = [COURSEWORK / "hw_checks.py", root / "extra_checks.py"]
    limits = sandbox.Limits(total_memory=3 * 2**30)  # the herd needs 4.2 GiB
    try:
        rows = grade(subs, out, source=COURSEWORK, checks=checks, timeout=TIMEOUT, jobs=2,
                     progress=False, limits=limits)
    finally:
        tempfile.tempdir = default_tmp
    seconds = time.monotonic() - started
    print(f"\ngraded {len(CLASS) + 1} adversarial students in {seconds:.1f} s (jobs=2)")
    for row in rows:
        print(" | ".join(row[k] for k in ("student", "exercise", "passed", "message", "run")))
    time.sleep(0.5)
    after = {p: p.read_bytes() for p in before}
    return {
        "rows": rows, "out": out, "unchanged": before == after, "root": root,
        "survivors": _sandbox_uids(), "new_temps": set(private.iterdir()),
    }


def _mine(rows, student):
    return {r["exercise"]: r for r in rows if r["student"] == student and r["notebook"] == NAME}


@pytest.mark.parametrize("student", sorted(CLASS))
def test_each_student_gets_the_grade_their_answers_deserve(graded, student):
    shown = student.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    if shown.startswith("="):
        shown = "'" + shown
    mine = _mine(graded["rows"], shown)
    assert sorted(mine) == sorted(CLASS[student][1]), graded["rows"]
    for exercise, (passed, phrase) in CLASS[student][1].items():
        row = mine[exercise]
        assert row["passed"] == ("1" if passed else "0"), row
        assert phrase in " | ".join((row["message"], row["run"], row["flags"])), row


@pytest.mark.parametrize(
    "student", ["honest", "hog", "saboteur", "links", "big", "patcher"]
)
def test_limits_held_inside_the_notebooks_that_test_them(graded, student):
    # hog asserts in its own cells that the fork bomb and the 6 GiB allocation were refused:
    # a cell error would show in the run column.
    assert {r["run"] for r in _mine(graded["rows"], student).values()} == {"completed"}


def test_the_total_memory_of_a_sandbox_is_capped_where_cgroups_exist(graded):
    from attnlab.course.cgroups import _roots

    if os.geteuid() != 0 or not _roots():
        pytest.skip("no writable memory and pids cgroups here: only per-process limits")
    assert {r["run"] for r in _mine(graded["rows"], "herd").values()} == {"completed"}


def test_the_saboteur_reached_nothing_outside_its_sandbox(graded):
    mine = _mine(graded["rows"], "saboteur")
    assert mine["99.1"]["passed"] == "1"
    assert mine["99.2"]["passed"] == "1", mine["99.2"]  # log(4) + 0 things reached
    assert not (graded["root"] / "escape-marker").exists()
    assert not (graded["root"] / "submissions" / "escape-marker").exists()
    assert not Path("/tmp/attnlab-escape-marker").exists()


def test_no_submission_changed_and_the_odd_entries_got_rows(graded):
    assert graded["unchanged"]
    rows = graded["rows"]
    for name in ("pipe", "ghost"):
        (row,) = [r for r in rows if r["student"] == name]
        assert row["passed"] == "0" and "not graded" in row["message"]


def test_the_forged_and_the_garbage_results_are_flagged_and_never_read(graded):
    for student in ("mallory", "garbage", "forger"):
        for row in _mine(graded["rows"], student).values():
            assert "the notebook wrote files into the results folder" in row["flags"], row
    honest = _mine(graded["rows"], "honest")
    assert all(row["flags"] == "" for row in honest.values()), honest


def test_the_csv_is_complete_and_has_no_formula(graded):
    with graded["out"].open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        assert reader.fieldnames == COLUMNS
        read = list(reader)
    assert read == graded["rows"]
    for row in read:
        for value in row.values():
            assert not value.startswith(("=", "+", "-", "@")), row
    assert not list(graded["out"].parent.glob(".grades-*"))  # the temporary file is gone
    assert graded["out"].stat().st_mode & 0o777 == 0o644  # readable by a TA, an LMS upload


def test_nothing_keeps_running_and_no_temp_folder_is_left(graded):
    assert graded["survivors"] == []
    assert graded["new_temps"] == set()


def test_the_grader_refuses_without_a_sandbox_unless_told(tmp_path, monkeypatch, capsys):
    subs = tmp_path / "subs"
    (subs / "zoe").mkdir(parents=True)
    (subs / "zoe" / "broken.ipynb").write_text("{")
    monkeypatch.setattr(sandbox, "availability", lambda: (False, "no bwrap in this test"))
    # as root that is uid-only mode, whose interpreter check has its own tests
    # (test_course_uid_only.py): here the interpreter counts as runnable by its user
    monkeypatch.setattr(sandbox, "uid_only_refusal", lambda: None)
    assert main([str(subs), "--out", str(tmp_path / "g.csv")]) == 3
    assert "refusing" in capsys.readouterr().err and not (tmp_path / "g.csv").exists()
    assert main([str(subs), "--out", str(tmp_path / "g.csv"), "--allow-unsandboxed"]) == 0
    assert "WITHOUT A SANDBOX" in capsys.readouterr().err
    with (tmp_path / "g.csv").open() as handle:
        (row,) = list(csv.DictReader(handle))
    assert row["run"] == "malformed"


def _npy(array) -> bytes:
    import io

    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def test_results_that_are_not_plain_numbers_fail_without_harming_the_grader():
    import base64
    import io
    import zipfile

    from attnlab.course.adapters import save_plain
    from attnlab.course.grade import _verdict
    from attnlab.course.spec import Case, Spec

    spec = Spec("99.5", lambda rng: iter(()), "ok")
    cases = [Case((), np.ones(3), on="x")]

    def blob_of(write) -> str:
        buffer = io.BytesIO()
        write(buffer)
        return base64.b64encode(buffer.getvalue()).decode()

    def bomb(buffer):  # a valid .npy of 320 MB of zeros, deflated to well under a megabyte
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            with archive.open("a0.npy", "w", force_zip64=True) as member:
                header = {"descr": "<f8", "fortran_order": False, "shape": (40 * 2**20,)}
                np.lib.format.write_array_header_1_0(member, header)
                for _ in range(320):
                    member.write(bytes(2**20))
            archive.writestr("__tree__.npy", _npy(np.array('{"t": [{"d": {"ok": {"a": "a0"}}}]}')))

    def pickled(buffer):
        np.savez(buffer, __tree__=np.array('{"t": [{"d": {"ok": {"a": "a0"}}}]}'),
                 a0=np.array([object()], dtype=object))

    def good(buffer):
        tmp = Path(tempfile.mkdtemp()) / "r.npz"
        save_plain(tmp, [{"ok": np.ones(3)}])
        buffer.write(tmp.read_bytes())

    assert _verdict(spec, cases, blob_of(good)) == (True, "ok")
    for write in (bomb, pickled):
        blob = blob_of(write)
        tracemalloc.start()
        passed, message = _verdict(spec, cases, blob)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert not passed and "could not be read" in message
        assert peak < 64 * 2**20  # the 320 MB were never unpacked
    assert _verdict(spec, cases, "not base64!")[0] is False
    assert _verdict(spec, cases, None)[0] is False


def test_unsandboxed_grading_works_and_exits_non_zero_where_a_grade_was_not_computed(
        tmp_path, monkeypatch, capsys):
    """macOS once gave every row ``grader error: PermissionError`` and exit status 0."""
    subs = tmp_path / "subs"
    (subs / "zoe").mkdir(parents=True)
    nbformat.write(_honest(), subs / "zoe" / NAME)
    monkeypatch.setattr(sandbox, "availability", lambda: (False, "no bwrap in this test"))
    monkeypatch.setattr(sandbox, "unsandboxed_mode", lambda: "unsandboxed")
    options = ["--source", str(COURSEWORK), "--allow-unsandboxed", "--seed", "1"]
    assert main([str(subs), "--out", str(tmp_path / "g.csv"), *options]) == 0
    with (tmp_path / "g.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["exercise"], r["passed"], r["mode"]) for r in rows] == [
        ("99.1", "1", "unsandboxed"), ("99.2", "1", "unsandboxed")]
    capsys.readouterr()
    monkeypatch.setattr(sandbox, "python_executable", lambda: str(tmp_path / "no-python"))
    assert main([str(subs), "--out", str(tmp_path / "h.csv"), *options]) == 4
    err = capsys.readouterr().err
    assert "2 grades could not be computed" in err and "grader error" in err


def test_root_without_bubblewrap_grades_each_notebook_under_its_own_uid(tmp_path):
    """``uid-only`` (a container where bwrap cannot run): a user id per notebook."""
    import subprocess
    import sys

    from test_course_rootless import _reachable_python

    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("uid-only mode is for root")
    subs = tmp_path / "subs"
    (subs / "zoe").mkdir(parents=True)
    whoami = "import os\nassert os.getuid() >= sandbox_uid, os.getuid()"
    nbformat.write(_notebook(f"sandbox_uid = {sandbox.UID_BASE}", whoami, SOFTMAX, CHECK_1,
                             ENTROPY, CHECK_2), subs / "zoe" / NAME)
    tools = tmp_path / "bin"  # setpriv but no bwrap on PATH: no sandbox here
    tools.mkdir()
    for tool in ("setpriv", "unshare", "sh", "mount", "mkdir"):
        if shutil.which(tool):
            (tools / tool).symlink_to(shutil.which(tool))
    env = {**os.environ, "PATH": str(tools),
           "PYTHONPATH": str(Path(sandbox.__file__).parents[2])}
    cmd = [*_reachable_python(), sys.executable, "-m", "attnlab.grade", str(subs), "--out",
           str(tmp_path / "g.csv"), "--source", str(COURSEWORK), "--allow-unsandboxed"]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "mode uid-only" in done.stderr
    with (tmp_path / "g.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["exercise"], r["passed"], r["mode"], r["run"]) for r in rows] == [
        ("99.1", "1", "uid-only", "completed"), ("99.2", "1", "uid-only", "completed")]
