"""Run parts of the full grid in two parallel worker processes (second pass of the study).

``python book/study/run_workers.py WORKER DEADLINE_UTC`` (WORKER 1 or 2, deadline ``HH:MM``).
Each worker trains its own list of configurations of ``grid("full")`` (worker 1:
recall at 3e-3, ``lr-far``, recall at 1e-3, ``lr-other`` backwards; worker 2: recall at 1e-2,
``lr-gapped``, then ``lr-far``, recall at 1e-3 and ``lr-other`` from the other end)
and appends one row per run to the packaged ``src/attnlab/study/results/results.csv`` (one
``write`` per row, in append mode). Before each run it re-reads which keys the CSV holds, so neither repeats the other's
finished runs; no run starts after the deadline. Afterwards
``python -m attnlab.study --report-only`` rewrites the report.
"""

import csv
import datetime
import sys
from pathlib import Path

import torch

from attnlab.study.grids import full_blocks
from attnlab.study.runner import COLUMNS, CONFIG_COLUMNS, run_one

# The packaged copy, read by chapter 10 through attnlab.study.packaged_results().
CSV = Path(__file__).resolve().parents[2] / "src/attnlab/study/results/results.csv"


def done_keys():
    lines = CSV.read_text(encoding="utf-8").split("\n")[1:-1]  # only complete lines
    return {tuple(r[c] for c in CONFIG_COLUMNS) for r in csv.DictReader(lines, COLUMNS)}


def deadline(hhmm: str) -> datetime.datetime:
    """Today's ``HH:MM`` in UTC: no run starts after it."""
    hour, minute = map(int, hhmm.split(":"))
    return datetime.datetime.now(datetime.UTC).replace(hour=hour, minute=minute, second=0)


def run_list(todo, stop: datetime.datetime) -> None:
    """Train each configuration the CSV does not hold yet, appending one row per run."""
    for config in todo:
        if datetime.datetime.now(datetime.UTC) > stop:
            print("deadline reached", flush=True)
            break
        if config.key() in done_keys():
            continue
        row = run_one(config)
        with CSV.open("a", newline="", encoding="utf-8") as handle:
            csv.DictWriter(handle, COLUMNS, lineterminator="\n").writerow(row)
        print(datetime.datetime.now(datetime.UTC).strftime("%H:%M:%S"),
              config.task, config.attention, config.positions, config.embedding, config.seed,
              config.lr, config.steps, config.shaw_k, row["test_accuracy"], row["ms_per_step"],
              flush=True)


def main():
    worker, stop = int(sys.argv[1]), deadline(sys.argv[2])
    torch.set_num_threads(1)
    b = full_blocks()
    sweep = b["lr-recall"]
    low, high = [c for c in sweep if c.lr == 1e-3], [c for c in sweep if c.lr == 1e-2]
    if worker == 1:
        todo = b["sanity"] + b["recall"] + b["lr-far"] + low + b["lr-other"][::-1]
    else:
        todo = high + b["lr-gapped"] + b["lr-far"][::-1] + low[::-1] + b["lr-other"]
    run_list(todo, stop)


if __name__ == "__main__":
    main()
