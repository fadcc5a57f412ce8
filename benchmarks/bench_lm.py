"""Benchmark: training throughput of chapter 11's language model, three attention paths.

One training step (forward, backward, AdamW) of a 2-block, width-64, 4-head decoder with a
learned position table, on batches of about 4,096 characters, float32 on the CPU:

* **book**: ``CharTransformer(attention="book")``, the book's
  ``attnlab.nn.scaled_dot_product_attention`` with an explicit boolean causal mask (it builds
  the ``(b, h, n, n)`` weights);
* **sdpa**: the same model with ``F.scaled_dot_product_attention(..., is_causal=True)``;
* **sdpa + RoPE**: the ``sdpa`` model with rotary positions instead of the learned table (what
  chapter 11 trains, there with an MLP of width 2d), so that the rotations' cost is visible;
* **torch.nn**: the same architecture from ``nn.TransformerEncoderLayer(norm_first=True,
  bias=False, activation="gelu")`` with a causal mask (``is_causal=True`` hint).

Contexts 128 and 1,024, one and two torch threads, timed side by side (interleaved) so that a
busy machine slows all three alike; one-thread rows by the process's CPU time, two-thread rows
by wall time. Run standalone with ``python benchmarks/bench_lm.py``.
"""

from __future__ import annotations

import os
import statistics
import time

import torch
from _timing import interleaved_times
from torch import nn

from attnlab.lm.model import CharTransformer, LMConfig

V, D, L, H = 85, 64, 2, 4
CHARS = 4096  # characters per step: batch = CHARS // context


class TorchLM(nn.Module):
    """The same decoder from ``nn.TransformerEncoderLayer`` blocks and a causal mask."""

    def __init__(self, context: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(V, D)
        self.positions = nn.Parameter(torch.zeros(context, D))
        layer = nn.TransformerEncoderLayer(
            D, H, 4 * D, dropout=0.0, activation="gelu", batch_first=True, norm_first=True,
            bias=False,
        )  # fmt: skip
        self.blocks = nn.TransformerEncoder(layer, L, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(D, bias=False)
        self.head = nn.Linear(D, V, bias=False)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(context))

    def loss(self, ids: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        n = ids.shape[1]
        x = self.embed(ids) + self.positions[:n]
        x = self.blocks(x, mask=self.mask[:n, :n], is_causal=True)
        logits = self.head(self.norm(x))
        return nn.functional.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))


def _step(model: nn.Module, ids: torch.Tensor):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step() -> None:
        loss = model.loss(ids[:, :-1], ids[:, 1:])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


def _timings(context: int, threads: int, repeats: int = 9) -> dict[str, float]:
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    batch = CHARS // context
    ids = torch.randint(0, V, (batch, context + 1))
    models = {
        "book": CharTransformer(LMConfig(V, D, L, H, context, "learned", attention="book")),
        "sdpa": CharTransformer(LMConfig(V, D, L, H, context, "learned", attention="sdpa")),
        "sdpa + RoPE": CharTransformer(LMConfig(V, D, L, H, context, "rotary", attention="sdpa")),
        "torch.nn": TorchLM(context),
    }
    steps = {name: _step(m, ids) for name, m in models.items()}
    # one thread: the process's CPU time, which waiting for a core on a shared machine does not
    # inflate; two threads: wall time (CPU time would add up both threads' work)
    clock = time.process_time if threads == 1 else time.perf_counter
    times = interleaved_times(steps, repeats, warmup=2, clock=clock)
    return {name: batch * context / statistics.median(t) for name, t in times.items()}


def run() -> dict[str, str]:
    """Return the markdown table ``lm``: characters per second and ratios."""
    before = torch.get_num_threads()
    rows = [
        "| context | threads | book | sdpa | sdpa + RoPE "
        "| torch.nn "
        "| book / torch.nn | sdpa / torch.nn | RoPE / learned |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    try:
        for context in (128, 1024):
            for threads in (1, 2):
                r = _timings(context, threads)
                rows.append(
                    f"| {context} | {threads} | {r['book']:,.0f} | {r['sdpa']:,.0f} | "
                    f"{r['sdpa + RoPE']:,.0f} | {r['torch.nn']:,.0f} | "
                    f"{r['book'] / r['torch.nn']:.2f} | {r['sdpa'] / r['torch.nn']:.2f} | "
                    f"{r['sdpa + RoPE'] / r['sdpa']:.2f} |"
                )
    finally:
        torch.set_num_threads(before)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    note = (
        f"Training characters per second (forward, backward, AdamW), {CHARS:,} characters a "
        f"step, d = {D}, {L} blocks, {H} heads, float32, CPU (book: boolean mask; sdpa: "
        f"is_causal; torch.nn: nn.TransformerEncoderLayer); medians of 9 interleaved repeats "
        f"after 2 warm-up steps, timed by the process's CPU time on one thread and by wall time "
        f"on two; OMP_WAIT_POLICY {os.environ.get('OMP_WAIT_POLICY', 'unset')}; "
        f"torch {torch.__version__}, {os.cpu_count()} logical CPUs, "
        f"load average {load:.1f} at the end of the run."
    )
    return {"lm": note + "\n\n" + "\n".join(rows)}


if __name__ == "__main__":
    print(run()["lm"])
