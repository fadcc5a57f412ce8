"""GPU check for issues 18 and 25 (prepared; NOT YET RUN on a GPU: no GPU was available when
written).

Two parts, on the first CUDA device:

1. **Parity**: every ``attnlab.nn`` module, built on the CPU in float64 with a fixed seed and
   copied to CUDA, must give the CPU's output and gradients (input and every parameter) to
   ``1e-9``.
   ``attnlab.nn.tiled_attention`` is checked as a module (``_Tiled``), and GAM on its tiled
   path too.
2. **Timings**: forward + backward of GAM (fused, fused with recompute, tiled, explicit),
   ``attnlab.nn.MultiHeadAttention`` and ``torch.nn.MultiheadAttention``, and of
   ``attnlab.nn.scaled_dot_product_attention`` and ``attnlab.nn.tiled_attention`` (tiles of
   ``s / 8``) against ``F.scaled_dot_product_attention``, in
   float32 and bfloat16 at s ∈ {256, 2048}, with CUDA events (median of repeats) and
   ``torch.cuda.max_memory_allocated``.

Usage: ``python benchmarks/gpu_check.py`` prints the tables; ``--write`` also puts them in the
``gpu`` block of ``book/performance.md`` with the date and the GPU's name. Without CUDA it says
so and exits 0 (CI never needs a GPU). The file is not named ``bench_*.py``, so ``make bench``
does not run it.
"""

from __future__ import annotations

import copy
import datetime
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

import attnlab.nn as ann

HERE = Path(__file__).resolve().parent
TOL = 1e-9


class _Explicit(torch.nn.Module):
    """A module called with ``need_weights=True`` (its explicit path); returns the output."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, *args):
        return self.inner(*args, need_weights=True)[0]


class _RotaryScores(torch.nn.Module):
    """``RotaryEmbedding`` followed by the scores ``q' k'ᵀ`` (so both inputs get gradients)."""

    def __init__(self, layout: str) -> None:
        super().__init__()
        self.rope = ann.RotaryEmbedding(4, layout=layout)

    def forward(self, q, k):
        q, k = self.rope(q, k)
        return q @ k.transpose(-1, -2)


class _Tiled(torch.nn.Module):
    """:func:`attnlab.nn.tiled_attention` as a module, with tiles that do not divide 6."""

    def forward(self, q, k, v, mask):
        return ann.tiled_attention(q, k, v, mask, q_tile=4, k_tile=4)


def parity_cases() -> dict[str, tuple[Callable[[], torch.nn.Module], Callable]]:
    """name -> (build the module, make the inputs on a device in float64)."""

    def x(dev, b=2, s=6, d=8):
        g = torch.Generator().manual_seed(1)
        return (torch.randn(b, s, d, generator=g, dtype=torch.float64).to(dev),)

    def x_mask(dev):
        return (*x(dev), torch.tril(torch.ones(6, 6, dtype=torch.bool, device=dev)))

    def x_kw_mask(dev):  # GAMRelativeAttention(y, positions=None, mask=None)
        return (*x(dev), None, torch.tril(torch.ones(6, 6, dtype=torch.bool, device=dev)))

    def seq(dev):
        src = torch.tensor([[3, 4, 5], [6, 7, 0]], device=dev)
        return src, torch.tensor([3, 2], device=dev), torch.ones(2, 4, dtype=torch.long, device=dev)

    def luong_in(dev):
        (q,) = x(dev)
        return q, q, q, torch.ones(2, 6, dtype=torch.bool, device=dev)

    def qkv_mask(dev):  # three different tensors, so each gets its own gradient
        g = torch.Generator().manual_seed(2)
        q, k, v = torch.randn(3, 2, 2, 6, 4, generator=g, dtype=torch.float64).to(dev)
        return q, k, v, torch.tril(torch.ones(6, 6, dtype=torch.bool, device=dev))

    def qk(dev):  # (batch, heads, n, d_k) queries and keys for RoPE
        return qkv_mask(dev)[:2]

    return {
        "ScaledDotProductAttention": (lambda: ann.ScaledDotProductAttention(), qkv_mask),
        "tiled_attention (as a module)": (_Tiled, qkv_mask),
        "MultiHeadAttention": (lambda: ann.MultiHeadAttention(8, 2), x_mask),
        "AttentionHead": (lambda: ann.AttentionHead(8, 4), x_mask),
        "LuongAttention(general)": (lambda: ann.LuongAttention("general", 8, 8, 8), luong_in),
        "LuongAttention(concat)": (lambda: ann.LuongAttention("concat", 8, 8, 8), luong_in),
        "LuongSeq2Seq": (lambda: ann.LuongSeq2Seq(10, 7, "general", hidden=8, embed=4), seq),
        "GeneralizedAttention(n1=2, fused)": (
            lambda: ann.GeneralizedAttention(8, 2, n_brains=2, n1=2),
            x_mask,
        ),
        "GeneralizedAttention(n1=2, fused, recompute)": (
            lambda: ann.GeneralizedAttention(8, 2, n_brains=2, n1=2, recompute=True),
            x_mask,
        ),
        "GeneralizedAttention(n1=2, tiled)": (
            lambda: ann.GeneralizedAttention(8, 2, n_brains=2, n1=2, tiled=True, tiles=(4, 4)),
            x_mask,
        ),
        "GeneralizedAttention(poly, fused)": (
            lambda: ann.GeneralizedAttention(8, 2, n_brains=2, f="poly", degree=3),
            x_mask,
        ),
        "GAMRelativeAttention(linear)": (lambda: ann.GAMRelativeAttention(8, 6, h=2), x_kw_mask),
        "GAMRelativeAttention(linear, tiled)": (
            lambda: ann.GAMRelativeAttention(8, 6, h=2, tiled=True),
            x_kw_mask,
        ),
        "GAMRelativeAttention(geometric)": (
            lambda: ann.GAMRelativeAttention(8, 6, h=2, combine="geometric"),
            x_kw_mask,
        ),
        "GeneralizedAttention(n1=2, explicit)": (
            lambda: _Explicit(ann.GeneralizedAttention(8, 2, n_brains=2, n1=2)),
            x_mask,
        ),
        "GAMRelativeAttention(linear, explicit)": (
            lambda: _Explicit(ann.GAMRelativeAttention(8, 6, h=2)),
            x_kw_mask,
        ),
        "ShawRelativeAttention": (lambda: ann.ShawRelativeAttention(8, 2, 3), x_mask),
        "RotaryEmbedding(interleaved)": (lambda: _RotaryScores("interleaved"), qk),
        "RotaryEmbedding(half)": (lambda: _RotaryScores("half"), qk),
    }


def _first(out):
    return out[0] if isinstance(out, tuple) else out


def parity(device: torch.device) -> list[tuple[str, float]]:
    """Largest |CPU − CUDA| over the output and all gradients, per module (float64)."""
    rows = []
    for name, (build, inputs) in parity_cases().items():
        torch.manual_seed(0)
        cpu = build().double()
        gpu = copy.deepcopy(cpu).to(device)
        results = []
        for module, dev in ((cpu, torch.device("cpu")), (gpu, device)):
            args = [
                a.requires_grad_(True) if a is not None and a.is_floating_point() else a
                for a in inputs(dev)
            ]
            out = _first(module(*args)).double()
            out.pow(2).sum().backward()
            grads = [a.grad for a in args if a is not None and a.is_floating_point()]
            grads += [p.grad for p in module.parameters() if p.grad is not None]
            results.append([out.detach().cpu()] + [g.cpu() for g in grads])
        gap = max((a - b).abs().max().item() for a, b in zip(*results, strict=True))
        rows.append((name, gap))
    return rows


def _time(step: Callable[[], object], repeats: int = 10) -> tuple[float, float]:
    """Median milliseconds of ``step`` with CUDA events, and its peak memory in GiB."""
    for _ in range(2):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times), torch.cuda.max_memory_allocated() / 2**30


def timings(device: torch.device) -> list[str]:
    """Markdown rows: layer, dtype, s, ms, peak GiB."""
    configs = [(256, 8, 512, 8), (2048, 8, 1024, 16)]  # (s, batch, d, h)
    rows = []
    for dtype in (torch.float32, torch.bfloat16):
        for s, batch, d, h in configs:
            torch.manual_seed(0)
            x = torch.randn(batch, s, d, device=device, dtype=dtype, requires_grad=True)
            gam = ann.GeneralizedAttention(d, h, n_brains=2, n1=2).to(device, dtype)
            lean = ann.GeneralizedAttention(d, h, n_brains=2, n1=2, recompute=True)
            lean = lean.to(device, dtype)
            tiled = ann.GeneralizedAttention(d, h, n_brains=2, n1=2, tiled=True)
            tiled = tiled.to(device, dtype)  # tiles: gam_tiles(s)
            mha = ann.MultiHeadAttention(d, h).to(device, dtype)
            ref = torch.nn.MultiheadAttention(d, h, batch_first=True).to(device, dtype)
            q = torch.randn(batch, h, s, d // h, device=device, dtype=dtype, requires_grad=True)
            steps = {
                "GAM fused (N_B = 2, n1 = 2)": lambda g=gam, x=x: g(x).sum().backward(),
                "GAM fused, recompute": lambda g=lean, x=x: g(x).sum().backward(),
                "GAM tiled": lambda g=tiled, x=x: g(x).sum().backward(),
                "GAM explicit": lambda g=gam, x=x: g(x, need_weights=True)[0].sum().backward(),
                "attnlab MultiHeadAttention": lambda m=mha, x=x: m(x).sum().backward(),
                "torch.nn.MultiheadAttention": lambda r=ref, x=x: (
                    r(x, x, x, need_weights=False)[0].sum().backward()
                ),
                "attnlab scaled_dot_product_attention": lambda q=q: (
                    ann.scaled_dot_product_attention(q, q, q)[0].sum().backward()
                ),
                "attnlab tiled_attention (tiles s / 8)": lambda q=q, t=s // 8: (
                    ann.tiled_attention(q, q, q, q_tile=t, k_tile=t).sum().backward()
                ),
                "F.scaled_dot_product_attention": lambda q=q: (
                    F.scaled_dot_product_attention(q, q, q).sum().backward()
                ),
            }
            for name, step in steps.items():
                try:
                    ms, gib = _time(step)
                    rows.append(
                        f"| {name} | {str(dtype)[6:]} | {s} | {d} | {h} | {ms:.2f} | {gib:.2f} |"
                    )
                except torch.cuda.OutOfMemoryError:
                    rows.append(
                        f"| {name} | {str(dtype)[6:]} | {s} | {d} | {h} | out of memory | — |"
                    )
                torch.cuda.empty_cache()
    return rows


def main(write: bool) -> None:
    if not torch.cuda.is_available():
        print("No CUDA device: the GPU check needs one (CI never runs it).")
        return
    device = torch.device("cuda")
    name = torch.cuda.get_device_name(device)
    lines = [
        f"Measured on {datetime.date.today().isoformat()} on {name}, torch {torch.__version__}.",
        "",
        "| module | max CPU − CUDA difference (float64, output and gradients) |",
        "|---|---:|",
    ]
    failed = []
    for module, gap in parity(device):
        lines.append(f"| {module} | {gap:.1e} |")
        if not gap <= TOL:
            failed.append(module)
    lines += [
        "",
        "| layer (forward + backward, batch 8) | dtype | s | d | h | ms (median) | peak GiB |",
        "|---|---|---:|---:|---:|---:|---:|",
        *timings(device),
    ]
    table = "\n".join(lines)
    print(table)
    if write:
        sys.path.insert(0, str(HERE))
        from run import PAGE, replace_block

        PAGE.write_text(replace_block(PAGE.read_text(), "gpu", table))
    if failed:
        raise SystemExit(f"CPU and CUDA differ by more than {TOL} for: {failed}")


if __name__ == "__main__":
    main("--write" in sys.argv[1:])
