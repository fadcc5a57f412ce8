"""Command line of the study: ``python -m attnlab.study --grid full|language --out DIR``.

``--grid full`` (and ``reduced``) is chapter 10's study; ``--grid language`` is issue 27's
language grid (:mod:`attnlab.study.language_grid`: the rate pilot into ``DIR/pilot/``, then
the main grid into ``DIR/results.csv``), through the same runner; ``language-tiny`` is the
same at toy sizes (seconds), for tests.

Runs a named grid (resuming from ``DIR/results.csv``) on a local Dask cluster of ``--workers``
processes (one thread each; ``--workers 0`` runs it in this process) or on a running Dask
scheduler (``--scheduler tcp://host:8786``), then writes ``summary.md``, the figures and
``timing.md`` into ``DIR``. Bad arguments, a ``results.csv`` that this study did not write and
``--report-only`` without a ``results.csv`` end in one line on standard error (exit status 2),
never a traceback, and such a file is left untouched.
"""

from __future__ import annotations

import argparse
import csv
import functools
import os
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from attnlab._cli import OneLineParser, fail, out_folder, usable_cores
from attnlab.study.engine import FAILURES_NAME, GridLocked, dask_executor, run_grid
from attnlab.study.grids import GRIDS, grid
from attnlab.study.language import LANGUAGE_LAYOUT
from attnlab.study.report import summary_markdown, timing_markdown, write_report
from attnlab.study.runner import read_results, resolve_device, run_one

PROG = "python -m attnlab.study"
#: The grids of issue 27 (:mod:`attnlab.study.language_grid`).
LANGUAGE_GRIDS = ("language", "language-tiny")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse and check the arguments; every problem ends in ``_fail``."""
    parser = OneLineParser(
        prog=PROG, description="GAM against standard attention on synthetic tasks (chapter 10)."
    )
    parser.add_argument("--grid", choices=GRIDS + LANGUAGE_GRIDS, default="full")
    parser.add_argument("--out", required=True, help="folder for results.csv and the report")
    parser.add_argument(
        "--threads", type=int, default=1,
        help="torch threads of this process (default 1; each worker uses one)",
    )  # fmt: skip
    parser.add_argument(
        "--workers", type=int, default=1,
        help="worker processes of a local Dask cluster, one thread each (default 1; 0: run "
        "in this process, without Dask)",
    )  # fmt: skip
    parser.add_argument(
        "--scheduler", default=None,
        help="address of a running Dask scheduler (tcp://host:8786) to run the grid on; "
        "--workers then says how many of its workers to keep busy",
    )  # fmt: skip
    parser.add_argument(
        "--device", choices=("cpu", "cuda", "auto"), default="cpu",
        help="where to train (default cpu, the reference; auto: cuda when available)",
    )  # fmt: skip
    parser.add_argument(
        "--max-minutes", type=float, default=None,
        help="start no new run after this many minutes (the grid resumes on the next call)",
    )  # fmt: skip
    parser.add_argument(
        "--report-only", action="store_true", help="only rewrite the report from results.csv"
    )
    parser.add_argument(
        "--timing-rounds", type=int, default=30,
        help="rounds of the side-by-side timing (0: skip it)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    cores = usable_cores()
    if args.threads < 1:
        fail(PROG, f"--threads must be a positive integer, got {args.threads}")
    if args.threads > cores:
        fail(PROG, f"--threads must be at most {cores} (this machine's cores), got {args.threads}")
    if args.workers < 0:
        fail(PROG, f"--workers must be a non-negative integer, got {args.workers}")
    if args.scheduler is None and args.workers > cores:
        fail(PROG, f"--workers must be at most {cores} (this machine's cores), got {args.workers}")
    if args.scheduler is not None and not args.scheduler.strip():
        fail(PROG, "--scheduler must be an address such as tcp://127.0.0.1:8786, got ''")
    if args.timing_rounds < 0:
        fail(PROG, f"--timing-rounds must be >= 0, got {args.timing_rounds}")
    if args.max_minutes is not None and not args.max_minutes > 0:
        fail(PROG, f"--max-minutes must be positive, got {args.max_minutes}")
    out = out_folder(PROG, args.out)
    try:
        args.device = resolve_device(args.device)
        # Refuses a foreign CSV before anything runs; a report needs a CSV to report on.
        if args.grid in LANGUAGE_GRIDS:
            # the pilot comes first: a report needs the pilot's CSV at least
            LANGUAGE_LAYOUT.read(out / "pilot" / "results.csv", missing_ok=not args.report_only)
            LANGUAGE_LAYOUT.read(out / "results.csv", missing_ok=True)
        else:
            read_results(out / "results.csv", missing_ok=not args.report_only)
    except FileNotFoundError as error:
        needed = str(error).split(" does not exist")[0]
        fail(PROG, f"--report-only needs {needed}, which does not exist "
                   "(run the grid first, without --report-only)")  # fmt: skip
    except ValueError as error:
        fail(PROG, str(error))
    return args


def _failure_count(out: Path) -> int:
    """Rows in ``OUT/failures.csv`` (0 when there is none)."""
    path = out / FAILURES_NAME
    if not path.exists():
        return 0
    with path.open(newline="", encoding="utf-8") as handle:
        return sum(1 for _ in csv.DictReader(handle))


def _run(args: argparse.Namespace, configs: list, out: Path) -> list[dict[str, str]]:
    """Run the grid where the arguments say: here, on a local cluster, or on a scheduler."""
    deadline = None if args.max_minutes is None else time.monotonic() + 60 * args.max_minutes
    runner = functools.partial(run_one, device=str(args.device))
    try:
        if args.scheduler is None and args.workers == 0:
            return run_grid(configs, out / "results.csv", deadline=deadline, runner=runner)
        with dask_executor(args.workers, args.scheduler) as executor:
            where = args.scheduler or f"a local Dask cluster of {args.workers} worker(s)"
            print(f"running on {where}")
            return run_grid(
                configs, out / "results.csv", deadline=deadline, runner=runner,
                executor=executor, in_flight=2 * max(1, args.workers),
            )  # fmt: skip
    except (GridLocked, ValueError) as error:
        fail(PROG, str(error))


def main(argv: Sequence[str] | None = None) -> None:
    """Command line: run a grid (resuming from ``OUT/results.csv``) and write the report."""
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    failures_before = _failure_count(out)
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    print(f"start {time.strftime('%Y-%m-%d %H:%M:%S')}, load average {load[0]:.1f}")
    if args.grid in LANGUAGE_GRIDS:
        from attnlab.study.language_cli import main_language

        main_language(args, out)
        return
    configs = grid(args.grid)
    if args.report_only:
        rows = read_results(out / "results.csv")  # parse_args checked that it exists
    else:
        rows = _run(args, configs, out)
    minutes = (time.perf_counter() - start) / 60
    end_load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    for path in write_report(rows, out):
        print(f"wrote {path}")
    total = sum(float(r["seconds"]) for r in rows) / 60
    report = (
        f"{len(rows)} of {len(configs)} runs of grid {args.grid!r} in {out / 'results.csv'}; "
        f"this call took {minutes:.1f} min of wall time on {args.device.type} with "
        f"{args.threads} torch thread(s) (load average {load[0]:.1f} at the start, "
        f"{end_load[0]:.1f} at the end, on {os.cpu_count()} cores); the training of all rows "
        f"took {total:.1f} min"
    )
    if not args.report_only:
        text = f"# Timing of the study\n\n{report}.\n"
        if args.timing_rounds:
            text += "\nStep times side by side (ms, median):\n\n"
            text += timing_markdown(rounds=args.timing_rounds)
        (out / "timing.md").write_text(text, encoding="utf-8")
        print(f"wrote {out / 'timing.md'}")
    print(report)
    print(summary_markdown(rows))
    failed = _failure_count(out) - failures_before
    if failed:
        print(f"{PROG}: {failed} run(s) failed in this call; see {out / FAILURES_NAME}")
        raise SystemExit(1)


if __name__ == "__main__":  # pragma: no cover
    main()
