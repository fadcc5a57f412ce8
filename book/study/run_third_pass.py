"""Third pass of the study: two worker processes for the blocks added after the second pass.

``python book/study/run_third_pass.py WORKER DEADLINE_UTC`` (WORKER 1 or 2, deadline ``HH:MM``).
Worker 1 trains ``far-k12`` then ``lr-edge`` forwards, worker 2 ``lr-edge`` backwards, and
both then ``gapped-long`` (worker 1 forwards, worker 2 backwards). Each appends one row per
run to ``src/attnlab/study/results/results.csv`` (the packaged copy) and skips the keys the
CSV already holds (re-read before each run); no run starts after the deadline. Afterwards
``python -m attnlab.study --grid full --out src/attnlab/study/results --report-only`` rewrites
the report.
"""

import sys

import torch
from run_workers import deadline, run_list

from attnlab.study.grids import full_blocks


def main():
    worker, stop = int(sys.argv[1]), deadline(sys.argv[2])
    torch.set_num_threads(1)
    b = full_blocks()
    if worker == 1:
        todo = b["far-k12"] + b["lr-edge"] + b["gapped-long"]
    else:
        todo = b["lr-edge"][::-1] + b["far-k12"] + b["gapped-long"][::-1]
    run_list(todo, stop)


if __name__ == "__main__":
    main()
