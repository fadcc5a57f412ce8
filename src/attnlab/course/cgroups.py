"""A memory and process cgroup per sandbox, where the machine offers one (v1 or v2).

Resource limits (``setrlimit``) bound each process; a cgroup bounds the whole sandbox: all
its processes together may use at most ``memory`` bytes (the kernel's OOM killer stops the
largest one past that) and ``pids`` tasks. Used when running as root on Linux with the
``memory`` and ``pids`` controllers mounted writable; elsewhere :class:`Cgroup` does nothing
and says so (:attr:`Cgroup.active` is false).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path


def _mounts() -> list[tuple[str, str, set[str]]]:
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        parts = line.split()
        if len(parts) >= 4 and parts[2] in ("cgroup", "cgroup2"):
            found.append((parts[1], parts[2], set(parts[3].split(","))))
    return found


def _roots() -> dict[str, Path]:
    """Controller → folder under which a new cgroup can be made ({} if none is usable)."""
    roots: dict[str, Path] = {}
    for path, kind, options in _mounts():
        if kind == "cgroup":
            for controller in ("memory", "pids"):
                if controller in options:
                    roots[controller] = Path(path)
    if len(roots) == 2:
        return roots
    for path, kind, _ in _mounts():
        if kind == "cgroup2":
            controllers = (Path(path) / "cgroup.controllers").read_text().split()
            if {"memory", "pids"} <= set(controllers):
                try:  # let children of the root use both controllers
                    (Path(path) / "cgroup.subtree_control").write_text("+memory +pids")
                except OSError:
                    continue
                return {"memory": Path(path), "pids": Path(path), "v2": Path(path)}
    return {}


class Cgroup:
    """The cgroup(s) of one sandbox: make with :meth:`create`, end with :meth:`destroy`."""

    def __init__(self, name: str, memory: int, pids: int) -> None:
        self.name, self.memory, self.pids = name, memory, pids
        self.folders: list[Path] = []

    @property
    def active(self) -> bool:
        """Whether the limits are in force."""
        return bool(self.folders)

    def procs_files(self) -> list[str]:
        """The ``cgroup.procs`` files a process writes its pid to, to join."""
        return [str(folder / "cgroup.procs") for folder in self.folders]

    def create(self) -> bool:
        """Make the cgroup(s) and set the limits; ``False`` (and nothing made) if impossible."""
        if os.geteuid() != 0:
            return False
        roots = _roots()
        if not roots:
            return False
        try:
            if "v2" in roots:
                folder = roots["v2"] / self.name
                folder.mkdir()
                self.folders = [folder]
                (folder / "memory.max").write_text(str(self.memory))
                (folder / "memory.swap.max").write_text("0") if (
                    folder / "memory.swap.max").exists() else None
                (folder / "pids.max").write_text(str(self.pids))
            else:
                memory, pids = roots["memory"] / self.name, roots["pids"] / self.name
                memory.mkdir()
                self.folders.append(memory)
                pids.mkdir()
                self.folders.append(pids)
                (memory / "memory.limit_in_bytes").write_text(str(self.memory))
                (pids / "pids.max").write_text(str(self.pids))
        except OSError:
            self.destroy()
            return False
        return True

    def destroy(self) -> None:
        """Kill every process left in the cgroup(s), then remove them."""
        for _ in range(50):
            alive = False
            for folder in self.folders:
                try:
                    pids = (folder / "cgroup.procs").read_text().split()
                except OSError:
                    continue
                for pid in pids:
                    alive = True
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except OSError:
                        pass
            if not alive:
                break
            time.sleep(0.1)
        for folder in self.folders:
            try:
                folder.rmdir()
            except OSError:
                pass
        self.folders = []


def joining(cgroup: Cgroup, cmd: list[str]) -> list[str]:
    """``cmd`` prefixed so that it runs inside ``cgroup`` (unchanged if it is not active)."""
    files = cgroup.procs_files()
    if not files:
        return cmd
    script = " && ".join(f'echo $$ > "${i + 1}"' for i in range(len(files)))
    script += f' && shift {len(files)} && exec "$@"'
    return ["sh", "-c", script, "sh", *files, *cmd]
