"""The one-line error of attnlab's commands: ``PROG: error: MESSAGE`` and status 2.

argparse prints a usage block before its error; a learner who mistyped one option needs the
one line that says what is wrong (tests in ``tests/test_cli_*.py`` hold every command to it).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import NoReturn


def fail(prog: str, message: str) -> NoReturn:
    """Print ``prog: error: message`` on standard error and exit with status 2 (as argparse)."""
    print(f"{prog}: error: {message}", file=sys.stderr)
    raise SystemExit(2)


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line, without the usage block."""

    def error(self, message: str) -> NoReturn:
        fail(self.prog, message)


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity where the OS tells it)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def is_inside(path: Path, folder: Path) -> bool:
    """Whether ``path`` is ``folder`` or lies below it (links and ``..`` resolved)."""
    path, folder = Path(path).resolve(), Path(folder).resolve()
    return path == folder or folder in path.parents


def file_in_the_way(path: Path) -> Path | None:
    """The first of ``path``'s parents that exists but is a file (so ``path`` cannot be made)."""
    return next((p for p in Path(path).parents if p.exists() and not p.is_dir()), None)


def out_folder(prog: str, text: str) -> Path:
    """``--out`` as a folder that can be made, or a one-line error (exit 2) saying why not.

    An empty string, an existing file, and a path below a file are refused.
    """
    if not text.strip():
        fail(prog, "--out must name a folder, got an empty string")
    out = Path(text)
    if out.exists() and not out.is_dir():
        fail(prog, f"--out must name a folder, but {out} is a file")
    blocker = file_in_the_way(out)
    if blocker is not None:
        fail(prog, f"--out {out} cannot be created: {blocker} is a file")
    return out
