"""Benchmark: GAM logits by the factorisation against the naive pairwise formula, and the torch
``GeneralizedAttention`` against multi-head attention of the same width.

* ``gam``: ``attnlab.gam_logits`` (``Σ_l A_l Y^{∘l} B (Y^{∘l})ᵀ``, ``O(L (n M² + n² M))``)
  against a vectorised naive version that builds every pairwise feature ``f(y^α_r y^β_t)``
  (an ``(n, n, M, M)`` array, ``O(n² M²)``) and contracts it with the brains; n = 64, M = 32,
  2 brains. The results are compared (largest absolute difference) before timing.
* ``gam_scaling``: the same two against ``n`` (M = 32, 2 brains, power 2). The naive version
  is run only while its feature array, ``n² M² · 8`` bytes, stays within ``NAIVE_CAP_BYTES``;
  it stops there by computation, never by running out of memory. Also writes the figure
  ``src/attnlab/figures/gam_scaling.png`` (package data).
* ``gam_torch``: forward + backward of ``attnlab.nn.GeneralizedAttention``, on its explicit
  path (``need_weights=True``) and its fused path (the default), against
  ``attnlab.nn.MultiHeadAttention`` (or ``torch.nn.MultiheadAttention`` if that is not there),
  float32, on the CPU.

Every comparison is timed side by side in one process, interleaved repeat by repeat, so a
machine shared with other work slows both alike; tables report the best time of the repeats
(the least disturbed by other work) and their ratio. BLAS runs on one thread: OpenBLAS threads
that wait for busy cores distort small matrix products by orders of magnitude.
Run standalone with ``python benchmarks/bench_gam.py``.
"""

from __future__ import annotations

import os

# One BLAS thread (takes effect only if numpy is not imported yet, e.g. when run standalone).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from _timing import interleaved_times  # noqa: E402

from attnlab import gam_logits, signed_power  # noqa: E402
from attnlab.nn import GeneralizedAttention  # noqa: E402

M, N_BRAINS = 32, 2
NAIVE_CAP_BYTES = 512 * 2**20  # the naive (n, n, M, M) float64 feature array may use 512 MiB
# Package data: chapter 08 shows it through attnlab.resources.figure_png, the Performance page
# includes the same file.
FIGURE = Path(__file__).resolve().parents[1] / "src" / "attnlab" / "figures" / "gam_scaling.png"


def naive_gam_logits(y: np.ndarray, b: np.ndarray, n1: float = 1, coeffs=None) -> np.ndarray:
    """Pairwise GAM logits: every feature ``f(y^α_r y^β_t)`` built, then contracted with B.

    ``y (n, M)``, ``b (N_B, M, M)`` → ``(N_B, n, n)``; memory ``n² M²`` floats.
    """
    n, m = y.shape
    prod = y[:, None, :, None] * y[None, :, None, :]  # (n, n, M, M): y^α_r y^β_t
    if coeffs is None and float(n1).is_integer():
        feat = np.power(prod, int(n1), out=prod)  # in place: one (n, n, M, M) array
    elif coeffs is None:
        feat = signed_power(prod, n1)
    else:
        feat = sum(a * prod**k for k, a in enumerate(coeffs, start=1))
    eps = feat.reshape(n * n, m * m) @ b.reshape(b.shape[0], m * m).T  # (n², N_B)
    return eps.T.reshape(b.shape[0], n, n)


def _best_times(steps: dict[str, Callable[[], object]], repeats: int, warmup: int = 1):
    """Best (smallest) seconds per step over interleaved repeats."""
    times = interleaved_times(steps, repeats, warmup=warmup)
    return {name: min(t) for name, t in times.items()}


def _fmt(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms" if seconds < 1 else f"{seconds:.2f} s"


def table_gam(repeats: int = 15) -> str:
    """Factorised against naive at n = 64, M = 32, 2 brains."""
    rng = np.random.default_rng(0)
    n = 64
    y = rng.normal(size=(n, M))
    b = rng.normal(size=(N_BRAINS, M, M)) / M
    cases = [
        ("power n1 = 2", {"n1": 2}),
        ("power n1 = 1.5 (signed)", {"n1": 1.5}),
        ("polynomial, L = 3", {"coeffs": (1.0, 0.5, 1 / 6)}),
    ]
    lines = [
        "| f (n = 64, M = 32, N_B = 2) | factorised | naive | naive / factorised "
        "| max abs difference |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, kw in cases:
        if "coeffs" in kw:
            fact = lambda kw=kw: gam_logits(y, b, f="poly", coeffs=kw["coeffs"])  # noqa: E731
        else:
            fact = lambda kw=kw: gam_logits(y, b, n1=kw["n1"])  # noqa: E731
        naive = lambda kw=kw: naive_gam_logits(y, b, **kw)  # noqa: E731
        diff = float(np.max(np.abs(fact() - naive())))
        t = _best_times({"fact": fact, "naive": naive}, repeats)
        lines.append(
            f"| {label} | {_fmt(t['fact'])} | {_fmt(t['naive'])} | "
            f"{t['naive'] / t['fact']:.0f}× | {diff:.1e} |"
        )
    return "\n".join(lines)


def scaling(ns=(8, 16, 32, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048)):
    """Best seconds of both versions against n (power 2); naive is None above the cap."""
    rng = np.random.default_rng(1)
    b = rng.normal(size=(N_BRAINS, M, M)) / M
    rows = []
    for n in ns:
        y = rng.normal(size=(n, M))
        repeats = 7 if n <= 256 else 3
        steps: dict[str, Callable[[], object]] = {"fact": lambda y=y: gam_logits(y, b, n1=2)}
        naive_bytes = n * n * M * M * 8
        if naive_bytes <= NAIVE_CAP_BYTES:
            steps["naive"] = lambda y=y: naive_gam_logits(y, b, n1=2)
            repeats = 3 if n >= 128 else repeats
        t = _best_times(steps, repeats)
        rows.append((n, t["fact"], t.get("naive"), naive_bytes))
    return rows


def plot_scaling(rows, path: Path = FIGURE) -> None:
    """Write the log-log figure of time against n."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from attnlab.plot import use_book_style

    use_book_style()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    ns = [r[0] for r in rows]
    ax.loglog(
        ns, [r[1] for r in rows], "o-", label=r"factorised $Y^{\circ 2} B\, (Y^{\circ 2})^\top$"
    )
    naive = [(r[0], r[2]) for r in rows if r[2] is not None]
    ax.loglog(*zip(*naive, strict=True), "s-", label=r"naive: all $f(y^\alpha_r y^\beta_t)$")
    stop = max(n for n, _ in naive)
    ax.axvline(stop, color="grey", ls=":", lw=1)
    ax.text(
        stop * 1.08,
        min(r[1] for r in rows) * 2,
        f"naive stops: $n^2M^2\\cdot 8$ B\nwould exceed {NAIVE_CAP_BYTES // 2**20} MiB",
        fontsize=8,
        color="grey",
    )
    ax.set_xlabel("sequence length n")
    ax.set_ylabel("time per call (s)")
    ax.set_title(f"GAM logits, M = {M}, {N_BRAINS} brains, power 2 (numpy, 1 CPU process)")
    ax.legend(loc="upper left")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)


def table_scaling(rows) -> str:
    lines = [
        "| n | factorised | naive | naive / factorised | naive feature array |",
        "|---:|---:|---:|---:|---:|",
    ]
    for n, fact, naive, nbytes in rows:
        naive_s = "—" if naive is None else _fmt(naive)
        ratio = "—" if naive is None else f"{naive / fact:.0f}×"
        mem = f"{nbytes / 2**20:.0f} MiB" + ("" if naive is not None else " (over cap)")
        lines.append(f"| {n} | {_fmt(fact)} | {naive_s} | {ratio} | {mem} |")
    return "\n".join(lines)


def _reference_mha(d: int, h: int):
    """attnlab.nn.MultiHeadAttention if it exists, else torch.nn.MultiheadAttention."""
    try:
        from attnlab.nn import MultiHeadAttention  # written for chapter 05
    except ImportError:
        mha = torch.nn.MultiheadAttention(d, h, batch_first=True)
        return "torch.nn.MultiheadAttention", lambda x: mha(x, x, x, need_weights=False)[0], mha
    mha = MultiHeadAttention(d, h)

    def call(x):
        out = mha(x)
        return out[0] if isinstance(out, tuple) else out

    return "attnlab.nn.MultiHeadAttention", call, mha


def table_torch(repeats: int = 15) -> str:
    """Forward + backward, batch 8, n = 128, d = 128, h = 4, float32."""
    torch.manual_seed(0)
    batch, n, d, h = 8, 128, 128, 4
    x = torch.randn(batch, n, d, requires_grad=True)
    name, mha_call, mha = _reference_mha(d, h)
    modules = {
        "GeneralizedAttention, N_B = 1, n1 = 1": GeneralizedAttention(d, h),
        "GeneralizedAttention, N_B = 2, n1 = 2": GeneralizedAttention(d, h, n_brains=2, n1=2),
        "GeneralizedAttention, N_B = 2, poly L = 3": GeneralizedAttention(
            d, h, n_brains=2, f="poly", degree=3
        ),
    }
    steps: dict[str, Callable[[], object]] = {name: lambda: mha_call(x).sum().backward()}
    params = {name: sum(p.numel() for p in mha.parameters())}
    for label, module in modules.items():
        explicit, fused = f"{label}, explicit", f"{label}, fused"
        steps[explicit] = lambda module=module: module(x, need_weights=True)[0].sum().backward()
        steps[fused] = lambda module=module: module(x).sum().backward()
        params[explicit] = params[fused] = sum(p.numel() for p in module.parameters())
    t = _best_times(steps, repeats, warmup=2)
    lines = [
        f"| module (batch 8, n = {n}, d = {d}, h = {h}, forward + backward) | time "
        f"| / {name} | parameters |",
        "|---|---:|---:|---:|",
    ]
    for label in steps:
        lines.append(
            f"| {label} | {_fmt(t[label])} | {t[label] / t[name]:.2f}× | {params[label]:,} |"
        )
    return "\n".join(lines)


def run() -> dict[str, str]:
    """Return the markdown tables ``gam``, ``gam_scaling`` and ``gam_torch``; write the figure."""
    default_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        rows = scaling()
        plot_scaling(rows)
        return {
            "gam": table_gam(),
            "gam_scaling": table_scaling(rows),
            "gam_torch": table_torch(),
        }
    finally:
        torch.set_num_threads(default_threads)  # later benchmarks get the usual threads


if __name__ == "__main__":
    for table_name, table in run().items():
        print(f"## {table_name}\n\n{table}\n")
