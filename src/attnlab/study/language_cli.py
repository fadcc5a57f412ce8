"""``python -m attnlab.study --grid language``: the pilot, the edge rates, then the main grid.

Every stage goes through :func:`attnlab.study.run_grid` on the executor the arguments name
(this process with ``--workers 0``, a local Dask cluster, or ``--scheduler``): the pilot,
family by family (a representative's three rates, then its edge rate if it needs one), into
``OUT/pilot/results.csv``, the main grid at the rates
:func:`~attnlab.study.language_grid.choose_rates` picks from them into ``OUT/results.csv``.
A rerun resumes each stage; ``--max-minutes`` stops starting runs, whatever the stage.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import functools
import os
import time
from pathlib import Path

from attnlab._cli import fail
from attnlab.study.engine import FAILURES_NAME, GridLocked, dask_executor, run_grid
from attnlab.study.language import LANGUAGE_LAYOUT, run_lm
from attnlab.study.language_grid import (
    REPRESENTATIVES,
    TINY,
    choose_rates,
    edge_grid,
    main_grid,
    pilot_grid,
)
from attnlab.study.language_report import language_summary, plot_language_curves

PROG = "python -m attnlab.study"


def _failures(out: Path) -> int:
    total = 0
    for path in (out / FAILURES_NAME, out / "pilot" / FAILURES_NAME):
        if path.exists():
            with path.open(newline="", encoding="utf-8") as handle:
                total += sum(1 for _ in csv.DictReader(handle))
    return total


def stages(tiny: bool) -> dict:
    """The sizes and steps of the grid (``tiny``: the tests' toy sizes)."""
    if tiny:
        return {"sizes": TINY, "pilot_steps": 4, "main_steps": 4, "seeds": (0, 1)}
    return {"sizes": {}, "pilot_steps": None, "main_steps": None, "seeds": None}


def run_language(
    out: Path, *, tiny: bool = False, executor=None, in_flight: int = 2, deadline=None,
    device: str = "cpu", progress: bool = True,
) -> tuple[list[dict[str, str]], list[dict[str, str]], dict[str, float]]:  # fmt: skip
    """Run (or resume) the pilot, its edge rates and the main grid; ``(pilot, main, rates)``."""
    plan = stages(tiny)
    sizes = plan["sizes"]
    pilot_kw = sizes | ({"steps": plan["pilot_steps"]} if plan["pilot_steps"] else {})
    main_kw = sizes | ({"steps": plan["main_steps"]} if plan["main_steps"] else {})
    if plan["seeds"]:
        main_kw["seeds"] = plan["seeds"]
    runner = functools.partial(run_lm, device=device)
    run = functools.partial(
        run_grid, runner=runner, executor=executor, in_flight=in_flight, deadline=deadline,
        layout=LANGUAGE_LAYOUT, progress=progress,
    )  # fmt: skip
    pilot_csv = out / "pilot" / "results.csv"
    pilot_csv.parent.mkdir(parents=True, exist_ok=True)
    configs: list = []
    for slot in REPRESENTATIVES.values():  # family by family: its rates, then its edge rate
        configs += [c for c in pilot_grid(**pilot_kw) if c.slot == slot]
        rows = run(configs, pilot_csv)
        configs += [c for c in edge_grid(rows, **pilot_kw) if c.slot == slot]
        rows = run(configs, pilot_csv)
    rates = choose_rates(rows)
    main = run(main_grid(rates, **main_kw), out / "results.csv") if rates else []
    return rows, main, rates


def main_language(args: argparse.Namespace, out: Path) -> None:
    """The language grid's command line (after ``attnlab.study.__main__.parse_args``)."""
    failures_before = _failures(out)
    start = time.perf_counter()
    if args.report_only:
        pilot = LANGUAGE_LAYOUT.read(out / "pilot" / "results.csv")
        main = LANGUAGE_LAYOUT.read(out / "results.csv", missing_ok=True)
        rates = choose_rates(pilot)
    else:
        deadline = None if args.max_minutes is None else time.monotonic() + 60 * args.max_minutes
        tiny = args.grid == "language-tiny"
        try:
            if args.scheduler is None and args.workers == 0:
                context = contextlib.nullcontext(None)
            else:
                context = dask_executor(args.workers, args.scheduler)
            with context as executor:
                if executor is not None:
                    where = args.scheduler or f"a local Dask cluster of {args.workers} worker(s)"
                    print(f"running on {where}")
                pilot, main, rates = run_language(
                    out, tiny=tiny, executor=executor, in_flight=max(1, args.workers) + 1,
                    deadline=deadline, device=str(args.device),
                )  # fmt: skip
        except (GridLocked, ValueError) as error:
            fail(PROG, str(error))
    text = language_summary(pilot, main, rates)
    (out / "summary.md").write_text(text, encoding="utf-8")
    if main:
        import matplotlib

        matplotlib.use("Agg")
        figure = plot_language_curves(main)
        figure.savefig(out / "curves.png", dpi=120, bbox_inches="tight")
        print(f"wrote {out / 'summary.md'} and {out / 'curves.png'}")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(text)
    print(
        f"{len(pilot)} pilot rows, {len(main)} main rows in {out}; this call took "
        f"{(time.perf_counter() - start) / 60:.1f} min (load average {load:.1f} at the end)"
    )
    failed = _failures(out) - failures_before
    if failed:
        print(f"{PROG}: {failed} run(s) failed in this call; see {FAILURES_NAME} in {out}")
        raise SystemExit(1)
