"""Benchmark: attnlab.nn.MultiHeadAttention against torch.nn.MultiheadAttention.

Forward and backward pass of multi-head self-attention, batch 8, s = 256, d = 512, h = 8, on
the CPU, float32. Both layers hold the same weights (``to_torch``) and are timed side by side
in one process, alternating, so a machine shared with other work slows both alike; the table
reports the median of the repeats and the ratio of the medians.

Run standalone with ``python benchmarks/bench_multihead.py``; ``make bench`` calls
:func:`run` and writes the table into the book's Performance page.
"""

from __future__ import annotations

import statistics

import torch
from _timing import interleaved_times

from attnlab.nn import MultiHeadAttention

BATCH, S, D, H = 8, 256, 512, 8


def _timings(repeats: int = 15, warmup: int = 3) -> dict[str, list[float]]:
    """Seconds per forward+backward for each variant, interleaved repeat by repeat."""
    torch.manual_seed(0)
    ours = MultiHeadAttention(D, H)
    theirs = ours.to_torch()
    x = torch.randn(BATCH, S, D, requires_grad=True)

    def step_ours() -> None:
        ours(x).sum().backward()

    def step_theirs_fast() -> None:
        theirs(x, x, x, need_weights=False)[0].sum().backward()

    def step_ours_weights() -> None:
        out, weights = ours(x, need_weights=True)
        out.sum().backward()

    def step_theirs_weights() -> None:
        out, weights = theirs(x, x, x, need_weights=True, average_attn_weights=False)
        out.sum().backward()

    steps = {
        "attnlab, need_weights=False": step_ours,
        "torch.nn, need_weights=False": step_theirs_fast,
        "attnlab, need_weights=True": step_ours_weights,
        "torch.nn, need_weights=True (per head)": step_theirs_weights,
    }
    return interleaved_times(steps, repeats, warmup=warmup)


def run() -> dict[str, str]:
    """Return the markdown table ``multihead``."""
    times = _timings()
    medians = {name: statistics.median(t) for name, t in times.items()}
    ref = {
        "attnlab, need_weights=False": medians["torch.nn, need_weights=False"],
        "torch.nn, need_weights=False": medians["torch.nn, need_weights=False"],
        "attnlab, need_weights=True": medians["torch.nn, need_weights=True (per head)"],
        "torch.nn, need_weights=True (per head)": medians["torch.nn, need_weights=True (per head)"],
    }
    lines = [
        f"Forward + backward, batch {BATCH}, s = {S}, d = {D}, h = {H}, float32, CPU "
        f"({torch.get_num_threads()} threads), median of {len(times[next(iter(times))])} "
        "interleaved repeats.",
        "",
        "| layer | ms per step | ratio to torch.nn (same need_weights) |",
        "|---|---:|---:|",
    ]
    for name, median in medians.items():
        lines.append(f"| {name} | {1000 * median:.1f} | {median / ref[name]:.2f}x |")
    return {"multihead": "\n".join(lines)}


if __name__ == "__main__":
    for name, table in run().items():
        print(f"## {name}\n\n{table}\n")
