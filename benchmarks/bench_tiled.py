"""Benchmark: ``attnlab.nn.tiled_attention`` (plain PyTorch tiles) against PyTorch's fused SDPA.

Forward + backward of attention alone, batch 1, ``h = 4`` heads, ``d_k = d_v = 32`` (GAM's and
MHA's head width at ``d = 128``), float32, one torch thread, over ``n``; the tiled version with
tiles of ``n / 8`` queries and keys. Three implementations, interleaved round by round:
``torch.nn.functional.scaled_dot_product_attention`` (on the CPU its flash kernel: the same
algorithm, compiled), ``attnlab.nn.tiled_attention`` and ``attnlab.nn.scaled_dot_product_attention``
(the explicit ``n × n`` weights). The last columns say where the tiled version's time goes:
the share of its step spent in matrix products (``torch.profiler``, self CPU time of the
matmul kernels), the rest being the element-wise passes over each block (max, exp, sums,
masks, rescaling) and Python's loop over the tiles.

Run standalone with ``python benchmarks/bench_tiled.py``.
"""

from __future__ import annotations

import os
import time

import torch
import torch.nn.functional as F
from _timing import interleaved_times

from attnlab.nn import scaled_dot_product_attention, tiled_attention

HEADS, D_K = 4, 32
NS = (256, 512, 1024, 2048)
MATMUL_OPS = ("aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm")


def _steps(n: int) -> dict:
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, HEADS, n, D_K, requires_grad=True) for _ in range(3))
    tile = max(1, n // 8)

    def step(fn):
        def run() -> None:
            for t in (q, k, v):
                t.grad = None
            fn(q, k, v).sum().backward()

        return run

    return {
        "sdpa": step(F.scaled_dot_product_attention),
        "tiled": step(lambda q, k, v: tiled_attention(q, k, v, q_tile=tile, k_tile=tile)),
        "explicit": step(lambda q, k, v: scaled_dot_product_attention(q, k, v)[0]),
    }


def matmul_share(step) -> float:
    """Fraction of the step's self CPU time spent in matrix-product kernels (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile

    step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    matmul = sum(e.self_cpu_time_total for e in events if e.key in MATMUL_OPS)
    return matmul / total if total else float("nan")


def table(ns=NS) -> str:
    lines = [
        f"Forward + backward of attention alone, batch 1, h = {HEADS}, d_k = d_v = {D_K}, "
        "float32, CPU (1 torch thread); best of interleaved repeats of the process's CPU time "
        "(`time.process_time`), ms. Tiles of n / 8 queries and keys. F.sdpa is "
        "`F.scaled_dot_product_attention`, tiled `attnlab.nn.tiled_attention`, explicit the "
        "book's explicit path; a matmul share is the part of the time spent in matrix products.",
        "",
        "| n | F.sdpa | tiled | explicit | tiled / F.sdpa | explicit / F.sdpa "
        "| tiled: matmul share | F.sdpa: matmul share |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n in ns:
        steps = _steps(n)
        repeats = 5 if n <= 512 else 3
        timed = interleaved_times(steps, repeats, warmup=1, clock=time.process_time)
        t = {k: min(v) for k, v in timed.items()}
        share_tiled, share_sdpa = matmul_share(steps["tiled"]), matmul_share(steps["sdpa"])
        lines.append(
            f"| {n} | {t['sdpa'] * 1e3:.1f} | {t['tiled'] * 1e3:.1f} | {t['explicit'] * 1e3:.1f} "
            f"| {t['tiled'] / t['sdpa']:.2f}× | {t['explicit'] / t['sdpa']:.2f}× "
            f"| {share_tiled:.0%} | {share_sdpa:.0%} |"
        )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines += [
        "",
        f"Load average {load:.1f} on {os.cpu_count()} logical CPUs at the end of the run. "
        "F.sdpa's flash kernel does its block products inside one compiled kernel, which the "
        "profiler does not split into matrix-product calls, so its share is near 0%.",
    ]
    return "\n".join(lines)


def run() -> dict[str, str]:
    """Return the markdown table ``tiled`` (one torch thread, as the GAM tables)."""
    default_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return {"tiled": table()}
    finally:
        torch.set_num_threads(default_threads)


if __name__ == "__main__":
    print(run()["tiled"])
