"""The grader as an unprivileged user (rootless mode), under an inherited ``ulimit -v``, and
reproducible with ``--seed`` (two gradings of a two-student class).

Each test runs the real command, ``python -m attnlab.grade``, in a child process as an
unprivileged user and **without** ``--allow-unsandboxed``: as ``nobody`` when the tests run
as root (through a private mount namespace where the interpreter lives under a folder only
root may enter, such as ``/root``), else as the user running the tests. The class is two
students: an honest one and a spy whose 99.2 answer is ``log(4) + (number of things it
reached)``, so that the grade says whether the sandbox held (as in ``test_course_grade``).
"""

from __future__ import annotations

import atexit
import csv
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest
from _grading import COURSEWORK, NAME, SOFTMAX, count_reached
from _grading import notebook as _notebook

from attnlab.course import sandbox

MARKER = "7771"  # a detached `sleep 7771` left by the spy must not outlive the grading


def _spy(victim: Path, outside: Path) -> str:
    reached = count_reached(
        [f"open({str(victim)!r}).read()", f"os.listdir({str(victim.parent.parent)!r})",
         f"open({str(outside)!r}, 'w').write('x')",
         "open('/home/student/submitted/escape', 'w').write('x')",
         "socket.create_connection(('1.1.1.1', 53), timeout=2)",
         "socket.create_connection(('127.0.0.1', 22), timeout=2)"],
        ["/home", "/tmp", "/srv", "/mnt", "/var/tmp"],
    )  # fmt: skip
    return f"""
import os, socket, subprocess
{reached}
subprocess.Popen(['sleep', {MARKER!r}], start_new_session=True)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp('sleep', ['sleep', {MARKER!r}])
    os._exit(0)
uniform_entropy = float(np.log(4)) + found
"""


def _unprivileged() -> list[str]:
    """The prefix that runs a command as an unprivileged user (empty if we already are)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is needed to drop to nobody")
    return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]


def _reachable_python() -> list[str]:
    """A command prefix under which ``nobody`` can run this interpreter (root only)."""
    nested = ("import subprocess, sys; subprocess.run([sys.executable, '-c', 'import attnlab, "
              "nbclient'], check=True)")  # the grader starts the interpreter again, as nobody
    probe = [*_unprivileged(), sys.executable, "-c", nested]
    env = {**os.environ, "PYTHONPATH": str(Path(sandbox.__file__).parents[2])}
    if subprocess.run(probe, capture_output=True, env=env).returncode == 0:
        return []
    hidden = next((p for p in Path(sys.base_prefix).resolve().parents
                   if p != Path("/") and not os.stat(p).st_mode & 0o001), None)
    if hidden is None or shutil.which("unshare") is None:
        pytest.skip("nobody cannot run this interpreter")
    # A private mount namespace in which `hidden` is an open tmpfs holding only the
    # interpreter's own folder: nothing of it is visible to anyone else.
    keep = tempfile.mkdtemp(prefix="attnlab-interp-")
    atexit.register(os.rmdir, keep)  # empty on the host: the mounts live in the namespace
    inner = Path(sys.base_prefix).resolve().relative_to(hidden).parts[0]
    script = (f"mount --bind {hidden / inner} {keep} && "
              f"mount -t tmpfs -o mode=0755 tmpfs {hidden} && mkdir {hidden / inner} && "
              f'mount --bind {keep} {hidden / inner} && exec "$@"')
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh"]


def _rootless_or_skip() -> None:
    if shutil.which("bwrap") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("no bubblewrap under CI")
        pytest.skip("bubblewrap is not installed (scripts/ensure_sandbox.sh)")
    refusal = sandbox.userns_refusal()
    if refusal is not None:
        pytest.skip(refusal)


@pytest.fixture(scope="module")
def course():
    _rootless_or_skip()
    root = Path(tempfile.mkdtemp(prefix="attnlab-rootless-"))
    root.chmod(0o755)
    subs = root / "submissions"
    for student in ("alice", "spy"):
        (subs / student).mkdir(parents=True)
        shutil.copy(COURSEWORK / "hw_checks.py", subs / student)
    check_1, check_2 = 'assert check("99.1", stable_softmax)', 'check("99.2", uniform_entropy)'
    honest = _notebook(SOFTMAX, check_1, "uniform_entropy = float(np.log(4))", check_2)
    nbformat.write(honest, subs / "alice" / NAME)
    spy = _notebook(SOFTMAX, check_1, _spy(subs / "alice" / NAME, root / "escaped"), check_2)
    nbformat.write(spy, subs / "spy" / NAME)
    (root / "out").mkdir()
    if os.geteuid() == 0:  # nobody must be able to read the class and write the grades
        for path in [root, *root.rglob("*")]:
            os.chown(path, 65534, 65534)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _grade(root: Path, out: str, *options: str, preexec=None,
           crowd: bool = False) -> subprocess.CompletedProcess:
    cmd = [*_reachable_python(), *_unprivileged(), sys.executable, "-m", "attnlab.grade",
           str(root / "submissions"), "--out", str(root / "out" / out), "--source",
           str(COURSEWORK), "--timeout", "60", "--jobs", "1", *options]
    env = {**os.environ, "PYTHONPATH": str(Path(sandbox.__file__).parents[2]),
           "TMPDIR": "/tmp", "HOME": str(root)}
    if crowd:
        subprocess.run([*_unprivileged(), sys.executable, "-c",
                        "import subprocess\nfor _ in range(300):\n"
                        f"    subprocess.Popen(['sleep', '{CROWD}'], start_new_session=True)"],
                       check=True, env=env, timeout=120)
    started = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env,
                          cwd=root, preexec_fn=preexec)
    print(f"\n{out}: graded 2 notebooks in {time.monotonic() - started:.1f} s")
    return done


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _survivors() -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "cmdline").read_bytes().split(b"\0")[:2] == [
                    b"sleep", MARKER.encode()]:
                found.append(entry.name)
        except OSError:
            pass
    return found


CROWD = "6001"  # the grading user's other processes (a desktop session has hundreds)


@pytest.fixture(scope="module")
def graded(course):
    try:
        done = _grade(course, "first.csv", "--seed", "1234", crowd=True)
    finally:
        for entry in Path("/proc").iterdir():
            try:
                if entry.name.isdigit() and (entry / "cmdline").read_bytes() == (
                        b"sleep\0" + CROWD.encode() + b"\0"):
                    os.kill(int(entry.name), 9)
            except OSError:
                pass
    time.sleep(0.5)
    return done, _rows(course / "out" / "first.csv") if done.returncode == 0 else [], _survivors()


def test_an_unprivileged_grader_runs_rootless_and_says_so(graded):
    done, rows, _ = graded
    assert done.returncode == 0, done.stderr[-3000:]
    assert "mode rootless" in done.stderr and "WITHOUT A SANDBOX" not in done.stderr
    assert {r["mode"] for r in rows} == {"rootless"}


def test_the_rootless_sandbox_holds(graded, course):
    _, rows, survivors = graded
    mine = {(r["student"], r["exercise"]): r for r in rows}
    assert mine["alice", "99.1"]["passed"] == "1" and mine["alice", "99.2"]["passed"] == "1"
    assert mine["spy", "99.1"]["passed"] == "1"
    # log(4) + 0: no classmate's file, no host folder, no write outside, no network.
    assert mine["spy", "99.2"]["passed"] == "1", mine["spy", "99.2"]
    assert not (course / "escaped").exists()
    assert not (course / "submissions" / "spy" / "escape").exists()
    assert survivors == []  # the detached sleep and the daemon died with the sandbox


def test_the_same_seed_gives_the_same_grades_even_under_an_inherited_ulimit(graded, course):
    """The second grading runs under ``ulimit -v 4194304`` (a shared server's limit, below
    the sandbox's own 64 GiB backstop): it must work, say what it lowered, and give the
    same rows as the first, except the timing column."""
    import resource

    limit = 4 * 2**30

    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    _, first, _ = graded
    again = _grade(course, "second.csv", "--seed", "1234", preexec=lower)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "RLIMIT_AS lowered to the inherited hard limit 4 GiB" in again.stderr
    assert "address_space 4 GiB" in again.stderr
    second = _rows(course / "out" / "second.csv")
    assert {r["seed"] for r in first} == {"1234"} and len(first) == 4
    strip = [{k: v for k, v in r.items() if k != "seconds"} for r in first]
    assert strip == [{k: v for k, v in r.items() if k != "seconds"} for r in second]


def test_the_refusal_names_the_sysctl_that_disables_user_namespaces(tmp_path, monkeypatch):
    for relative, name, value in (
        ("kernel/unprivileged_userns_clone", "kernel.unprivileged_userns_clone", "0"),
        ("user/max_user_namespaces", "user.max_user_namespaces", "0"),
    ):
        fake = tmp_path / name
        (fake / relative).parent.mkdir(parents=True)
        (fake / relative).write_text(value + "\n")
        monkeypatch.setattr(sandbox, "PROC_SYS", fake)
        message = sandbox.userns_refusal()
        assert message is not None and name in message and "sysctl -w" in message
    (tmp_path / "open" / "user").mkdir(parents=True)
    (tmp_path / "open" / "user" / "max_user_namespaces").write_text("15000\n")
    monkeypatch.setattr(sandbox, "PROC_SYS", tmp_path / "open")
    assert sandbox.userns_refusal() is None


def test_limits_never_exceed_the_inherited_hard_limits():
    import resource

    wanted = sandbox.Limits(address_space=2**62, open_files=10**9)
    got, notes = sandbox.effective_limits(wanted)
    for name, rlimit in sandbox.RLIMITS.items():
        hard = resource.getrlimit(getattr(resource, rlimit))[1]
        if hard != resource.RLIM_INFINITY:
            assert getattr(got, name) <= hard, name
    assert math.isfinite(got.open_files) and got.open_files <= 10**9
    assert any("RLIMIT_NOFILE" in n for n in notes) == (
        resource.getrlimit(resource.RLIMIT_NOFILE)[1] < 10**9)
