"""Third pass of the study: two worker processes for the blocks added after the second pass.

``python book/study/run_third_pass.py WORKER DEADLINE_UTC`` (WORKER 1 or 2, deadline ``HH:MM``).
Worker 1 trains ``far-k12`` then ``lr-edge`` forwards, worker 2 ``lr-edge`` backwards, and
both then ``gapped-long`` (worker 1 forwards, worker 2 backwards). Each appends one row per
run to ``book/study/results.csv`` and skips the keys the CSV already holds (re-read before
each run); no run starts after the deadline. Afterwards
``python -m attnlab.study --grid full --out book/study --report-only`` rewrites the report.
"""

import datetime
import sys

import torch
from run_workers import CSV, done_keys

from attnlab.study.grids import full_blocks
from attnlab.study.runner import COLUMNS, run_one


def main():
    import csv

    worker, deadline = int(sys.argv[1]), sys.argv[2]
    hour, minute = map(int, deadline.split(":"))
    stop = datetime.datetime.now(datetime.UTC).replace(hour=hour, minute=minute, second=0)
    torch.set_num_threads(1)
    b = full_blocks()
    if worker == 1:
        todo = b["far-k12"] + b["lr-edge"] + b["gapped-long"]
    else:
        todo = b["lr-edge"][::-1] + b["far-k12"] + b["gapped-long"][::-1]
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


if __name__ == "__main__":
    main()
