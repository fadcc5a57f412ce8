"""Benchmark: GAM's fused path (``need_weights=False``), with and without recomputation, its
tiled path (``tiled=True``: :func:`attnlab.nn.tiled_attention` per brain, default tiles
:func:`attnlab.nn.gam.gam_tiles`, at most ``n / 8`` keys), its explicit path and multi-head
attention.

* ``gam_rate``: forward + backward of ``attnlab.nn.GeneralizedAttention`` (2 brains, power 2) on
  its four paths (fused; fused with ``recompute=True``; tiled; explicit) against
  ``attnlab.nn.MultiHeadAttention`` at the same ``(d, h)``, float32, batch 1, on the CPU, over
  ``n``. Each layer's rate is its multiply-adds by formula (``benchmarks/flops.py``; GAM counted
  by the algorithm's formula on every path) divided by its time; the goal is GAM's rate ≥ 70% of
  MHA's at ``n ≥ 1024``.
* ``gam_memory``: peak memory of one forward + backward step, per layer and ``n``, each in a
  fresh subprocess (``tracemalloc`` does not see torch's allocations): the growth of the
  process's resident anonymous memory (``RssAnon``, sampled every millisecond during the step)
  over its value after building the layer and its input (Linux only). Measured twice:
  *live*, with glibc's mmap threshold fixed at 128 KiB (``MALLOC_MMAP_THRESHOLD_``), so that
  every tensor of that size or more is its own mapping and goes back to the system when freed
  and the growth follows the tensors alive at once (cross-checked at the smallest ``n`` against
  the peak of live tensor bytes in ``torch.profiler``'s memory timeline); and *process*, with
  glibc's defaults, whose heap keeps freed blocks (its threshold rises after the first large
  free), which is what ``top`` shows. The explicit path is run only while its five
  ``(h, N_B, n, n)`` float32 tensors stay under ``EXPLICIT_CAP_BYTES``. Goal: linear in ``n``,
  within 2× of MHA at ``n = 4096`` and ``8192``.

Timings are interleaved repeat by repeat (``_timing.interleaved_times``), best of the repeats,
on one torch thread (see :func:`run`).
Run standalone with ``python benchmarks/bench_gam_fused.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from _timing import interleaved_times
from flops import gam_macs, mha_macs

from attnlab.nn import GeneralizedAttention, MultiHeadAttention

D, H, N_BRAINS, N1 = 128, 4, 2, 2.0
RATE_NS = (256, 512, 1024, 2048)
MEMORY_NS = (1024, 2048, 4096, 8192)
EXPLICIT_CAP_BYTES = 3 * 2**30
BACKWARD = 3  # forward + backward ≈ 3 forward passes of multiply-adds, for every layer alike
HERE = Path(__file__).resolve().parent


def build(layer: str, d: int = D, h: int = H):
    """A seeded layer and the call that runs one forward + backward step on ``x``."""
    torch.manual_seed(0)
    if layer == "mha":
        mha = MultiHeadAttention(d, h)
        return lambda x: mha(x).sum().backward()
    gam = GeneralizedAttention(
        d, h, n_brains=N_BRAINS, n1=N1, recompute=layer == "recompute", tiled=layer == "tiled"
    )
    if layer in ("fused", "recompute", "tiled"):
        return lambda x: gam(x).sum().backward()
    return lambda x: gam(x, need_weights=True)[0].sum().backward()


def _threads() -> str:
    n = torch.get_num_threads()
    return f"{n} torch thread" + ("s" if n > 1 else "")


GAM_PATHS = ("fused", "recompute", "tiled", "explicit")
LINEAR_PATHS = ("fused", "recompute", "tiled")  # the paths whose memory is linear in n


def table_rate(ns=RATE_NS) -> str:
    lines = [
        f"Forward + backward, batch 1, d = {D}, h = {H}, GAM with N_B = {N_BRAINS} brains and "
        f"power {N1:g}, float32, CPU ({_threads()}); best of interleaved "
        "repeats of the process's CPU time (`time.process_time`: on a shared machine a process "
        "waiting for a core loses wall time, not CPU time); each cell: time in ms (rate in "
        "GMAC/s). Rate = multiply-adds by formula × 3 "
        "(forward + backward) / time. Goal: GAM's rate ≥ 70% of MHA's at n ≥ 1024.",
        "",
        "| n | MHA | GAM fused | GAM fused, recompute | GAM tiled | GAM explicit "
        "| fused / MHA rate | recompute / MHA rate | tiled / MHA rate | explicit / MHA rate "
        "| GAM / MHA work |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    ratios: dict[str, list[float]] = {path: [] for path in GAM_PATHS}
    for n in ns:
        x = torch.randn(1, n, D, requires_grad=True)
        layers = {name: build(name) for name in ("mha", *GAM_PATHS)}
        steps: dict[str, Callable[[], object]] = {
            name: (lambda f=f, x=x: f(x)) for name, f in layers.items()
        }
        repeats = 5 if n <= 512 else 3
        timed = interleaved_times(steps, repeats, warmup=1, clock=time.process_time)
        times = {k: min(v) for k, v in timed.items()}
        work = {"mha": mha_macs(n, D, H)}
        work.update({path: gam_macs(n, D, H, N_BRAINS) for path in GAM_PATHS})
        rate = {k: BACKWARD * work[k] / times[k] / 1e9 for k in times}
        cells = [f"{times[k] * 1e3:.1f} ({rate[k]:.1f})" for k in ("mha", *GAM_PATHS)]
        shares = [f"{rate[path] / rate['mha']:.0%}" for path in GAM_PATHS]
        work_ratio = work["fused"] / work["mha"]
        lines.append(f"| {n} | " + " | ".join(cells + shares) + f" | {work_ratio:.1f}× |")
        if n >= 1024:
            for path in GAM_PATHS:
                ratios[path].append(rate[path] / rate["mha"])
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines += [
        "",
        verdict_rate(ratios)
        + f" Load average {load:.1f} on {os.cpu_count()} logical CPUs at the end of the run.",
    ]
    return "\n".join(lines)


def verdict_rate(ratios: dict[str, list[float]]) -> str:
    """One sentence: is GAM's rate at least 70% of MHA's at every measured n >= 1024?"""
    parts = []
    for path, values in ratios.items():
        if not values:
            continue
        met = "met" if min(values) >= 0.7 else "not met"
        parts.append(f"{path} path {met} (lowest {min(values):.0%})")
    return "Goal (rate ≥ 70% of MHA's at n ≥ 1024): " + "; ".join(parts) + "."


def _anon_bytes() -> int:
    """This process's resident anonymous memory (``RssAnon`` of ``/proc/self/status``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024  # kB
    raise OSError("no RssAnon in /proc/self/status")


def _child(layer: str, n: int, threads: int) -> None:
    """Run in a subprocess: print the peak memory growth (bytes) and time of one step as JSON.

    A thread samples the resident *anonymous* memory (the heap, where torch's tensors live)
    every millisecond while the step runs. ``ru_maxrss`` is not used: it also counts the
    libraries' file-backed pages, which the kernel may drop and reload on a busy machine.
    """
    import threading
    import time

    torch.set_num_threads(threads)
    step = build(layer)
    step(torch.randn(1, 16, D, requires_grad=True))  # load the kernels at a tiny size
    x = torch.randn(1, n, D, requires_grad=True)
    before = _anon_bytes()
    highest, running = [before], [True]

    def sample() -> None:
        while running[0]:
            highest[0] = max(highest[0], _anon_bytes())
            time.sleep(0.001)

    sampler = threading.Thread(target=sample)
    sampler.start()
    start = time.perf_counter()
    step(x)
    seconds = time.perf_counter() - start
    running[0] = False
    sampler.join()
    print(json.dumps({"bytes": highest[0] - before, "seconds": seconds}))


def _child_profile(layer: str, n: int, threads: int) -> None:
    """Run in a subprocess: the peak of live tensor bytes during one step, from
    ``torch.profiler``'s memory timeline (its ``_memory_profile``, a private helper of
    PyTorch 2.13), printed as JSON; a cross-check of the RSS measurement, not a replacement."""
    from torch.profiler import ProfilerActivity, profile
    from torch.profiler._memory_profiler import Action

    torch.set_num_threads(threads)
    step = build(layer)
    step(torch.randn(1, 16, D, requires_grad=True))
    x = torch.randn(1, n, D, requires_grad=True)
    with profile(
        activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True, with_stack=True
    ) as prof:
        step(x)
    alive = highest = 0
    for _, action, _, size in prof._memory_profile().timeline:
        if action == Action.CREATE:
            alive += size
        elif action == Action.DESTROY:
            alive -= size
        highest = max(highest, alive)
    print(json.dumps({"bytes": highest}))


def _in_child(mode: str, layer: str, n: int, env: dict[str, str] | None = None) -> dict | None:
    """Run this script as ``--child`` or ``--profile`` in a fresh process with as many torch
    threads as this one; its last line of output as JSON, or ``None`` if the child failed."""
    threads = str(torch.get_num_threads())
    result = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), mode, layer, str(n), threads],
        capture_output=True,
        text=True,
        cwd=HERE,
        env=env,
    )
    if result.returncode != 0:
        return None
    return json.loads(result.stdout.strip().splitlines()[-1])


def profiled_peak(layer: str, n: int) -> float | None:
    """MiB from :func:`_child_profile` in a fresh process, or ``None`` if it fails."""
    got = _in_child("--profile", layer, n)
    return None if got is None else got["bytes"] / 2**20


def peak(layer: str, n: int, live: bool) -> dict[str, float]:
    """Peak-RSS growth and time of one step of ``layer`` at length ``n``, in a fresh process.

    ``live=True`` fixes glibc's mmap threshold so that freed tensors leave the process at once
    (the growth then follows the tensors alive at once); ``False`` keeps glibc's defaults.
    """
    env = dict(os.environ)
    env.pop("MALLOC_MMAP_THRESHOLD_", None)
    if live:
        env["MALLOC_MMAP_THRESHOLD_"] = str(128 * 1024)
    got = _in_child("--child", layer, n, env)
    if got is None:
        raise RuntimeError(f"the memory child for {layer} at n = {n} failed")
    return got


def explicit_bytes(n: int) -> int:
    """Five float32 ``(h, N_B, n, n)`` tensors: the explicit path's logits, weights, gradients."""
    return 5 * H * N_BRAINS * n * n * 4


def table_memory(ns=MEMORY_NS) -> str:
    lines = [
        f"One forward + backward step, batch 1, d = {D}, h = {H}, N_B = {N_BRAINS}, float32, "
        "CPU; each in a fresh process: growth of its resident anonymous memory (sampled every "
        "millisecond) over the value after set-up. Each cell: live peak / process peak in MiB "
        "(live: glibc returns every freed tensor of 128 KiB or more at once, so the growth "
        "follows the tensors alive together; process: glibc's defaults, what `top` shows). "
        "Step times from the "
        "process runs. The explicit path is skipped where five "
        f"(h, N_B, n, n) float32 tensors would exceed {EXPLICIT_CAP_BYTES / 2**30:.0f} GiB.",
        "",
        "| n | MHA | GAM fused | GAM fused, recompute | GAM tiled | GAM explicit "
        "| fused / MHA (live) | recompute / MHA (live) | tiled / MHA (live) "
        "| step: MHA, fused, recompute, tiled, explicit |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    peaks: dict[int, dict[str, float]] = {}
    for n in ns:
        layers = ["mha", *LINEAR_PATHS]
        if explicit_bytes(n) <= EXPLICIT_CAP_BYTES:
            layers.append("explicit")
        live = {k: peak(k, n, live=True)["bytes"] / 2**20 for k in layers}
        process = {k: peak(k, n, live=False) for k in layers}

        def cell(k: str, live=live, process=process) -> str:
            if k not in live:
                return "— (over cap)"
            return f"{live[k]:.0f} / {process[k]['bytes'] / 2**20:.0f}"

        steps = ", ".join(
            f"{process[k]['seconds']:.2f}" if k in process else "—"
            for k in ("mha", *GAM_PATHS)
        )
        cells = " | ".join(cell(k) for k in ("mha", *GAM_PATHS))
        ratios = " | ".join(f"{live[k] / max(live['mha'], 1):.1f}×" for k in LINEAR_PATHS)
        lines.append(f"| {n} | {cells} | {ratios} | {steps} s |")
        peaks[n] = live
    lines += ["", verdict_memory(peaks), "", cross_check(ns[0], peaks[ns[0]])]
    return "\n".join(lines)


def cross_check(n: int, live: dict[str, float]) -> str:
    """One sentence: the live RSS peaks at ``n`` against torch.profiler's tensor peaks."""
    parts = []
    for layer in ("mha", *LINEAR_PATHS):
        profiled = profiled_peak(layer, n)
        seen = "unavailable" if profiled is None else f"{profiled:.1f}"
        parts.append(f"{layer} {live[layer]:.1f} vs {seen}")
    return (
        f"Cross-check at n = {n}, live peak vs the peak of live tensor bytes in torch.profiler's "
        "memory timeline (MiB): " + "; ".join(parts) + "."
    )


def verdict_memory(peaks: dict[int, dict[str, float]]) -> str:
    """Growth of each path's live peak from the smallest to the largest n; ratios at 4096."""
    ns = sorted(peaks)
    parts = []
    for path in ("mha", *GAM_PATHS):
        have = [n for n in ns if path in peaks[n] and peaks[n][path] > 0]
        if len(have) >= 2:
            lo, hi = have[0], have[-1]
            growth = peaks[hi][path] / peaks[lo][path]
            parts.append(f"{path} ×{growth:.1f} from n = {lo} to {hi} (n ×{hi // lo})")
    text = "Live peak growth: " + "; ".join(parts) + "."
    at = [n for n in (4096, 8192) if n in peaks]
    if at:
        goals = []
        for path in (p for p in LINEAR_PATHS if all(p in peaks[n] for n in at)):
            ratios = [peaks[n][path] / max(peaks[n]["mha"], 1) for n in at]
            shown = ", ".join(f"{r:.1f}×" for r in ratios)
            goals.append(f"{path} {'met' if max(ratios) <= 2 else 'not met'} ({shown})")
        where = " and ".join(str(n) for n in at)
        text += f" Goal (live peak within 2× of MHA's at n = {where}): " + "; ".join(goals) + "."
    return text


def run() -> dict[str, str]:
    """Return the markdown tables ``gam_rate`` and ``gam_memory`` (one torch thread).

    One thread, as in ``bench_gam.py``: on a machine whose cores are busy with other work, a
    second thread that waits for a core distorts the larger problems by factors of ten.
    """
    default_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return {"gam_rate": table_rate(), "gam_memory": table_memory()}
    finally:
        torch.set_num_threads(default_threads)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        _child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif len(sys.argv) == 5 and sys.argv[1] == "--profile":
        _child_profile(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        for table_name, table in run().items():
            print(f"## {table_name}\n\n{table}\n")
