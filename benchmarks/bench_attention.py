"""Benchmark: attnlab's attention against PyTorch's built-in, forward + backward, on CPU.

Shape: batch 8, 8 heads, s = 256, d_k = d_v = 64 (float32). Every implementation is timed
in the same process, interleaved round by round, so a machine loaded by other work slows
them alike; the table reports medians and the ratio to the built-in.

Run standalone: ``python benchmarks/bench_attention.py``.
"""

from __future__ import annotations

import os
import platform
import statistics
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from _timing import interleaved_times

import attnlab
from attnlab.nn import scaled_dot_product_attention

BATCH, HEADS, SEQ, D_K = 8, 8, 256, 64
WARMUP, REPEATS = 3, 11


def _torch_step(fn: Callable, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """One forward and backward pass; gradients are cleared first."""
    for t in (q, k, v):
        t.grad = None
    out = fn(q, k, v)
    out.sum().backward()


def _measure(steps: dict[str, Callable[[], None]], desc: str) -> dict[str, float]:
    """Median seconds per step, the steps interleaved round by round after a warm-up."""
    times = interleaved_times(steps, REPEATS, warmup=WARMUP, desc=desc)
    return {name: statistics.median(ts) for name, ts in times.items()}


def run() -> dict[str, str]:
    """Time the implementations side by side; return the markdown table ``attention``."""
    torch.manual_seed(0)
    shape = (BATCH, HEADS, SEQ, D_K)
    q, k, v = (torch.randn(shape, requires_grad=True) for _ in range(3))
    q_np, k_np, v_np = (t.detach().numpy().copy() for t in (q, k, v))

    def builtin_fb() -> None:
        _torch_step(F.scaled_dot_product_attention, q, k, v)

    def ours_fb() -> None:
        _torch_step(lambda *a: scaled_dot_product_attention(*a)[0], q, k, v)

    def ours_f() -> None:
        with torch.no_grad():
            scaled_dot_product_attention(q, k, v)

    def numpy_f() -> None:
        attnlab.scaled_dot_product_attention(q_np, k_np, v_np)

    default_threads = torch.get_num_threads()
    rows = [
        "| comparison | torch threads | attnlab (ms) | reference (ms) | ratio |",
        "|---|---:|---:|---:|---:|",
    ]
    for threads in sorted({1, default_threads}):
        torch.set_num_threads(threads)
        med = _measure({"builtin": builtin_fb, "ours": ours_fb}, f"fwd+bwd, {threads} thread(s)")
        rows.append(
            f"| attnlab.nn vs F.scaled_dot_product_attention, forward + backward | {threads} "
            f"| {1e3 * med['ours']:.1f} | {1e3 * med['builtin']:.1f} "
            f"| {med['ours'] / med['builtin']:.2f}× (goal ≤ 1.3×) |"
        )
    torch.set_num_threads(default_threads)
    med = _measure({"numpy": numpy_f, "torch": ours_f}, "numpy vs torch, forward")
    rows.append(
        f"| attnlab (numpy) vs attnlab.nn (torch), forward only | {default_threads} "
        f"| {1e3 * med['numpy']:.1f} | {1e3 * med['torch']:.1f} "
        f"| {med['numpy'] / med['torch']:.2f}× |"
    )
    note = (
        f"\n\nShape (batch, heads, s, d_k = d_v) = {shape}, float32, CPU; medians of "
        f"{REPEATS} interleaved repeats after {WARMUP} warm-up runs, measured side by side in "
        f"one process; torch {torch.__version__}, numpy {np.__version__}, "
        f"{platform.machine()} with {os.cpu_count()} logical CPUs, load average "
        f"{os.getloadavg()[0]:.1f} at the end of the run. The built-in runs one fused kernel; "
        "attnlab's four to six separate operations each synchronise the torch threads, so on a "
        "machine whose cores are busy with other work the multi-thread ratio grows while the "
        "one-thread ratio stays near 1."
    )
    return {"attention": "\n".join(rows) + note}


if __name__ == "__main__":
    for name, table in run().items():
        print(f"## {name}\n\n{table}\n")
