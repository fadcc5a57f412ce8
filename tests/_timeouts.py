"""A hang guard for tests that start processes (Dask clusters, grid runs): fail, don't hang."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def hang_guard(seconds: int) -> Iterator[None]:
    """Raise ``TimeoutError`` in the main thread if the block runs longer than ``seconds``.

    A hang, not a slow machine: ``make test`` runs two workers on two cores, and the slowest
    Dask test took 125 s that way at load 14, so the guards are minutes, not seconds.
    """

    def stop(signum, frame):
        raise TimeoutError(f"test took more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
