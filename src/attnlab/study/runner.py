"""Training and measuring one configuration of chapter 10's study, and a resumable grid.

- :class:`RunConfig`: what to train (task, attention, positions, embedding of GAM's ``r``,
  width, layers), how (steps, batch size, learning rate) and with which seed;
- :func:`run_one`: train it from scratch; measure accuracy on a validation split (used only to
  choose the learning rate), on a test split (never used for a choice) and, where the model
  allows other lengths, on longer test sequences (length generalisation);
- :func:`read_results` reads a results CSV and refuses a foreign one (:func:`parse_results`
  reads its text); the grid that writes it, :func:`~attnlab.study.engine.run_grid`, is in
  :mod:`attnlab.study.engine`.
"""

from __future__ import annotations

import csv
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from attnlab._validate import check_float, check_int
from attnlab.data.tasks import IGNORE, TASKS, TokenTask, make_task
from attnlab.study.models import StudyModel
from attnlab.study.slots import ATTENTIONS, EMBEDDINGS, POSITIONS, uses_embedding
from attnlab.train import count_parameters, train
from attnlab.train import resolve_device as torch_device

#: Labelled examples in each run's test set (seed ``10**6 + seed``, which no batch uses).
TEST_SIZE = 1000
#: Examples in each run's validation set (seed ``2 * 10**6 + seed``); it chooses the rate.
VAL_SIZE = 500
#: Points in the stored learning curve (mean training loss over equal windows of steps).
CURVE_POINTS = 20
#: Tasks whose generator takes a length ``n`` (the length-generalisation test needs one).
LENGTH_TASKS = ("shift", "reverse", "gapped")


#: The integer fields of a RunConfig and their least value.
_INT_FIELDS = {
    "seed": 0, "steps": 1, "batch_size": 1, "d": 1, "h": 1, "layers": 1, "long_n": 0, "shaw_k": 1,
}  # fmt: skip


@dataclass(frozen=True)
class RunConfig:
    """One run of the study: what to train, how long, with which seed.

    ``embedding`` applies only to GAM with relative positions; for every other pair it is
    stored as ``"-"``. ``long_n > 0`` asks for a second test at length ``long_n`` (for a
    model that is not built for one length). ``shaw_k`` is the clipping distance ``k_max`` of
    Shaw's tables (used by ``sdpa`` and ``luong`` with relative positions only).
    """

    task: str
    attention: str
    positions: str
    seed: int
    embedding: str = "none"
    steps: int = 600
    batch_size: int = 32
    lr: float = 3e-3
    d: int = 32
    h: int = 2
    layers: int = 1
    long_n: int = 0
    shaw_k: int = 8

    def __post_init__(self) -> None:
        for name, least in _INT_FIELDS.items():
            check_int(getattr(self, name), name, minimum=least)
        if check_float(self.lr, "lr", positive=False) < 0:  # 0: a placeholder in tests
            raise ValueError(f"lr must be a finite number >= 0, got {self.lr!r}")
        if self.task not in TASKS:
            raise ValueError(f"unknown task {self.task!r}; choose one of {', '.join(TASKS)}")
        if self.attention not in ATTENTIONS:
            raise ValueError(
                f"unknown attention {self.attention!r}; choose one of {', '.join(ATTENTIONS)}"
            )
        if self.positions not in POSITIONS:
            raise ValueError(f"positions must be 'abs' or 'rel', got {self.positions!r}")
        if uses_embedding(self.attention, self.positions):
            if self.embedding not in EMBEDDINGS:
                raise ValueError(
                    f"embedding must be one of {', '.join(EMBEDDINGS)}, got {self.embedding!r}"
                )
        elif self.embedding in ("none", "-"):
            object.__setattr__(self, "embedding", "-")
        else:
            raise ValueError(
                f"embedding={self.embedding!r} applies to GAM with relative positions only"
            )

    def key(self) -> tuple[str, ...]:
        """Identity of the run in a results CSV (every field, as text)."""
        return tuple(str(getattr(self, f.name)) for f in fields(self))


#: The columns of a results CSV that describe a run's configuration.
CONFIG_COLUMNS = tuple(f.name for f in fields(RunConfig))
RESULT_COLUMNS = (
    "val_accuracy",
    "test_accuracy",
    "test_loss",
    "long_accuracy",
    "final_train_loss",
    "parameters",
    "ms_per_step",
    "seconds",
    "device",
    "curve",
)
COLUMNS = CONFIG_COLUMNS + RESULT_COLUMNS


def resolve_device(device: str) -> torch.device:
    """``"cpu"``, ``"cuda"`` or ``"auto"`` (CUDA when available) as a torch device.

    Raises
    ------
    ValueError
        On another name, or ``"cuda"`` without an available CUDA device.
    """
    if device not in ("cpu", "cuda", "auto"):
        raise ValueError(f"device must be 'cpu', 'cuda' or 'auto', got {device!r}")
    return torch_device(device)  # attnlab.train's rule: "auto", and CUDA only if present


def token_cross_entropy(logits: Tensor, targets: Tensor) -> Tensor:
    """Mean cross-entropy over the labelled positions (targets that are not ``IGNORE``).

    Shapes
    ------
    ``logits (batch, n, vocab_out)``, ``targets (batch, n)`` → scalar.
    """
    return nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=IGNORE
    )


def task_loss(model: nn.Module, batch: Sequence[Tensor]) -> Tensor:
    """Mean cross-entropy of ``model`` over the labelled positions of a batch.

    Shapes
    ------
    ``batch = (inputs (batch, n), targets (batch, n))`` or with ``positions (batch, n)``
    third → scalar.
    """
    inputs, targets, *rest = batch
    logits = model(inputs, rest[0]) if rest else model(inputs)
    return token_cross_entropy(logits, targets)


def task_tensors(task: TokenTask) -> tuple[Tensor, ...]:
    """``(inputs, targets)``, plus ``positions`` when the task has gapped windows."""
    tensors = (torch.as_tensor(task.inputs), torch.as_tensor(task.targets))
    if task.positions is not None:
        tensors += (torch.as_tensor(task.positions),)
    return tensors


@torch.no_grad()
def evaluate(
    model: nn.Module, task: TokenTask, device: str | torch.device = "cpu"
) -> tuple[float, float]:
    """``(loss, accuracy)`` of ``model`` on ``task``, over the labelled positions only."""
    model.eval()
    inputs, targets, *rest = (t.to(device) for t in task_tensors(task))
    logits = model(inputs, rest[0]) if rest else model(inputs)
    loss = token_cross_entropy(logits, targets)
    labelled = targets != IGNORE
    correct = (logits.argmax(-1) == targets) & labelled
    return float(loss), float(correct.sum() / labelled.sum())


def _curve(history: Sequence[float], points: int = CURVE_POINTS) -> list[float]:
    """Mean loss over ``points`` equal windows of the step history."""
    chunks = np.array_split(np.asarray(history, dtype=float), min(points, len(history)))
    return [float(c.mean()) for c in chunks]


def build_model(config: RunConfig) -> StudyModel:
    """The untrained model of a configuration (seeded by ``config.seed``)."""
    probe = make_task(config.task, 1, seed=0)
    torch.manual_seed(config.seed)
    return StudyModel(
        probe.vocab_in, probe.vocab_out, probe.n, config.attention, config.positions,
        d=config.d, h=config.h, layers=config.layers,
        embedding="none" if config.embedding == "-" else config.embedding,
        span=probe.corpus_span, shaw_k=config.shaw_k,
    )  # fmt: skip


def long_task(config: RunConfig, num: int, seed: int) -> TokenTask:
    """The length-generalisation test set: the task at length ``long_n`` (gapped: span 2n)."""
    kwargs = {"n": config.long_n}
    if config.task == "gapped":
        kwargs["span"] = 2 * config.long_n
    return make_task(config.task, num, seed=seed, **kwargs)


def run_one(config: RunConfig, chunk: int = 50, device: str = "cpu") -> dict[str, str]:
    """Train one configuration from scratch and measure it; return a CSV row.

    Training sees fresh batches (generated on the fly, ``chunk`` batches per "epoch" of
    :func:`attnlab.train.train`, seeded by the run's seed and the epoch). The validation set
    (``VAL_SIZE`` examples, seed ``2·10**6 + seed``) and the test set (``TEST_SIZE``,
    seed ``10**6 + seed``) use seeds no training batch uses. ``long_accuracy`` is measured on
    ``long_task`` when ``long_n > 0`` and the model accepts that length, else ``nan``.
    The step time is the wall time of training (batch generation included) over the steps.

    Returns
    -------
    dict
        The configuration and the results of ``RESULT_COLUMNS``.
    """
    if config.steps < 1 or config.steps % chunk and config.steps > chunk:
        raise ValueError(f"steps must be a multiple of {chunk} (or smaller), got {config.steps}")
    if config.long_n and config.task not in LENGTH_TASKS:
        raise ValueError(f"long_n needs a task of {LENGTH_TASKS}, got {config.task!r}")
    device = resolve_device(device)
    per_epoch = min(chunk, config.steps)
    model = build_model(config).to(device)

    def batches(epoch: int) -> list[tuple[Tensor, ...]]:
        data = make_task(
            config.task, per_epoch * config.batch_size, seed=1000 * config.seed + epoch + 1
        )
        tensors = task_tensors(data)
        return [
            tuple(t[i : i + config.batch_size] for t in tensors)
            for i in range(0, len(data), config.batch_size)
        ]

    start = time.perf_counter()
    history = train(
        model, batches, task_loss, epochs=config.steps // per_epoch, lr=config.lr,
        seed=config.seed, progress=False, device=device,
    )  # fmt: skip
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    val_task = make_task(config.task, VAL_SIZE, seed=2 * 10**6 + config.seed)
    _, val_acc = evaluate(model, val_task, device)
    test_loss, test_acc = evaluate(
        model, make_task(config.task, TEST_SIZE, seed=10**6 + config.seed), device
    )
    long_acc = float("nan")
    if config.long_n and not model.fixed_length:
        _, long_acc = evaluate(model, long_task(config, TEST_SIZE, 3 * 10**6 + config.seed), device)
    curve = _curve(history)
    row = {k: str(v) for k, v in asdict(config).items()}
    row.update(
        val_accuracy=f"{val_acc:.4f}",
        test_accuracy=f"{test_acc:.4f}",
        test_loss=f"{test_loss:.4f}",
        long_accuracy=f"{long_acc:.4f}",
        final_train_loss=f"{curve[-1]:.4f}",
        parameters=str(count_parameters(model)),
        ms_per_step=f"{1000 * seconds / len(history):.3f}",
        seconds=f"{seconds:.2f}",
        device=device.type,
        curve=" ".join(f"{c:.4f}" for c in curve),
    )
    return row


def read_results(
    path: str | os.PathLike, *, missing_ok: bool = False, columns: Sequence[str] = COLUMNS
) -> list[dict[str, str]]:
    """Read the finished rows of a results CSV, repairing an interrupted last line.

    The header is checked first: a file whose first line is not the study's ``COLUMNS`` (a
    CSV of some other layout, or any other file) raises and is left untouched. In a study
    CSV, a run that was killed while its row was being written can leave a last line
    without its newline; that fragment is cut off the file (so the next row starts on a fresh
    line) and not returned. Rows with a missing field are dropped likewise.

    Parameters
    ----------
    path : str or os.PathLike
        The CSV.
    missing_ok : bool, default False
        Whether a missing or empty file is a grid that has not started (``[]``), as for
        :func:`run_grid` resuming; by default it raises, so a reader of finished results
        (chapter 10, ``--report-only``) never reports on nothing.
    columns : sequence of str, default ``COLUMNS``
        The header the file must have (the language grid's CSV has its own).

    Raises
    ------
    FileNotFoundError
        If the file does not exist and ``missing_ok`` is false.
    ValueError
        If the file is not a results CSV of this study (or is empty, unless ``missing_ok``).
    """
    path = Path(path)
    if not path.exists():
        if missing_ok:
            return []
        raise FileNotFoundError(f"{path} does not exist: no results to read")
    if not path.is_file():
        raise ValueError(f"{path} is not a file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not a results CSV of the study (not UTF-8 text)") from None
    if not text:
        if missing_ok:
            return []
        raise ValueError(f"{path} is empty, not a results CSV of this study")
    rows = parse_results(text, str(path), columns=columns)
    if not text.endswith("\n"):
        path.write_text(text[: text.rfind("\n") + 1], encoding="utf-8")
    return rows


def parse_results(
    text: str, source: str = "the text", *, columns: Sequence[str] = COLUMNS
) -> list[dict[str, str]]:
    """The finished rows of the text of a results CSV (:func:`read_results` without the file).

    A last line without its newline (a row being written) and rows with a missing field are
    dropped. ``source`` names the text in the error message; ``columns`` is the header the
    text must have (default: chapter 10's ``COLUMNS``).

    Raises
    ------
    ValueError
        If the first line is not the study's ``COLUMNS``.
    """
    columns = tuple(columns)
    header = next(csv.reader([text.split("\n", 1)[0]]), [])
    if tuple(header) != columns:
        shown = ",".join(header)[:80]
        raise ValueError(
            f"{source} is not a results CSV of this study: its header is {shown!r}, expected "
            f"{','.join(columns[:4])},... ({len(columns)} columns); the file was left untouched"
        )
    if not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
    reader = csv.DictReader(text.splitlines())
    return [row for row in reader if all(row.get(c) not in (None, "") for c in columns)]
