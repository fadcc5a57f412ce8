"""Command line of chapter 10's study: ``python -m attnlab.study --grid full --out DIR``.

Runs a named grid (resuming from ``DIR/results.csv``), then writes ``summary.md``, the
figures and ``timing.md`` into ``DIR``. Bad arguments, a ``results.csv`` that this study did
not write and ``--report-only`` without a ``results.csv`` end in one line on standard error
(exit status 2), never a traceback, and such a file is left untouched.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from attnlab._cli import OneLineParser, fail, file_in_the_way, usable_cores
from attnlab.study.grids import GRIDS, grid
from attnlab.study.report import summary_markdown, timing_markdown, write_report
from attnlab.study.runner import read_results, resolve_device, run_grid, run_one

PROG = "python -m attnlab.study"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse and check the arguments; every problem ends in ``_fail``."""
    parser = OneLineParser(
        prog=PROG, description="GAM against standard attention on synthetic tasks (chapter 10)."
    )
    parser.add_argument("--grid", choices=GRIDS, default="full")
    parser.add_argument("--out", required=True, help="folder for results.csv and the report")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
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
    if not args.out.strip():
        fail(PROG, "--out must name a folder, got an empty string")
    if args.timing_rounds < 0:
        fail(PROG, f"--timing-rounds must be >= 0, got {args.timing_rounds}")
    if args.max_minutes is not None and not args.max_minutes > 0:
        fail(PROG, f"--max-minutes must be positive, got {args.max_minutes}")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        fail(PROG, f"--out must name a folder, but {out} is a file")
    blocker = file_in_the_way(out)
    if blocker is not None:
        fail(PROG, f"--out cannot be created: {blocker} is a file")
    try:
        args.device = resolve_device(args.device)
        # Refuses a foreign CSV before anything runs; a report needs a CSV to report on.
        read_results(out / "results.csv", missing_ok=not args.report_only)
    except FileNotFoundError:
        fail(PROG, f"--report-only needs {out / 'results.csv'}, which does not exist "
                   "(run the grid first, without --report-only)")  # fmt: skip
    except ValueError as error:
        fail(PROG, str(error))
    return args


def main(argv: Sequence[str] | None = None) -> None:
    """Command line: run a grid (resuming from ``OUT/results.csv``) and write the report."""
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    print(f"start {time.strftime('%Y-%m-%d %H:%M:%S')}, load average {load[0]:.1f}")
    configs = grid(args.grid)
    if args.report_only:
        rows = read_results(out / "results.csv")  # parse_args checked that it exists
    else:
        deadline = None if args.max_minutes is None else time.monotonic() + 60 * args.max_minutes
        rows = run_grid(
            configs, out / "results.csv", deadline=deadline,
            runner=lambda config: run_one(config, device=str(args.device)),
        )  # fmt: skip
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


if __name__ == "__main__":  # pragma: no cover
    main()
