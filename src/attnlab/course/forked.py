"""Run a function in a forked child process, with a hard time limit (used while grading).

While the grader runs a notebook, every evaluation of an answer happens in a child forked
from the kernel: a fresh process whose crash, endless loop in C code or damage to the
interpreter's state costs only that exercise. The child sends back one JSON value through
a pipe; the parent kills it (``SIGKILL``) when the time is up.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

#: Largest reply a child may send (bytes).
MAX_REPLY = 1 << 20


def can_fork() -> bool:
    """Whether this platform can fork (POSIX)."""
    return hasattr(os, "fork")


def _child(fn: Callable[[], Any], write_end: int) -> None:
    try:
        sys.stdout = sys.stderr = open(os.devnull, "w")  # the kernel's streams need its threads
        reply = ["ok", fn()]
    except BaseException as error:  # noqa: BLE001 - reported to the parent, whatever it is
        reply = ["error", f"{type(error).__name__}: {error}"[:400]]
    try:
        data = json.dumps(reply).encode("utf-8")[:MAX_REPLY]
    except (TypeError, ValueError):
        data = b'["error", "unserialisable reply"]'
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(write_end, view):]
    finally:
        os._exit(0)


def run_forked(fn: Callable[[], Any], timeout: float) -> tuple[str, Any]:
    """``fn()`` in a forked child: ``("ok", value)``, ``("error", text)``,
    ``("timeout", None)`` or ``("crash", signal number or exit status)``.

    ``value`` must be JSON-serialisable.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        _child(fn, write_end)
    os.close(write_end)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    timed_out = False
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            ready, _, _ = select.select([read_end], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(read_end, 65536)
                if not chunk:
                    break
                if sum(map(len, chunks)) < MAX_REPLY:
                    chunks.append(chunk)
    finally:
        os.close(read_end)
        if timed_out:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        _, status = os.waitpid(pid, 0)
    if timed_out:
        return "timeout", None
    try:
        kind, value = json.loads(b"".join(chunks).decode("utf-8"))
        return str(kind), value
    except (ValueError, TypeError):
        if os.WIFSIGNALED(status):
            return "crash", os.WTERMSIG(status)
        return "crash", os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
