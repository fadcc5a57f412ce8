"""Where a grid's runs execute: in this process, on a local Dask cluster, or on a given one.

A grid is a list of independent runs, so any ``concurrent.futures.Executor`` can run
it: :func:`attnlab.study.run_grid` submits one run per configuration and, as each finishes,
appends its row to ``results.csv`` itself. The driver (the process that calls ``run_grid``)
is the only writer of that file, whatever executes the runs, and it holds
:class:`DriverLock` on the folder while it runs, so a second driver on the same folder is
refused instead of interleaving rows.

The engine is Dask distributed (Rocklin 2015): :func:`dask_executor` starts a
``LocalCluster`` of single-threaded worker processes on the loopback interface, or connects
to a running scheduler (``tcp://host:8786``) when given its address; on a SLURM or PBS
cluster, ``dask-jobqueue`` starts such a scheduler and its workers as batch jobs. Dask
restarts a worker process that dies and runs its task again elsewhere; a task that has been
on a dying worker three times raises ``KilledWorker``, which the driver records as a failure
row in ``failures.csv`` and moves on (it is retried on the next call).

``dask`` is imported only when an executor is made: ``import attnlab.study`` does not need it.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from attnlab._validate import check_int
from attnlab.study.runner import COLUMNS, CONFIG_COLUMNS, RunConfig, read_results, run_one

__all__ = [
    "FAILURES_NAME", "FAILURE_COLUMNS", "LOCK_NAME", "STUDY_LAYOUT", "DriverLock", "GridLocked",
    "Layout", "dask_executor", "in_worker", "run_grid",
]  # fmt: skip

#: The lock file a driver holds in its output folder while it runs.
LOCK_NAME = ".results.lock"
#: The file beside ``results.csv`` that records runs that failed, and its columns: the
#: configuration, the exception's type and message, and when.
FAILURES_NAME = "failures.csv"
FAILURE_COLUMNS = CONFIG_COLUMNS + ("error", "message", "when")
#: Worker deaths a task may see before Dask gives up on it (``KilledWorker`` on the third).
ALLOWED_FAILURES = 2
#: The environment a local cluster's nanny gives each worker process before it starts: one
#: thread for OpenMP, MKL and OpenBLAS, as Dask's default, but *without* Dask's default
#: ``MALLOC_TRIM_THRESHOLD_=65536``, which makes glibc hand freed memory back to the system at
#: once; a training step then page-faults its buffers in again every time, and one step of the
#: language grid took about 165 ms of CPU instead of 95 (measured in one process with and
#: without the variable, one thread).
WORKER_ENVIRON = {"OMP_NUM_THREADS": 1, "MKL_NUM_THREADS": 1, "OPENBLAS_NUM_THREADS": 1}


@dataclass(frozen=True)
class Layout:
    """The columns of a grid's CSV: what :func:`run_grid` writes and how it reads it back.

    Attributes
    ----------
    columns : tuple of str
        The header of ``results.csv``.
    config_columns : tuple of str
        The columns that identify a run (``config.key()`` gives them, as text, in this order).
    """

    columns: tuple[str, ...]
    config_columns: tuple[str, ...]

    @property
    def failure_columns(self) -> tuple[str, ...]:
        """The header of ``failures.csv``: the configuration, the error, when."""
        return self.config_columns + ("error", "message", "when")

    def read(self, path: str | os.PathLike, missing_ok: bool = False) -> list[dict[str, str]]:
        """The finished rows of a CSV of this layout (:func:`~attnlab.study.read_results`)."""
        return read_results(path, missing_ok=missing_ok, columns=self.columns)


#: Chapter 10's layout (:class:`~attnlab.study.RunConfig` rows).
STUDY_LAYOUT = Layout(COLUMNS, CONFIG_COLUMNS)


class GridLocked(RuntimeError):
    """Another driver is running a grid in the same folder."""


class DriverLock:
    """An exclusive lock on a grid's folder, held while a driver runs (``with DriverLock(d):``).

    It is an ``flock`` on ``folder/.results.lock``: the operating system releases it when the
    holder exits, however it exits, so a killed driver never leaves a stale lock. Where
    ``fcntl`` does not exist (Windows) no lock is taken.

    Raises
    ------
    GridLocked
        On entering, if another process holds the lock; the message names its pid.
    """

    def __init__(self, folder: str | os.PathLike) -> None:
        self.path = Path(folder) / LOCK_NAME
        self._handle: Any = None

    def __enter__(self) -> DriverLock:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = self.path.open("a+", encoding="utf-8")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise GridLocked(
                f"another driver is running a grid in {self.path.parent} (pid {holder} holds "
                f"{self.path.name}); wait for it to finish or stop it"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._handle = handle
        return self

    def __exit__(self, *exc: object) -> None:
        if self._handle is not None:
            self._handle.close()  # closing the file releases the flock
            self._handle = None


def in_worker(runner: Callable[[Any], dict[str, str]], config: Any) -> dict[str, str]:
    """Run ``runner(config)`` in a worker process with one torch thread (what workers run)."""
    import torch

    torch.set_num_threads(1)
    return runner(config)


@contextlib.contextmanager
def dask_executor(
    workers: int = 1, scheduler: str | None = None, timeout: float = 60.0
) -> Iterator[Executor]:
    """A ``concurrent.futures.Executor`` backed by Dask distributed; closed on leaving.

    Parameters
    ----------
    workers : int
        Worker processes of the local cluster (one thread each); ignored with ``scheduler``.
    scheduler : str, optional
        Address of a running Dask scheduler (``tcp://host:8786``); without it a
        ``LocalCluster`` is started on ``127.0.0.1`` (no dashboard) and stopped afterwards.
    timeout : float
        Seconds to wait for the cluster to start, connect or close.

    Raises
    ------
    ValueError
        If ``workers`` is not a positive integer, or ``scheduler`` cannot be reached.

    Notes
    -----
    A local cluster's workers get ``WORKER_ENVIRON`` (no ``MALLOC_TRIM_THRESHOLD_``); the
    workers of a given scheduler get whatever environment their own start gave them.
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    import dask
    from distributed import Client, LocalCluster

    settings = {
        "distributed.scheduler.allowed-failures": ALLOWED_FAILURES,
        "distributed.nanny.pre-spawn-environ": WORKER_ENVIRON,
        # Dask's sampling profiler (every 10 ms) and GIL monitor (every 1 ms) cost a worker
        # 0.57 s of CPU beside 3.1 s of work in 20 s at load 16, 0.38 s without them.
        "distributed.worker.profile.enabled": False,
        "distributed.admin.system-monitor.gil.enabled": False,
    }
    with dask.config.set(settings), contextlib.ExitStack() as stack:
        if scheduler is None:
            # A nanny spawns workers with this process's environment, into which any earlier
            # cluster of default settings wrote MALLOC_TRIM_THRESHOLD_ for good: unset it while
            # this cluster lives (its workers may be restarted at any time), then restore it.
            trim = os.environ.pop("MALLOC_TRIM_THRESHOLD_", None)
            stack.callback(_restore_trim, trim)
            cluster = LocalCluster(
                n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                dashboard_address=None, silence_logs=50,
            )  # fmt: skip
            client = Client(cluster, timeout=timeout)
        else:
            cluster = None
            try:
                client = Client(scheduler, timeout=timeout)
            except (OSError, TimeoutError) as error:
                message = f"cannot reach the Dask scheduler at {scheduler}: {error}"
                raise ValueError(message) from None
        try:
            yield client.get_executor(pure=False)
        finally:
            client.close(timeout=timeout)
            if cluster is not None:
                cluster.close(timeout=timeout)


def _restore_trim(value: str | None) -> None:
    """Put back the ``MALLOC_TRIM_THRESHOLD_`` that :func:`dask_executor` unset (if any)."""
    if value is not None:
        os.environ["MALLOC_TRIM_THRESHOLD_"] = value


# ---- the grid ------------------------------------------------------------------------------
def _append(path: Path, columns: Sequence[str], row: dict[str, str]) -> None:
    """Append one CSV row in a single write, flushed to disk (a kill leaves whole rows)."""
    line = io.StringIO()
    csv.DictWriter(line, columns, lineterminator="\n").writerow(row)
    with path.open("a", newline="", encoding="utf-8") as handle:
        handle.write(line.getvalue())
        handle.flush()
        os.fsync(handle.fileno())


def _new_csv(path: Path, columns: Sequence[str]) -> None:
    """Write the header of an empty or missing CSV."""
    if not path.exists() or path.stat().st_size == 0:
        path.write_text(",".join(columns) + "\n", encoding="utf-8")


def _failure(
    config: RunConfig, error: BaseException, config_columns: Sequence[str] = CONFIG_COLUMNS
) -> dict[str, str]:
    """The row of ``failures.csv`` for a run that raised (or whose worker died)."""
    row = {c: str(getattr(config, c)) for c in config_columns}
    message = " ".join(str(error).split())[:300]
    row.update(error=type(error).__name__, message=message, when=time.strftime("%Y-%m-%d %H:%M:%S"))
    return row


def run_grid(
    configs: Iterable[RunConfig],
    out_csv: str | os.PathLike,
    *,
    progress: bool = True,
    runner: Callable[[RunConfig], dict[str, str]] = run_one,
    deadline: float | None = None,
    executor: Executor | None = None,
    in_flight: int = 2,
    layout: Layout = STUDY_LAYOUT,
) -> list[dict[str, str]]:
    """Run every configuration that ``out_csv`` does not hold yet; append one row per run.

    Without ``executor`` the runs execute one after another in this process, and an
    exception in a run propagates. With one (any ``concurrent.futures.Executor``;
    :func:`dask_executor` gives a Dask cluster's) up to ``in_flight`` runs are submitted at a
    time, each through :func:`~attnlab.study.engine.in_worker`, so ``runner`` must be
    picklable (a module-level function or a ``functools.partial`` of one); a run that
    raises, or whose worker died
    three times, is appended to ``failures.csv`` beside ``out_csv`` and tried again on the
    next call. Either way this process alone writes ``out_csv``, one complete row per
    finished run, flushed to disk at once, so an interrupted grid loses at most the runs in
    progress and calling again with the same configurations skips the finished ones; it
    holds :class:`DriverLock` on the folder meanwhile. With ``deadline`` (a
    ``time.monotonic()`` value) no run starts after it. ``layout`` names the CSV's columns
    (default chapter 10's; the language grid passes its own, with its configurations'
    ``key()`` in the order of ``layout.config_columns``). Returns the finished rows of
    ``configs`` in their order.

    Raises
    ------
    GridLocked
        If another driver is running a grid in the same folder.
    """
    configs = list(configs)
    check_int(in_flight, "in_flight", minimum=1)
    out_csv = Path(out_csv)
    with DriverLock(out_csv.parent):  # before reading: reading may repair the last line
        previous = layout.read(out_csv, missing_ok=True)  # a new grid starts from nothing
        done = {tuple(row[c] for c in layout.config_columns): row for row in previous}
        _new_csv(out_csv, layout.columns)
        todo = [c for c in configs if c.key() not in done]
        bar = tqdm(total=len(todo), desc="study", unit="run", disable=not progress)

        def finished(config: RunConfig, row: dict[str, str] | None, error: BaseException | None):
            bar.update(1)
            if error is not None:
                failures = out_csv.with_name(FAILURES_NAME)
                _new_csv(failures, layout.failure_columns)
                _append(
                    failures, layout.failure_columns, _failure(config, error, layout.config_columns)
                )
                return
            _append(out_csv, layout.columns, row)
            done[config.key()] = row

        try:
            if executor is None:
                _run_here(todo, runner, deadline, bar, finished)
            else:
                _run_on(executor, todo, runner, deadline, in_flight, finished)
        finally:
            bar.close()
    return [done[c.key()] for c in configs if c.key() in done]


Finished = Callable[[RunConfig, "dict[str, str] | None", "BaseException | None"], None]


def _run_here(
    todo: list[RunConfig],
    runner: Callable[[RunConfig], dict[str, str]],
    deadline: float | None,
    bar: tqdm,
    finished: Finished,
) -> None:
    """Run one configuration after another in this process (exceptions propagate)."""
    for config in todo:
        if deadline is not None and time.monotonic() > deadline:
            break
        bar.set_postfix_str("/".join(config.key()[:4]))
        finished(config, runner(config), None)


def _run_on(
    executor: Executor,
    todo: list[RunConfig],
    runner: Callable[[RunConfig], dict[str, str]],
    deadline: float | None,
    in_flight: int,
    finished: Finished,
) -> None:
    """Keep up to ``in_flight`` runs submitted to ``executor``; record each as it finishes."""
    pending = list(reversed(todo))
    running: dict[Future, RunConfig] = {}
    try:
        while pending or running:
            while pending and len(running) < in_flight:
                if deadline is not None and time.monotonic() > deadline:
                    pending.clear()
                    break
                config = pending.pop()
                running[executor.submit(in_worker, runner, config)] = config
            if not running:
                break
            ready, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in ready:
                config = running.pop(future)
                error = future.exception()
                finished(config, None if error else future.result(), error)
    finally:
        for future in running:
            future.cancel()
