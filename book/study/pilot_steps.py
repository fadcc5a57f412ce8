"""Pilot for the recall block's training length (``src/attnlab/study/results/timing.md``
describes it).

Trains each recall configuration of the full grid for ``MAX_STEPS`` steps at the default rate
on the given seeds, keeps the whole loss history, and applies the study's flatness rule
(``attnlab.study.stats``: the mean training loss of the last of 20 equal windows is more than
0.9 times that of the window a quarter from the end) to the first ``T`` steps, for several
``T``. Training has no schedule and batch ``k`` depends only on the seed and ``k``, so the first
``T`` steps of a long run are exactly a run of ``T`` steps. Prints one CSV line per run and T.

Usage: ``python book/study/pilot_steps.py SEED [SEED ...]``
"""

import sys
import time

import torch

from attnlab.study.runner import RunConfig, _curve, build_model, task_loss, task_tensors
from attnlab.data.tasks import make_task
from attnlab.train import train

MAX_STEPS = 4000
CHECKS = (800, 1200, 1600, 2000, 2400, 3000, 4000)
SPECS = (("luong", "abs", "-"), ("gam-p1", "abs", "-"), ("sdpa", "abs", "-"),
         ("gam-p2", "abs", "-"), ("sdpa", "rel", "-"), ("gam-p2", "rel", "layernorm"))


def flat(history, steps):
    curve = _curve(history[:steps])
    return curve[-1] > 0.9 * curve[-max(2, len(curve) // 4)], curve[-1]


def main():
    torch.set_num_threads(1)
    for seed in map(int, sys.argv[1:]):
        for attention, positions, embedding in SPECS:
            config = RunConfig("recall", attention, positions, seed, embedding=embedding,
                               steps=MAX_STEPS)
            model = build_model(config)

            def batches(epoch, config=config):
                data = make_task("recall", 50 * 32, seed=1000 * config.seed + epoch + 1)
                tensors = task_tensors(data)
                return [tuple(t[i:i + 32] for t in tensors) for i in range(0, len(data), 32)]

            start = time.perf_counter()
            history = train(model, batches, task_loss, epochs=MAX_STEPS // 50, lr=3e-3,
                            seed=seed, progress=False)
            ms = 1000 * (time.perf_counter() - start) / MAX_STEPS
            for steps in CHECKS:
                is_flat, last = flat(history, steps)
                print(f"{attention},{positions},{embedding},{seed},{steps},{int(is_flat)},"
                      f"{last:.4f},{ms:.2f}", flush=True)


if __name__ == "__main__":
    main()
