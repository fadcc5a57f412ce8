"""Isolation for graded notebooks: bubblewrap, an unprivileged user and resource limits.

One submission runs as (see :func:`sandbox_command`)::

    sh (joins a memory and pids cgroup for the whole sandbox, where available: root only)
      python -m attnlab.course.rlimits (memory, CPU, processes, file size, open files)
        bwrap (new mount, pid, network, ipc, uts namespaces; dies with the grader)
          setpriv (rootful: a user id of its own, no groups, no capabilities, no new privileges)
            python -m attnlab.course.runner

The grader runs in one of three *modes* (:func:`sandbox_mode`): ``rootful`` (as root: each
submission gets its own user id), ``rootless`` (as any user, where unprivileged user
namespaces are allowed: bubblewrap adds a user namespace; every submission runs under the
grader's own user id, mapped, with no capabilities), or ``unsandboxed`` (only with
``--allow-unsandboxed``). The resource limits are the same in all three and never exceed the
hard limits the grader itself inherited (:func:`effective_limits`).

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
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from pathlib import Path

try:
    import resource
except ImportError:  # pragma: no cover - Windows: no rlimits, and no sandbox either
    resource = None  # type: ignore[assignment]

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


#: ``Limits`` field -> the ``resource`` rlimit it sets.
RLIMITS = {
    "memory": "RLIMIT_DATA", "address_space": "RLIMIT_AS", "cpu_seconds": "RLIMIT_CPU",
    "processes": "RLIMIT_NPROC", "file_size": "RLIMIT_FSIZE", "open_files": "RLIMIT_NOFILE",
}


def effective_limits(limits: Limits) -> tuple[Limits, list[str]]:
    """``limits`` lowered to the hard limits this process inherited, and what was lowered.

    An unprivileged process cannot raise a hard limit (``ulimit -v`` on a shared server sets
    one for ``RLIMIT_AS``), so asking for more would make every sandbox fail to start.

    Examples
    --------
    >>> effective_limits(Limits(cpu_seconds=10))[0].cpu_seconds <= 10
    True
    """
    if resource is None:
        return limits, []
    changes: dict[str, int] = {}
    notes = []
    for name, rlimit in RLIMITS.items():
        if not hasattr(resource, rlimit):
            continue
        hard = resource.getrlimit(getattr(resource, rlimit))[1]
        wanted = getattr(limits, name)
        if hard != resource.RLIM_INFINITY and wanted > hard:
            changes[name] = int(hard)
            notes.append(f"{rlimit} lowered to the inherited hard limit {_size(name, hard)}")
    return replace(limits, **changes), notes


def _size(name: str, value: int) -> str:
    if name in ("memory", "address_space", "file_size", "tmpfs", "output", "total_memory"):
        return f"{value / 2**30:.3g} GiB" if value >= 2**30 else f"{value / 2**20:.3g} MiB"
    return f"{value} s" if name == "cpu_seconds" else str(value)


def describe_limits(limits: Limits) -> str:
    """The limits in one line, for the grader's report."""
    return ", ".join(f"{f.name} {_size(f.name, getattr(limits, f.name))}" for f in fields(limits))


def _rlimits(limits: Limits, processes: bool = True) -> list[str]:
    """The launcher that sets the rlimits (soft = hard) and then execs the rest.

    It is :mod:`attnlab.course.rlimits`'s code, run with ``python -I -c`` so that it
    needs no import path (the sandbox's command line starts with a bare environment).
    ``processes=False`` leaves ``RLIMIT_NPROC`` alone: outside a user namespace it counts
    every process of the user on the machine, so a rootless sandbox sets it inside.
    """
    from attnlab.course import rlimits

    values = [str(getattr(limits, name)) for name in RLIMITS]
    if not processes:
        values[list(RLIMITS).index("processes")] = "-1"
    return [python_executable(), "-I", "-c", rlimits.INLINE, *values, "--"]


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
    argv: list[str], *, submitted: Path, uid: int, limits: Limits,
    inputs: Path | None = None, rootless: bool | None = None,
) -> list[str]:
    """The full command line that runs ``argv`` in a fresh bubblewrap sandbox.

    ``rootless`` (default: whether this process is not root) adds a user namespace and
    drops every capability instead of switching to the user id ``uid``. ``inputs``, if
    given, is bound read-only at ``INPUTS``.
    """
    if rootless is None:
        rootless = os.geteuid() != 0
    cmd = [*_rlimits(limits, processes=not rootless), "bwrap", "--unshare-pid",
           "--unshare-net", "--unshare-ipc"]
    if rootless:
        cmd += ["--unshare-user", "--disable-userns", "--cap-drop", "ALL"]
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
    cmd += ["--ro-bind", str(submitted), SUBMITTED]
    if inputs is not None:
        cmd += ["--ro-bind", str(inputs), INPUTS]
    cmd += ["--chdir", "/home/student", "--clearenv"]
    for key, value in sandbox_env().items():
        cmd += ["--setenv", key, value]
    if rootless:  # bwrap itself sets no_new_privs; the user namespace holds no capability
        # RLIMIT_NPROC inside the user namespace counts only the sandbox's own processes.
        return [*cmd, "--", *_rlimits(limits), *argv]
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


#: Where the kernel's settings for unprivileged user namespaces live.
PROC_SYS = Path("/proc/sys")
_USERNS_SETTINGS = (  # (file under /proc/sys, sysctl name, value that forbids, what to set)
    ("kernel/unprivileged_userns_clone", "kernel.unprivileged_userns_clone", "0", "1"),
    ("user/max_user_namespaces", "user.max_user_namespaces", "0", "15000"),
    ("kernel/apparmor_restrict_unprivileged_userns",
     "kernel.apparmor_restrict_unprivileged_userns", "1", "0"),
)


def userns_refusal() -> str | None:
    """The sysctl that forbids unprivileged user namespaces here, as advice; else ``None``.

    Examples
    --------
    >>> userns_refusal() is None or "sysctl" in userns_refusal()
    True
    """
    for relative, name, forbids, allows in _USERNS_SETTINGS:
        try:
            value = (PROC_SYS / relative).read_text().strip()
        except OSError:
            continue
        if value == forbids:
            return (f"unprivileged user namespaces are disabled ({name} = {value}): run "
                    f"`sudo sysctl -w {name}={allows}` (or grade as root)")
    return None


def _trial(rootless: bool) -> tuple[bool, str]:
    empty = Path("/tmp")
    argv = [python_executable(), "-c", "import attnlab"]
    limits, _ = effective_limits(Limits())
    cmd = sandbox_command(argv, submitted=empty, uid=UID_BASE, limits=limits,
                          rootless=rootless)
    try:
        done = subprocess.run(cmd, capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as error:
        return False, f"bubblewrap could not start: {error}"
    if done.returncode != 0:
        reason = " ".join(done.stderr.decode(errors="replace").strip().splitlines()[-1:])
        return False, reason
    return True, ""


@lru_cache(maxsize=1)
def _probe() -> tuple[str, str]:
    """``(mode, how)`` with mode ``rootful`` or ``rootless``, or ``("", why not)``."""
    if sys.platform != "linux":
        return "", (f"the sandbox needs Linux (this is {sys.platform}): grade in the container "
                    "of docker/grader.Dockerfile or a Linux VM (see the guide)")
    if shutil.which("bwrap") is None:
        return "", "bubblewrap (bwrap) is not installed: run scripts/ensure_sandbox.sh"
    rootful = os.geteuid() == 0
    if rootful and shutil.which("setpriv") is None:
        return "", "setpriv (util-linux) is missing"
    ok, reason = _trial(rootless=not rootful)
    if ok:
        if rootful:
            return "rootful", ("rootful: bubblewrap namespaces (mount, pid, network, ipc), "
                               "a user id per submission, rlimits, cgroups where writable")
        return "rootless", ("rootless: bubblewrap in a user namespace (mount, pid, network, "
                            "ipc), the grader's own user id without capabilities, rlimits")
    if not rootful:
        refusal = userns_refusal()
        if refusal is not None:
            return "", refusal
        return "", (f"rootless bubblewrap does not work here ({reason}); unprivileged user "
                    "namespaces may be disabled (sysctl kernel.unprivileged_userns_clone or "
                    "user.max_user_namespaces), or grade as root")
    return "", f"bubblewrap does not work here ({reason})"


def availability() -> tuple[bool, str]:
    """``(True, how)`` when sandboxed runs work here, else ``(False, why not)``."""
    mode, how = _probe()
    return bool(mode), how


def unsandboxed_mode() -> str:
    """The mode of ``--allow-unsandboxed``: ``uid-only`` as root on Linux (each notebook
    under a user id of its own, without namespaces), else ``unsandboxed``."""
    if sys.platform == "linux" and os.geteuid() == 0 and shutil.which("setpriv"):
        return "uid-only"
    return "unsandboxed"


def _unsearchable(path: Path) -> Path | None:
    """The first folder on the way to ``path`` (or its link target) that other users cannot
    enter (no ``x`` bit for "others"), else ``None``."""
    for target in (path, path.resolve()):
        for folder in _ancestors(target):
            try:
                if not os.stat(folder).st_mode & 0o001:
                    return folder
            except OSError:
                return folder
    return None


def uid_only_refusal(python: str | None = None) -> str | None:
    """Why ``uid-only`` grading cannot run here, or ``None`` when it can.

    In that mode each notebook runs under a user id of its own, which must be able to start
    this environment's interpreter ``python`` (default :func:`python_executable`); a venv
    made from a Python under root's home (mode 0700, as pyenv installs it) cannot be, and
    every answer would fail with "Permission denied". Tried once as ``UID_BASE``.
    """
    python = python or python_executable()
    # setpriv's own exec of the interpreter succeeds even then; the runner's start of the
    # kernel, an exec by that user, does not: so the trial lets /bin/sh, as the user, exec it
    cmd = ["setpriv", f"--reuid={UID_BASE}", f"--regid={UID_BASE}", "--clear-groups",
           "/bin/sh", "-c", 'exec "$0" -c pass', python]
    try:
        done = subprocess.run(cmd, capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"uid-only grading could not start a trial as user id {UID_BASE}: {error}"
    if done.returncode == 0:
        return None
    blocked = _unsearchable(Path(python))
    why = (f"other users cannot enter {blocked}" if blocked is not None else
           " ".join(done.stderr.decode(errors="replace").strip().splitlines()[-1:]))
    return (f"uid-only grading: user id {UID_BASE} cannot run {python} ({why}); install "
            "bubblewrap (scripts/ensure_sandbox.sh), or grade from a venv whose Python other "
            "users can run (for example one made under /opt)")


def sandbox_mode() -> str:
    """``"rootful"``, ``"rootless"``, or ``""`` when no sandbox works here."""
    return _probe()[0]


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
