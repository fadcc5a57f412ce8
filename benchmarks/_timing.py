"""Side-by-side timing shared by the bench_*.py scripts.

Every step is run a few times to warm up, then all steps are timed round by round
(interleaved), so a machine that is busy with other work slows every step alike and the
ratios between them stay meaningful.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from tqdm import tqdm


def interleaved_times(
    steps: dict[str, Callable[[], object]],
    repeats: int,
    warmup: int = 1,
    desc: str | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, list[float]]:
    """Seconds per call of each step, ``repeats`` rounds, the steps interleaved in each round.

    ``clock`` is wall time by default; ``time.process_time`` counts the CPU time of this
    process instead, which other processes on a crowded machine inflate much less (while a
    process waits for a core, its wall time runs on and its CPU time does not).
    """
    for step in steps.values():
        for _ in range(warmup):
            step()
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in tqdm(range(repeats), desc=desc, leave=False, disable=desc is None):
        for name, step in steps.items():
            start = clock()
            step()
            times[name].append(clock() - start)
    return times
