"""One run of the language grid (issue 27): chapter 11's model with a given attention slot.

:class:`LMRunConfig` says what to train (the slot of ``LM_SLOTS``,
sizes) and how (steps, batch, peak rate, seed); :func:`run_lm` trains it on the packaged
Shakespeare corpus with chapter 11's :func:`~attnlab.lm.training.train_lm` (AdamW, 50
warm-up steps, cosine decay to a tenth, weight decay 0.01, gradient clipping at 1) and
returns one CSV row: validation and test bits per character, parameters, multiply-adds per
token (:func:`macs_per_token`), the GAM path, characters seen, wall and CPU seconds, and a
learning curve (validation bits per character on the first ``CURVE_CHARS`` characters of
the validation split at ``curve_points`` checkpoints).

**A seed gives the same batches and the same initialisation of shared parts in every
configuration**: the windows come from ``torch.Generator().manual_seed(seed)`` inside
``train_lm`` whatever the model, and :func:`~attnlab.study.lm_slots.build_lm` draws each
shared parameter from a generator seeded by the seed and the parameter's name.
"""

from __future__ import annotations

import functools
import os
import time
from dataclasses import asdict, dataclass, fields

import torch

from attnlab._validate import check_float, check_int
from attnlab.study.engine import Layout
from attnlab.study.lm_slots import LM_SLOTS, build_lm, slot_path

__all__ = [
    "CURVE_CHARS", "LANGUAGE_COLUMNS", "LANGUAGE_CONFIG_COLUMNS", "LANGUAGE_LAYOUT",
    "LANGUAGE_RESULT_COLUMNS", "LMRunConfig", "format_curve", "macs_per_token", "parse_curve",
    "run_lm",
]  # fmt: skip

#: Validation characters scored at each checkpoint of the learning curve.
CURVE_CHARS = 32_768

_INT_FIELDS = {
    "seed": 0, "steps": 1, "batch_size": 1, "d": 1, "layers": 1, "h": 1, "context": 2,
    "eval_chars": 0, "curve_points": 1,
}  # fmt: skip


@dataclass(frozen=True)
class LMRunConfig:
    """One run of the language grid.

    ``eval_chars`` limits the validation and test characters scored (0: the whole splits,
    196,608 characters each; the tests use a few thousand). ``path`` is the GAM path
    (``GAM_PATH`` by default), stored as ``"-"`` for a slot
    without GAM.

    Raises
    ------
    ValueError, TypeError
        On an unknown slot or path, a size that is not a positive integer, a negative rate,
        or ``curve_points`` that do not divide ``steps``.
    """

    slot: str
    seed: int
    lr: float = 3e-3
    steps: int = 2000
    batch_size: int = 32
    d: int = 64
    layers: int = 2
    h: int = 4
    context: int = 128
    eval_chars: int = 0
    curve_points: int = 10
    path: str = "default"

    def __post_init__(self) -> None:
        if self.slot not in LM_SLOTS:
            raise ValueError(f"unknown slot {self.slot!r}; choose one of {', '.join(LM_SLOTS)}")
        for name, least in _INT_FIELDS.items():
            check_int(getattr(self, name), name, minimum=least)
        if check_float(self.lr, "lr", positive=False) < 0:
            raise ValueError(f"lr must be a finite number >= 0, got {self.lr!r}")
        if self.steps % self.curve_points:
            raise ValueError(f"curve_points={self.curve_points} must divide steps={self.steps}")
        if self.path == "default":
            object.__setattr__(self, "path", slot_path(self.slot))
        elif slot_path(self.slot) == "-":
            if self.path != "-":
                raise ValueError(f"slot {self.slot!r} has no GAM path; got path={self.path!r}")
        elif self.path not in ("explicit", "fused", "tiled", "recompute"):
            raise ValueError(f"path must be explicit, fused, tiled or recompute, got {self.path!r}")

    def key(self) -> tuple[str, ...]:
        """Identity of the run in the CSV (every field, as text)."""
        return tuple(str(getattr(self, f.name)) for f in fields(self))


LANGUAGE_CONFIG_COLUMNS = tuple(f.name for f in fields(LMRunConfig))
LANGUAGE_RESULT_COLUMNS = (
    "val_bpc", "test_bpc", "final_train_bpc", "parameters", "macs_per_token", "chars",
    "seconds", "cpu_seconds", "ms_per_step", "threads", "load", "device", "curve",
)  # fmt: skip
LANGUAGE_COLUMNS = LANGUAGE_CONFIG_COLUMNS + LANGUAGE_RESULT_COLUMNS
#: The language grid's CSV for :func:`attnlab.study.run_grid`.
LANGUAGE_LAYOUT = Layout(LANGUAGE_COLUMNS, LANGUAGE_CONFIG_COLUMNS)


def macs_per_token(
    slot: str, *, vocab_size: int, d: int = 64, layers: int = 2, h: int = 4, context: int = 128
) -> int:
    """Multiply-adds of the matrix products of one forward pass, per token, at length ``context``.

    Every one of the ``n²`` score pairs is counted (the kernels compute the masked half too),
    each product of the model's function once; embedding look-ups, norms, softmaxes and
    element-wise products are not counted. Per block: the MLP ``8d²``; ``sdpa`` ``4d² + 2nd``;
    Shaw ``4d² + 4nd`` (the two tables add ``nd`` each); Luong ``(h + 2)d² + hnd + nd``; GAM
    ``h N_B L (d² + nd) + nd + 2d²`` plus ``h N_B n`` to mix two or more brains (``L`` the
    polynomial's degree, 1 for a power); GAM-relative adds to it the embedding of ``r``
    (``nd``) and its positional brains ``h N_B (d² + nd) + nd``. The head adds ``dV``.

    Raises
    ------
    ValueError
        On an unknown slot.
    """
    if slot not in LM_SLOTS:
        raise ValueError(f"unknown slot {slot!r}; choose one of {', '.join(LM_SLOTS)}")
    spec = LM_SLOTS[slot]
    d = spec.d or d
    n = context
    if spec.kind == "sdpa":
        attn = 4 * d * d + 2 * n * d
    elif spec.kind == "shaw":
        attn = 4 * d * d + 4 * n * d
    elif spec.kind == "luong":
        attn = (h + 2) * d * d + h * n * d + n * d
    else:
        degree = spec.degree or 1
        mixing = h * spec.n_brains * n if spec.n_brains > 1 else 0
        attn = h * spec.n_brains * degree * (d * d + n * d) + n * d + 2 * d * d + mixing
        if spec.kind == "gamrel":
            attn += n * d + h * spec.n_brains * degree * (d * d + n * d) + n * d + mixing
    return layers * (attn + 8 * d * d) + d * vocab_size


@functools.lru_cache(maxsize=1)
def _corpus():
    from attnlab.lm.corpus import load_corpus

    return load_corpus()


def format_curve(log: list[dict]) -> str:
    """A training log's scored checkpoints as ``"step:bpc step:bpc …"`` (:func:`parse_curve`
    reads it back); steps without a validation score (NaN) are left out."""
    scored = [r for r in log if r["valid_bpc"] == r["valid_bpc"]]  # NaN where not evaluated
    return " ".join(f"{r['step']}:{r['valid_bpc']:.4f}" for r in scored)


def parse_curve(text: str) -> list[tuple[int, float]]:
    """The learning curve of a row: ``"step:bpc step:bpc …"`` → ``[(step, bpc), …]``."""
    return [(int(s), float(b)) for s, b in (item.split(":") for item in text.split())]


def run_lm(config: LMRunConfig, device: str = "cpu") -> dict[str, str]:
    """Train one configuration from scratch on the packaged corpus and measure it.

    Returns
    -------
    dict
        The configuration and the results of ``LANGUAGE_RESULT_COLUMNS`` as text.
    """
    from attnlab.lm.training import bits_per_char, train_lm
    from attnlab.study.runner import resolve_device

    device = resolve_device(device)
    corpus = _corpus()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    model = build_lm(
        config.slot, vocab_size=corpus.vocab.size, seed=config.seed, d=config.d,
        layers=config.layers, h=config.h, context=config.context,
        path="fused" if config.path == "-" else config.path,
    ).to(device)  # fmt: skip
    limit = config.eval_chars or None
    valid, test = corpus.valid[:limit], corpus.test[:limit]
    wall, cpu = time.perf_counter(), time.process_time()
    log = train_lm(
        model, corpus.train, steps=config.steps, batch=config.batch_size, lr=config.lr,
        seed=config.seed, valid_ids=valid, eval_every=config.steps // config.curve_points,
        eval_chars=min(CURVE_CHARS, len(valid)), progress=False,
    )  # fmt: skip
    if device.type == "cuda":
        torch.cuda.synchronize()
    train_seconds = time.perf_counter() - wall
    val_bpc = bits_per_char(model, valid)
    test_bpc = bits_per_char(model, test)
    seconds, cpu_seconds = time.perf_counter() - wall, time.process_time() - cpu
    curve = format_curve(log)
    tail = log[-max(1, config.steps // config.curve_points) :]
    row = {k: str(v) for k, v in asdict(config).items()}
    row.update(
        val_bpc=f"{val_bpc:.4f}",
        test_bpc=f"{test_bpc:.4f}",
        final_train_bpc=f"{sum(r['train_bpc'] for r in tail) / len(tail):.4f}",
        parameters=str(sum(p.numel() for p in model.parameters())),
        macs_per_token=str(
            macs_per_token(
                config.slot,
                vocab_size=corpus.vocab.size,
                d=config.d,
                layers=config.layers,
                h=config.h,
                context=config.context,
            )  # fmt: skip
        ),
        chars=str(log[-1]["chars"]),
        seconds=f"{seconds:.1f}",
        cpu_seconds=f"{cpu_seconds:.1f}",
        ms_per_step=f"{1000 * train_seconds / config.steps:.1f}",
        threads=str(torch.get_num_threads()),
        load=f"{load:.2f}",
        device=device.type,
        curve=curve,
    )
    return row
