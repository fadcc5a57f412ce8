"""The study of chapter 10: GAM against standard attention on small synthetic tasks.

Pandya's GAM paper ends by promising a comparison with standard attention that, as far as we
know, was never published. This module runs a small, honest version of it on a CPU:

- :class:`StudyModel`: a pre-norm transformer encoder (token embedding, optional learned
  absolute positions, ``layers`` blocks of self-attention + MLP, a linear read-out per
  position) whose self-attention is chosen by name from :data:`ATTENTIONS`, with or without
  relative positions (Shaw et al. for the query–key attentions, GAM's own relative branch for
  GAM; a model with relative positions gets *no* absolute positions, as GAM assumes);
- :func:`run_one`: train one (task, attention, positions, seed) configuration and measure it;
- :func:`run_grid`: run a list of configurations and append one CSV row per finished run,
  resuming from the CSV (finished rows are kept and not repeated);
- :func:`summarize`, :func:`summary_markdown`, :func:`plot_curves`, :func:`plot_accuracy`:
  the results table (mean ± std over seeds) and figures;
- :func:`time_attentions`, :func:`timing_markdown`: step times of all variants measured side by
  side in one process (the per-run times in the CSV are only as steady as the machine).

Command line (writes ``results.csv``, ``summary.md``, ``timing.md`` and PNG figures into
``--out``)::

    python -m attnlab.study --grid full --out book/study
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn
from tqdm import tqdm

from attnlab.gam import gam_init_std
from attnlab.nn import (
    GAMRelativeAttention,
    GeneralizedAttention,
    LuongAttention,
    MultiHeadAttention,
    ShawRelativeAttention,
)
from attnlab.nn.attention import masked_softmax
from attnlab.positions import relative_position_index
from attnlab.tasks import IGNORE, TASKS, TokenTask, make_task
from attnlab.train import count_parameters, train


@dataclass(frozen=True)
class AttentionSpec:
    """One attention variant of the study.

    Attributes
    ----------
    kind : str
        ``"sdpa"``, ``"luong"`` or ``"gam"``: scaled dot-product (multi-head), Luong's
        general score used as self-attention, or GAM.
    f : str
        ``"power"`` or ``"poly"``: GAM's feature function (ignored by the other kinds).
    n1 : float
        GAM's power.
    degree : int or None
        GAM's polynomial degree ``L``.
    n_brains : int
        GAM's brains per head ``N_B``.
    """

    kind: str
    f: str = "power"
    n1: float = 1.0
    degree: int | None = None
    n_brains: int = 1


#: The attention variants by name. ``"gam-p1"`` (power 1, one brain) computes the same
#: function class as ``"luong"``: a sanity-check pair, not evidence about GAM.
ATTENTIONS: dict[str, AttentionSpec] = {
    "sdpa": AttentionSpec("sdpa"),
    "luong": AttentionSpec("luong"),
    "gam-p1": AttentionSpec("gam", n1=1.0),
    "gam-p1-b2": AttentionSpec("gam", n1=1.0, n_brains=2),
    "gam-p2": AttentionSpec("gam", n1=2.0),
    "gam-p2-b2": AttentionSpec("gam", n1=2.0, n_brains=2),
    "gam-poly": AttentionSpec("gam", f="poly", degree=2),
    "gam-poly-b2": AttentionSpec("gam", f="poly", degree=2, n_brains=2),
}

#: How positions enter the model. ``"abs"`` adds learned absolute positions to the tokens,
#: ``"rel"`` gives relative positions only.
POSITIONS = ("abs", "rel")


class LuongSelfAttention(nn.Module):
    """Luong's general score as multi-head self-attention, optionally with Shaw's tables.

    Head ``a`` scores ``e_ij = x_i W_a (x_j + a^K_ij)ᵀ`` with a full ``W_a (d, d)`` (one
    :class:`attnlab.nn.luong.LuongAttention` ``"general"`` per head; no ``1/sqrt`` factor, as in
    Luong et al.), mixes its value slice ``v_j + a^V_ij`` (width ``d / h``), and the heads are
    concatenated and projected. ``W_a`` starts with normal entries of standard deviation
    :func:`attnlab.gam.gam_init_std` ``(d)``, the same as GAM's ``B``, so that ``"luong"`` and
    ``"gam-p1"`` differ only in the random draw. Without ``rel_k`` there are no tables.

    Parameters
    ----------
    d : int
        Model width.
    h : int
        Heads; must divide ``d``.
    rel_k : int, optional
        Clipping distance of the relative tables (``None``: no relative positions).

    Shapes
    ------
    ``x (batch, s, d)`` → ``(batch, s, d)``.

    Examples
    --------
    >>> import torch
    >>> from attnlab.study import LuongSelfAttention
    >>> _ = torch.manual_seed(0)
    >>> tuple(LuongSelfAttention(8, 2, rel_k=3)(torch.randn(2, 5, 8)).shape)
    (2, 5, 8)
    """

    def __init__(self, d: int, h: int, rel_k: int | None = None) -> None:
        super().__init__()
        if d < 1 or h < 1 or d % h:
            raise ValueError(f"h must be a positive divisor of d: got d={d}, h={h}")
        self.d, self.h, self.rel_k = d, h, rel_k
        self.heads = nn.ModuleList(LuongAttention("general", d, d) for _ in range(h))
        for head in self.heads:
            nn.init.normal_(head.w.weight, std=gam_init_std(d))
        self.value = nn.Linear(d, d)
        self.out_proj = nn.Linear(d, d)
        if rel_k is not None:
            self.rel_k_table = nn.Embedding(2 * rel_k + 1, d)
            self.rel_v_table = nn.Embedding(2 * rel_k + 1, d // h)
            for table in (self.rel_k_table, self.rel_v_table):
                nn.init.normal_(table.weight, std=(d // h) ** -0.5)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        if x.dim() != 3 or x.shape[-1] != self.d:
            raise ValueError(f"x must have shape (batch, s, {self.d}), got {tuple(x.shape)}")
        batch, s, _ = x.shape
        d_v = self.d // self.h
        v = self.value(x).reshape(batch, s, self.h, d_v)
        if self.rel_k is not None:
            index = torch.as_tensor(relative_position_index(s, self.rel_k))
            a_k, a_v = self.rel_k_table(index), self.rel_v_table(index)  # (s, s, d), (s, s, d_v)
        outputs = []
        for a, head in enumerate(self.heads):
            logits = head.scores(x, x)  # (batch, s, s): x_i · (W_a x_j)
            if self.rel_k is not None:
                logits = logits + torch.einsum("bid,ijd->bij", x, head.w(a_k))
            weights = masked_softmax(logits, mask)
            z = weights @ v[:, :, a]
            if self.rel_k is not None:
                z = z + torch.einsum("bij,ijd->bid", weights, a_v)
            outputs.append(z)
        return self.out_proj(torch.cat(outputs, dim=-1))


class SelfAttentionSlot(nn.Module):
    """Adapter: any of the book's attention modules as ``forward(x, mask=None) -> (batch, s, d)``.

    The modules of ``attnlab.nn`` return ``(out, weights)`` (or ``out`` only, for
    :class:`~attnlab.nn.multihead.MultiHeadAttention` without ``need_weights``); the slot
    keeps ``out``.

    Shapes
    ------
    ``x (batch, s, d)`` → ``(batch, s, d)``.
    """

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        out = self.inner(x, mask=mask)
        return out[0] if isinstance(out, tuple) else out


def make_attention(
    name: str, d: int, h: int, n: int, relative: bool, shaw_k: int = 8
) -> SelfAttentionSlot:
    """Build the self-attention named ``name`` (a key of :data:`ATTENTIONS`).

    Parameters
    ----------
    name : str
        The variant.
    d, h : int
        Model width and heads.
    n : int
        Sequence length (GAM's relative branch is built for one length).
    relative : bool
        Add relative positions: Shaw's tables (``"sdpa"``, ``"luong"``) or GAM's relative
        branch (linear combination, ``c1 = 0.5``).
    shaw_k : int
        Clipping distance of Shaw's tables.

    Shapes
    ------
    The slot maps ``(batch, n, d)`` → ``(batch, n, d)``.

    Examples
    --------
    >>> import torch
    >>> from attnlab.study import make_attention
    >>> slot = make_attention("gam-p2-b2", d=8, h=2, n=6, relative=True)
    >>> tuple(slot(torch.randn(3, 6, 8)).shape)
    (3, 6, 8)
    """
    if name not in ATTENTIONS:
        raise ValueError(f"unknown attention {name!r}; choose one of {', '.join(ATTENTIONS)}")
    spec = ATTENTIONS[name]
    if spec.kind == "sdpa":
        inner: nn.Module = (
            ShawRelativeAttention(d, h, shaw_k, bias=True) if relative else MultiHeadAttention(d, h)
        )
    elif spec.kind == "luong":
        inner = LuongSelfAttention(d, h, rel_k=shaw_k if relative else None)
    else:
        kwargs = dict(n_brains=spec.n_brains, f=spec.f, n1=spec.n1, degree=spec.degree)
        if relative:
            inner = GAMRelativeAttention(d, n, h, combine="linear", c1=0.5, **kwargs)
        else:
            inner = GeneralizedAttention(d, h, **kwargs)
    return SelfAttentionSlot(inner)


class Block(nn.Module):
    """Pre-norm transformer block: ``x + attn(LN(x))``, then ``x + MLP(LN(x))``.

    Shapes
    ------
    ``x (batch, s, d)`` → ``(batch, s, d)``; the MLP is ``d → mlp_ratio·d → d`` (GELU).
    """

    def __init__(self, attention: nn.Module, d: int, mlp_ratio: int = 2) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attention = attention
        self.mlp = nn.Sequential(
            nn.Linear(d, mlp_ratio * d), nn.GELU(), nn.Linear(mlp_ratio * d, d)
        )

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        x = x + self.attention(self.norm1(x), mask=mask)
        return x + self.mlp(self.norm2(x))


class StudyModel(nn.Module):
    """A small transformer encoder that labels every position, with a swappable attention.

    Parameters
    ----------
    vocab_in, vocab_out : int
        Input token ids and label ids.
    n : int
        Sequence length.
    attention : str
        A key of :data:`ATTENTIONS`.
    positions : str
        ``"abs"``: learned absolute position vectors are added to the token embeddings;
        ``"rel"``: no absolute positions, relative ones inside every attention layer.
    d, h, layers : int
        Width, heads, blocks.

    Shapes
    ------
    ``tokens (batch, n)`` integers → ``logits (batch, n, vocab_out)``.

    Examples
    --------
    >>> import torch
    >>> from attnlab.study import StudyModel
    >>> _ = torch.manual_seed(0)
    >>> model = StudyModel(10, 7, n=5, attention="gam-poly", positions="rel", d=8, h=2)
    >>> tuple(model(torch.randint(0, 10, (3, 5))).shape)
    (3, 5, 7)
    """

    def __init__(
        self,
        vocab_in: int,
        vocab_out: int,
        n: int,
        attention: str,
        positions: str = "abs",
        d: int = 32,
        h: int = 2,
        layers: int = 1,
    ) -> None:
        super().__init__()
        if positions not in POSITIONS:
            raise ValueError(f"positions must be 'abs' or 'rel', got {positions!r}")
        self.n, self.positions = n, positions
        self.embed = nn.Embedding(vocab_in, d)
        self.pos = nn.Embedding(n, d) if positions == "abs" else None
        relative = positions == "rel"
        self.blocks = nn.ModuleList(
            Block(make_attention(attention, d, h, n, relative), d) for _ in range(layers)
        )
        self.norm = nn.LayerNorm(d)
        self.readout = nn.Linear(d, vocab_out)

    def forward(self, tokens: Tensor) -> Tensor:
        if tokens.dim() != 2 or tokens.shape[1] != self.n:
            raise ValueError(f"tokens must have shape (batch, {self.n}), got {tuple(tokens.shape)}")
        x = self.embed(tokens)
        if self.pos is not None:
            x = x + self.pos.weight
        for block in self.blocks:
            x = block(x)
        return self.readout(self.norm(x))


def token_cross_entropy(logits: Tensor, targets: Tensor) -> Tensor:
    """Mean cross-entropy over the labelled positions (targets that are not ``IGNORE``).

    Shapes
    ------
    ``logits (batch, n, vocab_out)``, ``targets (batch, n)`` → scalar.
    """
    return nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=IGNORE
    )


def task_loss(model: nn.Module, batch: tuple[Tensor, Tensor]) -> Tensor:
    """Mean cross-entropy of ``model`` over the labelled positions of ``(inputs, targets)``.

    Shapes
    ------
    ``inputs (batch, n)``, ``targets (batch, n)`` → scalar.
    """
    inputs, targets = batch
    return token_cross_entropy(model(inputs), targets)


@torch.no_grad()
def evaluate(model: nn.Module, task: TokenTask) -> tuple[float, float]:
    """``(loss, accuracy)`` of ``model`` on ``task``, over the labelled positions only."""
    model.eval()
    inputs, targets = torch.as_tensor(task.inputs), torch.as_tensor(task.targets)
    logits = model(inputs)
    loss = token_cross_entropy(logits, targets)
    labelled = targets != IGNORE
    correct = (logits.argmax(-1) == targets) & labelled
    return float(loss), float(correct.sum() / labelled.sum())


@dataclass(frozen=True)
class RunConfig:
    """One run of the study: what to train, how long, with which seed."""

    task: str
    attention: str
    positions: str
    seed: int
    steps: int = 500
    batch_size: int = 32
    lr: float = 3e-3
    d: int = 32
    h: int = 2
    layers: int = 1

    def key(self) -> tuple[str, ...]:
        """Identity of the run in a results CSV (every field, as text)."""
        return tuple(str(getattr(self, f.name)) for f in fields(self))


#: The columns of a results CSV that describe a run's configuration.
CONFIG_COLUMNS = tuple(f.name for f in fields(RunConfig))
RESULT_COLUMNS = (
    "test_accuracy",
    "test_loss",
    "final_train_loss",
    "parameters",
    "ms_per_step",
    "seconds",
    "curve",
)
COLUMNS = CONFIG_COLUMNS + RESULT_COLUMNS
#: Points in the stored learning curve (mean training loss over equal windows of steps).
CURVE_POINTS = 20
#: Labelled examples in each run's test set (generated with a seed no training batch uses).
TEST_SIZE = 1000


def _curve(history: Sequence[float], points: int = CURVE_POINTS) -> list[float]:
    """Mean loss over ``points`` equal windows of the step history."""
    chunks = np.array_split(np.asarray(history, dtype=float), min(points, len(history)))
    return [float(c.mean()) for c in chunks]


def run_one(config: RunConfig, chunk: int = 50) -> dict[str, str]:
    """Train one configuration from scratch and measure it; return a CSV row.

    Training sees fresh batches (generated on the fly, ``chunk`` batches per "epoch" of
    :func:`attnlab.train.train`, seeded by the run's seed and the epoch); the test set of
    :data:`TEST_SIZE` examples uses seed ``10**6 + seed``, which no training batch uses.
    The step time is the wall time of training (batch generation included) over the steps.

    Returns
    -------
    dict
        The configuration and ``test_accuracy``, ``test_loss``, ``final_train_loss`` (mean
        of the last window of the curve), ``parameters``, ``ms_per_step``, ``seconds`` and
        ``curve`` (:data:`CURVE_POINTS` losses separated by spaces).
    """
    if config.task not in TASKS:
        raise ValueError(f"unknown task {config.task!r}; choose one of {', '.join(TASKS)}")
    if config.steps < 1 or config.steps % chunk and config.steps > chunk:
        raise ValueError(f"steps must be a multiple of {chunk} (or smaller), got {config.steps}")
    per_epoch = min(chunk, config.steps)
    probe = make_task(config.task, 1, seed=0)
    torch.manual_seed(config.seed)
    model = StudyModel(
        probe.vocab_in, probe.vocab_out, probe.n, config.attention, config.positions,
        d=config.d, h=config.h, layers=config.layers,
    )  # fmt: skip

    def batches(epoch: int) -> list[tuple[Tensor, Tensor]]:
        data = make_task(
            config.task, per_epoch * config.batch_size, seed=1000 * config.seed + epoch + 1
        )
        inputs, targets = torch.as_tensor(data.inputs), torch.as_tensor(data.targets)
        return [
            (inputs[i : i + config.batch_size], targets[i : i + config.batch_size])
            for i in range(0, len(data), config.batch_size)
        ]

    start = time.perf_counter()
    history = train(
        model, batches, task_loss, epochs=config.steps // per_epoch, lr=config.lr,
        seed=config.seed, progress=False,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    test_loss, test_acc = evaluate(
        model, make_task(config.task, TEST_SIZE, seed=10**6 + config.seed)
    )
    curve = _curve(history)
    row = {k: str(v) for k, v in asdict(config).items()}
    row.update(
        test_accuracy=f"{test_acc:.4f}",
        test_loss=f"{test_loss:.4f}",
        final_train_loss=f"{curve[-1]:.4f}",
        parameters=str(count_parameters(model)),
        ms_per_step=f"{1000 * seconds / len(history):.3f}",
        seconds=f"{seconds:.2f}",
        curve=" ".join(f"{c:.4f}" for c in curve),
    )
    return row


def grid(name: str = "reduced") -> list[RunConfig]:
    """The configurations of a named grid.

    ``"full"``: every task × every attention × both position modes × seeds 0, 1, 2
    (144 runs of 500 steps). ``"reduced"``: the notebook's grid, every task × three
    attentions (``sdpa``, ``gam-p1``, ``gam-p2``) × both position modes × seeds 0, 1
    (36 runs of 150 steps). Both use one block of width 32 with 2 heads and batches of 32.

    Examples
    --------
    >>> from attnlab.study import grid
    >>> len(grid("full")), len(grid("reduced"))
    (144, 36)
    """
    if name == "full":
        return [
            RunConfig(task, attention, positions, seed)
            for task in TASKS
            for attention in ATTENTIONS
            for positions in POSITIONS
            for seed in (0, 1, 2)
        ]
    if name == "reduced":
        return [
            RunConfig(task, attention, positions, seed, steps=150)
            for task in TASKS
            for attention in ("sdpa", "gam-p1", "gam-p2")
            for positions in POSITIONS
            for seed in (0, 1)
        ]
    raise ValueError(f"unknown grid {name!r}; choose 'full' or 'reduced'")


def read_results(path: str | os.PathLike) -> list[dict[str, str]]:
    """Read the finished rows of a results CSV, repairing an interrupted last line.

    A run that was killed while its row was being written can leave a last line without its
    newline; that fragment is cut off the file (so the next row starts on a fresh line) and
    not returned. Rows with a missing field are dropped likewise. A missing file gives ``[]``.

    Raises
    ------
    ValueError
        If the header is not ``COLUMNS`` (a CSV of some other layout).
    """
    path = Path(path)
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    if text and not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
        path.write_text(text, encoding="utf-8")
    if not text:
        return []
    reader = csv.DictReader(text.splitlines())
    if tuple(reader.fieldnames or ()) != COLUMNS:
        raise ValueError(f"{path} has columns {reader.fieldnames}, expected {list(COLUMNS)}")
    rows = [row for row in reader if all(row.get(c) not in (None, "") for c in COLUMNS)]
    return rows


def run_grid(
    configs: Iterable[RunConfig],
    out_csv: str | os.PathLike,
    *,
    progress: bool = True,
    runner: Callable[[RunConfig], dict[str, str]] = run_one,
) -> list[dict[str, str]]:
    """Run every configuration that ``out_csv`` does not hold yet; append one row per run.

    Each finished run is appended (and flushed to disk) at once, so an interrupted grid loses
    at most the run in progress; calling again with the same configurations skips the
    finished ones. Returns the rows of ``configs`` in their order.
    """
    configs = list(configs)
    out_csv = Path(out_csv)
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    done = {tuple(row[c] for c in CONFIG_COLUMNS): row for row in read_results(out_csv)}
    if not out_csv.exists() or out_csv.stat().st_size == 0:
        with out_csv.open("w", newline="", encoding="utf-8") as handle:
            csv.writer(handle, lineterminator="\n").writerow(COLUMNS)
    todo = [c for c in configs if c.key() not in done]
    bar = tqdm(todo, desc="study", unit="run", disable=not progress)
    for config in bar:
        bar.set_postfix_str(f"{config.task}/{config.attention}/{config.positions}/{config.seed}")
        row = runner(config)
        with out_csv.open("a", newline="", encoding="utf-8") as handle:
            csv.DictWriter(handle, COLUMNS, lineterminator="\n").writerow(row)
            handle.flush()
            os.fsync(handle.fileno())
        done[config.key()] = row
    bar.close()
    return [done[c.key()] for c in configs]


def _mean_std(values: Sequence[float]) -> tuple[float, float]:
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def summarize(rows: Iterable[dict[str, str]]) -> list[dict[str, object]]:
    """Group rows by (task, attention, positions) and average over seeds.

    Returns one dict per group, in first-seen order, with ``seeds``, ``acc_mean``,
    ``acc_std``, ``loss_mean``, ``loss_std`` (sample standard deviations; 0 for one seed),
    ``parameters`` and ``ms_per_step`` (mean).
    """
    groups: dict[tuple[str, str, str], list[dict[str, str]]] = {}
    for row in rows:
        groups.setdefault((row["task"], row["attention"], row["positions"]), []).append(row)
    summary = []
    for (task, attention, positions), members in groups.items():
        acc_mean, acc_std = _mean_std([float(r["test_accuracy"]) for r in members])
        loss_mean, loss_std = _mean_std([float(r["test_loss"]) for r in members])
        summary.append(
            dict(
                task=task, attention=attention, positions=positions, seeds=len(members),
                acc_mean=acc_mean, acc_std=acc_std, loss_mean=loss_mean, loss_std=loss_std,
                parameters=int(members[0]["parameters"]),
                ms_per_step=statistics.fmean(float(r["ms_per_step"]) for r in members),
            )
        )  # fmt: skip
    return summary


def summary_markdown(rows: Iterable[dict[str, str]]) -> str:
    """The results table as markdown: accuracy and loss as mean ± std over seeds."""
    lines = [
        "| task | attention | positions | seeds | test accuracy | test loss | parameters "
        "| ms / step |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in summarize(rows):
        lines.append(
            f"| {s['task']} | {s['attention']} | {s['positions']} | {s['seeds']} "
            f"| {s['acc_mean']:.3f} ± {s['acc_std']:.3f} | {s['loss_mean']:.3f} ± "
            f"{s['loss_std']:.3f} | {s['parameters']} | {s['ms_per_step']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def accuracy_markdown(rows: Iterable[dict[str, str]]) -> str:
    """Test accuracy as compact tables: one per position mode, attentions × tasks.

    Each cell is the mean ± sample standard deviation over seeds; ``—`` marks a combination
    the rows do not contain.

    Examples
    --------
    >>> rows = [
    ...     {"task": "shift", "attention": "sdpa", "positions": "abs", "test_accuracy": a,
    ...      "test_loss": "0.1", "parameters": "10", "ms_per_step": "1"}
    ...     for a in ("0.5", "0.7")
    ... ]
    >>> print(accuracy_markdown(rows))
    **Absolute positions** (test accuracy, mean ± std over 2 seeds)
    <BLANKLINE>
    | attention | shift |
    |---|---|
    | sdpa | 0.600 ± 0.141 |
    <BLANKLINE>
    """
    summary = summarize(rows)
    tasks = list(dict.fromkeys(str(g["task"]) for g in summary))
    titles = {"abs": "Absolute positions", "rel": "Relative positions only"}
    blocks = []
    for positions in dict.fromkeys(str(g["positions"]) for g in summary):
        groups = [g for g in summary if g["positions"] == positions]
        seeds = sorted({int(g["seeds"]) for g in groups})
        seed_text = str(seeds[0]) if len(seeds) == 1 else f"{seeds[0]} to {seeds[-1]}"
        lines = [
            f"**{titles.get(positions, positions)}** (test accuracy, mean ± std over "
            f"{seed_text} seeds)",
            "",
            "| attention | " + " | ".join(tasks) + " |",
            "|---|" + "---|" * len(tasks),
        ]
        for attention in dict.fromkeys(str(g["attention"]) for g in groups):
            cells = []
            for task in tasks:
                match = [g for g in groups if g["attention"] == attention and g["task"] == task]
                cells.append(
                    f"{match[0]['acc_mean']:.3f} ± {match[0]['acc_std']:.3f}" if match else "—"
                )
            lines.append(f"| {attention} | " + " | ".join(cells) + " |")
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)


def plot_curves(rows: Iterable[dict[str, str]], positions: str = "abs"):
    """One panel per task: the mean training-loss curve of each attention over its seeds.

    Returns the matplotlib figure (matplotlib is imported here, not at module import).
    """
    import matplotlib.pyplot as plt

    rows = [r for r in rows if r["positions"] == positions]
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    fig, axes = plt.subplots(1, len(tasks), figsize=(3.4 * len(tasks), 3.2), squeeze=False)
    for ax, task in zip(axes[0], tasks, strict=True):
        for attention in dict.fromkeys(r["attention"] for r in rows if r["task"] == task):
            members = [r for r in rows if r["task"] == task and r["attention"] == attention]
            curves = np.array([[float(v) for v in r["curve"].split()] for r in members])
            steps = int(members[0]["steps"])
            x = (np.arange(curves.shape[1]) + 0.5) * steps / curves.shape[1]
            style = "--" if attention == "luong" else "-"
            ax.plot(x, curves.mean(axis=0), style, label=attention)
        ax.set_title(f"{task} ({positions} positions)")
        ax.set_xlabel("training step")
        ax.set_yscale("log")
    axes[0, 0].set_ylabel("training loss (mean over seeds)")
    axes[0, -1].legend(fontsize=7, frameon=False)
    fig.tight_layout()
    return fig


def plot_accuracy(rows: Iterable[dict[str, str]]):
    """Test accuracy of every run (dots) and the seed mean (bar), per task and position mode."""
    import matplotlib.pyplot as plt

    rows = list(rows)
    summary = summarize(rows)
    tasks = list(dict.fromkeys(s["task"] for s in summary))
    attentions = list(dict.fromkeys(s["attention"] for s in summary))
    fig, axes = plt.subplots(
        1, len(tasks), figsize=(3.4 * len(tasks), 3.4), squeeze=False, sharey=True
    )
    width = 0.38
    for ax, task in zip(axes[0], tasks, strict=True):
        for j, positions in enumerate(POSITIONS):
            xs = np.arange(len(attentions)) + (j - 0.5) * width
            means = []
            for i, attention in enumerate(attentions):
                accs = [
                    float(r["test_accuracy"])
                    for r in rows
                    if (r["task"], r["attention"], r["positions"]) == (task, attention, positions)
                ]
                means.append(np.mean(accs) if accs else np.nan)
                ax.plot([xs[i]] * len(accs), accs, "k.", markersize=3)
            ax.bar(xs, means, width, label=f"{positions} positions", alpha=0.7)
        ax.set_xticks(np.arange(len(attentions)), attentions, rotation=60, fontsize=7)
        ax.set_title(task)
        ax.set_ylim(0, 1.02)
    axes[0, 0].set_ylabel("test accuracy")
    axes[0, 0].legend(fontsize=7, frameon=True, loc="lower left")
    fig.tight_layout()
    return fig


def time_attentions(
    names: Sequence[str] | None = None,
    positions: str = "abs",
    *,
    n: int = 16,
    d: int = 32,
    h: int = 2,
    batch_size: int = 32,
    rounds: int = 30,
    seed: int = 0,
) -> dict[str, float]:
    """Median milliseconds of one training step of :class:`StudyModel` per attention.

    The models are timed *side by side*: each round runs one Adam step (forward, backward,
    update) of every model, in a fresh random order, on the same random batch, so a machine
    that is busy with other work slows all of them alike and the ratios stay meaningful.

    Returns
    -------
    dict
        Attention name → median milliseconds per step over ``rounds`` rounds.

    Examples
    --------
    >>> from attnlab.study import time_attentions
    >>> ms = time_attentions(["sdpa", "gam-p1"], rounds=2, n=4, d=8)
    >>> sorted(ms), all(v > 0 for v in ms.values())
    (['gam-p1', 'sdpa'], True)
    """
    names = list(ATTENTIONS) if names is None else list(names)
    torch.manual_seed(seed)
    models = {name: StudyModel(10, 10, n, name, positions, d=d, h=h) for name in names}
    optimisers = {name: torch.optim.Adam(m.parameters(), lr=1e-3) for name, m in models.items()}
    inputs = torch.randint(0, 10, (batch_size, n))
    targets = torch.randint(0, 10, (batch_size, n))
    order = np.random.default_rng(seed)
    times: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(rounds + 1):  # round 0 warms up and is not recorded
        for i in order.permutation(len(names)):
            name = names[i]
            start = time.perf_counter()
            loss = task_loss(models[name], (inputs, targets))
            optimisers[name].zero_grad()
            loss.backward()
            optimisers[name].step()
            times[name].append(time.perf_counter() - start)
    return {name: 1000 * statistics.median(t[1:]) for name, t in times.items()}


def timing_markdown(rounds: int = 30) -> str:
    """Side-by-side step times of every attention, both position modes, relative to ``sdpa``."""
    lines = [
        "| attention | ms / step (abs) | ratio to sdpa (abs) | ms / step (rel) | "
        "ratio to sdpa (rel) |",
        "|---|---|---|---|---|",
    ]
    ms = {positions: time_attentions(positions=positions, rounds=rounds) for positions in POSITIONS}
    for name in ATTENTIONS:
        cells = []
        for positions in POSITIONS:
            cells += [
                f"{ms[positions][name]:.2f}",
                f"{ms[positions][name] / ms[positions]['sdpa']:.2f}",
            ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_report(rows: Sequence[dict[str, str]], out: str | os.PathLike) -> list[Path]:
    """Write ``summary.md``, ``accuracy.png`` and ``curves_abs.png`` / ``curves_rel.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from attnlab.plot import use_book_style

    use_book_style()
    out = Path(out)
    written = [out / "summary.md"]
    written[0].write_text(
        accuracy_markdown(rows) + "\n**Every configuration**\n\n" + summary_markdown(rows),
        encoding="utf-8",
    )
    figures = {"accuracy.png": plot_accuracy(rows)}
    for positions in POSITIONS:
        figures[f"curves_{positions}.png"] = plot_curves(rows, positions)
    for name, fig in figures.items():
        fig.savefig(out / name)
        plt.close(fig)
        written.append(out / name)
    return written


def main(argv: Sequence[str] | None = None) -> None:
    """Command line: run a grid (resuming from ``OUT/results.csv``) and write the report."""
    parser = argparse.ArgumentParser(
        prog="python -m attnlab.study",
        description="GAM against standard attention on synthetic tasks (chapter 10).",
    )
    parser.add_argument("--grid", choices=("full", "reduced"), default="full")
    parser.add_argument("--out", required=True, help="folder for results.csv and figures")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument(
        "--timing-rounds", type=int, default=30, help="rounds of the side-by-side timing"
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    start = time.perf_counter()
    rows = run_grid(grid(args.grid), out / "results.csv")
    minutes = (time.perf_counter() - start) / 60
    for path in write_report(rows, out):
        print(f"wrote {path}")
    timing = timing_markdown(rounds=args.timing_rounds)
    (out / "timing.md").write_text(timing, encoding="utf-8")
    print(f"wrote {out / 'timing.md'}\n{timing}")
    total = sum(float(r["seconds"]) for r in rows) / 60
    print(f"{len(rows)} runs; this call took {minutes:.1f} min; all runs' training {total:.1f} min")
    print(summary_markdown(rows))


if __name__ == "__main__":  # pragma: no cover
    main()
