"""Isolation for graded notebooks: bubblewrap, an unprivileged user and resource limits.

One submission runs as (see :func:`sandbox_command`)::

    sh (joins a memory and pids cgroup for the whole sandbox, where available)
      prlimit (memory, CPU, processes, file size, open files)
        bwrap (new mount, pid, network, ipc, uts namespaces; dies with the grader)
          setpriv (a user id of its own, no groups, no capabilities, no new privileges)
            python -m attnlab.course.runner

The sandbox sees a read-only ``/usr``, ``/etc``, the Python installation and attnlab, the
student's own folder (a private copy, read-only, copied to a size-limited ``tmpfs`` by the
runner) and the grader's inputs; nothing else of the host: not the other submissions, not
the grader's files, no network (only its own loopback). Its pid namespace dies with it, so
no process survives, and the per-submission user id lets the grader kill any straggler.

Without bubblewrap (``python -m attnlab.grade --allow-unsandboxed``) the notebook runs
under the same limits but *with the grader's user and file system*: only for trusted work.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

#: First user id handed to submissions (one id per submission, unused by real accounts).
UID_BASE = 61000
# Where the sandbox sees the grader's inputs, the student's folder and its scratch space
# (paths inside the sandbox; kept off the API page, whose tests reject absolute paths).
INPUTS = "/tmp/io/inputs"
SUBMITTED = "/home/student/submitted"
WORK = "/home/student/work"


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandboxed notebook run."""

    memory: int = 4 * 2**30  # RLIMIT_DATA: heap and anonymous mappings, bytes
    address_space: int = 64 * 2**30  # RLIMIT_AS: a backstop on virtual memory, bytes
    cpu_seconds: int = 600
    processes: int = 256  # RLIMIT_NPROC, threads included, for the submission's own uid
    file_size: int = 64 * 2**20  # RLIMIT_FSIZE: stdout to the grader included, bytes
    open_files: int = 1024
    tmpfs: int = 512 * 2**20  # size of the writable /tmp and work folder, bytes
    output: int = 8 * 2**20  # outputs of all cells of the notebook together, bytes
    total_memory: int = 6 * 2**30  # all processes of the sandbox together (cgroup), bytes


def _prlimit(limits: Limits) -> list[str]:
    return [
        "prlimit",
        f"--data={limits.memory}",
        f"--as={limits.address_space}",
        f"--cpu={limits.cpu_seconds}",
        f"--nproc={limits.processes}",
        f"--fsize={limits.file_size}",
        f"--nofile={limits.open_files}",
        "--",
    ]


def _python_roots() -> list[Path]:
    """Folders the sandbox needs read-only: the interpreter, the venv, attnlab's source."""
    import attnlab

    roots = [Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve()]
    roots.append(Path(attnlab.__file__).resolve().parent.parent)
    out: list[Path] = []
    for root in roots:
        if root == Path("/usr") or str(root).startswith("/usr/"):
            continue
        if not any(root == r or r in root.parents for r in out):
            out = [r for r in out if root not in r.parents] + [root]
    return out


def python_executable() -> str:
    """The interpreter of this environment, by a path that keeps the venv active."""
    return str(Path(sys.prefix).resolve() / "bin" / "python")


def _ancestors(path: Path) -> list[Path]:
    return [p for p in reversed(path.parents) if p != Path("/")]


def sandbox_command(
    argv: list[str], *, submitted: Path, inputs: Path, uid: int, limits: Limits
) -> list[str]:
    """The full command line that runs ``argv`` in a fresh bubblewrap sandbox."""
    cmd = [*_prlimit(limits), "bwrap", "--unshare-pid", "--unshare-net", "--unshare-ipc"]
    cmd += ["--unshare-uts", "--unshare-cgroup-try", "--die-with-parent", "--new-session"]
    cmd += ["--hostname", "sandbox", "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        host = Path("/") / name
        if host.is_symlink():
            cmd += ["--symlink", os.readlink(host), str(host)]
        elif host.is_dir():
            cmd += ["--ro-bind", str(host), str(host)]
    cmd += ["--proc", "/proc", "--dev", "/dev", "--size", str(limits.tmpfs)]
    cmd += ["--perms", "1777", "--tmpfs", "/tmp", "--perms", "0777", "--dir", "/tmp/io"]
    cmd += ["--perms", "0755", "--dir", "/home", "--size", str(limits.tmpfs)]
    cmd += ["--perms", "0777", "--tmpfs", "/home/student"]
    # The Python roots come after the scratch mounts, which would otherwise hide a venv or a
    # checkout that lives under /tmp (a CI runner's clone); the scratch folders keep their modes.
    made = {Path("/tmp"), Path("/tmp/io"), Path("/home"), Path("/home/student")}
    for root in _python_roots():
        for parent in _ancestors(root):
            if parent not in made:
                made.add(parent)
                cmd += ["--perms", "0755", "--dir", str(parent)]
        cmd += ["--ro-bind", str(root), str(root)]
    cmd += ["--ro-bind", str(submitted), SUBMITTED, "--ro-bind", str(inputs), INPUTS]
    cmd += ["--chdir", "/home/student", "--clearenv"]
    for key, value in sandbox_env().items():
        cmd += ["--setenv", key, value]
    cmd += ["--", "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    cmd += ["--no-new-privs", "--inh-caps=-all", "--bounding-set=-all", "--", *argv]
    return cmd


def sandbox_env() -> dict[str, str]:
    """The whole environment of a sandboxed run (nothing is inherited from the grader)."""
    import attnlab

    return {
        "PATH": f"{Path(python_executable()).parent}:/usr/bin:/bin",
        "HOME": "/tmp/home",
        "PYTHONPATH": str(Path(attnlab.__file__).resolve().parent.parent),
        "JUPYTER_RUNTIME_DIR": "/tmp/jupyter-runtime",
        "IPYTHONDIR": "/tmp/ipython",
        "MPLCONFIGDIR": "/tmp/matplotlib",
        "MPLBACKEND": "Agg",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "LANG": "C.UTF-8",
    }


@lru_cache(maxsize=1)
def availability() -> tuple[bool, str]:
    """``(True, how)`` when sandboxed runs work here, else ``(False, why not)``."""
    if shutil.which("bwrap") is None:
        return False, "bubblewrap (bwrap) is not installed: run scripts/ensure_sandbox.sh"
    if os.geteuid() != 0:
        return False, "the grader must run as root to give each submission its own user id"
    for tool in ("prlimit", "setpriv"):
        if shutil.which(tool) is None:
            return False, f"{tool} (util-linux) is missing"
    empty = Path("/tmp")
    argv = [python_executable(), "-c", "import os, attnlab; assert os.getuid() > 0"]
    cmd = sandbox_command(argv, submitted=empty, inputs=empty, uid=UID_BASE, limits=Limits())
    try:
        done = subprocess.run(cmd, capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as error:
        return False, f"bubblewrap could not start: {error}"
    if done.returncode != 0:
        reason = done.stderr.decode(errors="replace").strip().splitlines()[-1:]
        return False, f"bubblewrap does not work here ({' '.join(reason)})"
    return True, "bubblewrap: private mount, pid, network and ipc namespaces; own uid; rlimits"


def kill_user(uid: int) -> int:
    """SIGKILL every process whose real user id is ``uid``; the number killed."""
    killed = 0
    for pid in user_processes(uid):
        try:
            os.kill(pid, signal.SIGKILL)
            killed += 1
        except OSError:
            pass
    return killed


def user_processes(uid: int | range) -> list[int]:
    """Pids of the processes whose real user id is ``uid`` (or in the range ``uid``)."""
    uids = uid if isinstance(uid, range) else range(uid, uid + 1)
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                status = (entry / "status").read_text()
            except OSError:
                continue
            uid_line = next((ln for ln in status.splitlines() if ln.startswith("Uid:")), "")
            if uid_line and int(uid_line.split()[1]) in uids:
                pids.append(int(entry.name))
    return pids
