"""Training, evaluation and sampling of a :class:`~attnlab.lm.model.CharTransformer`.

:func:`random_windows` draws training windows from a seeded generator; :func:`train_lm` runs
AdamW with a linear warm-up and a cosine decay, logging the training loss and (every
``eval_every`` steps) the validation bits per character; :func:`bits_per_char` scores every
character of a split but the first with overlapping windows, so that every scored character
but those of the first window has at least ``context // 2`` characters of context;
:func:`generate` samples text with a temperature from a seeded ``torch.Generator``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np
import torch
from torch import Tensor, nn
from tqdm import tqdm

from attnlab._validate import check_float, check_int

__all__ = ["random_windows", "train_lm", "bits_per_char", "generate", "LN2"]

LN2 = math.log(2.0)


def _as_ids(ids, name: str = "ids") -> Tensor:
    if isinstance(ids, np.ndarray):
        ids = torch.from_numpy(ids)
    if not isinstance(ids, Tensor) or ids.dim() != 1 or ids.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"{name} must be a 1-D integer array or tensor")
    return ids.long()


def random_windows(
    ids, context: int, batch: int, generator: torch.Generator
) -> tuple[Tensor, Tensor]:
    """A batch of random windows of ``ids`` and the windows shifted by one.

    Shapes
    ------
    ``ids (N,)`` → ``x (batch, context)``, ``y (batch, context)`` with ``y[:, t] = x[:, t+1]``
    (``y``'s last column is the character after the window).

    Raises
    ------
    ValueError
        If ``ids`` has at most ``context`` characters.

    Examples
    --------
    >>> import torch
    >>> from attnlab.lm.training import random_windows
    >>> x, y = random_windows(torch.arange(100), 8, 2, torch.Generator().manual_seed(0))
    >>> bool((x[:, 1:] == y[:, :-1]).all()), tuple(x.shape)
    (True, (2, 8))
    """
    ids = _as_ids(ids)
    context, batch = check_int(context, "context"), check_int(batch, "batch")
    if len(ids) <= context:
        raise ValueError(f"ids has {len(ids)} characters, need more than context={context}")
    start = torch.randint(0, len(ids) - context, (batch,), generator=generator)
    index = start[:, None] + torch.arange(context + 1)  # (batch, context + 1)
    windows = ids[index]
    return windows[:, :-1], windows[:, 1:]


def _lr_at(step: int, steps: int, lr: float, warmup: int) -> float:
    """Linear warm-up over ``warmup`` steps, then cosine decay to ``lr / 10``."""
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def _param_groups(
    model: nn.Module, lr: float, weight_decay: float, rates: Mapping[str, float] | None
) -> list[dict]:
    """AdamW's groups: weight decay on matrices only; each group's peak rate as ``"peak"``."""
    named = dict(model.named_parameters())
    rates = {} if rates is None else dict(rates)
    unknown = sorted(set(rates) - set(named))
    if unknown:
        raise ValueError(f"rates names no parameter of the model: {', '.join(map(repr, unknown))}")
    peaks = {name: check_float(rate, f"rates[{name!r}]") for name, rate in rates.items()}
    groups: dict[tuple[float, bool], list[nn.Parameter]] = {}
    for name, p in named.items():  # in the model's order: without rates, two groups as ever
        groups.setdefault((peaks.get(name, lr), p.dim() >= 2), []).append(p)
    return [
        {"params": ps, "peak": peak, "weight_decay": weight_decay if decays else 0.0}
        for (peak, decays), ps in sorted(groups.items(), key=lambda kv: not kv[0][1])
    ]


@torch.no_grad()
def bits_per_char(model: nn.Module, ids, batch: int = 64, stride: int | None = None) -> float:
    """Cross-entropy of ``ids[1:]`` given the characters before each, in bits per character.

    Windows of ``context`` characters start every ``stride`` (default ``context // 2``)
    characters; each scores the targets the earlier windows did not, so every character
    ``ids[1], …, ids[N-1]`` is scored exactly once.

    Shapes
    ------
    ``ids (N,)`` with ``N >= 2`` → a float.

    Raises
    ------
    ValueError
        If ``ids`` has fewer than two characters or ``stride`` is not in ``1 … context``.
    """
    ids = _as_ids(ids)
    context = model.config.context
    stride = context // 2 if stride is None else check_int(stride, "stride")
    if not 1 <= stride <= context:
        raise ValueError(f"stride must lie in 1 … context={context}, got {stride}")
    n = len(ids)
    if n < 2:
        raise ValueError(f"ids needs at least two characters to score one, got {n}")
    width = min(context, n - 1)
    starts = list(range(0, n - 1 - width + 1, stride))
    if starts[-1] != n - 1 - width:
        starts.append(n - 1 - width)
    was_training = model.training
    model.eval()
    total, covered, count = 0.0, 0, 0  # covered: targets ids[1 … covered] are scored
    device = next(model.parameters()).device
    for i in range(0, len(starts), batch):
        chunk = starts[i : i + batch]
        index = torch.tensor(chunk)[:, None] + torch.arange(width + 1)
        windows = ids[index].to(device)
        logp = torch.log_softmax(model(windows[:, :-1]).float(), dim=-1)
        nll = -logp.gather(-1, windows[:, 1:, None]).squeeze(-1)  # (b, width)
        for row, s in enumerate(chunk):
            first = max(covered, s) - s  # targets s+1 … s+width; skip those already scored
            total += float(nll[row, first:].sum())
            count += width - first
            covered = s + width
    model.train(was_training)
    assert count == n - 1
    return total / count / LN2


def train_lm(
    model: nn.Module,
    train_ids,
    *,
    steps: int,
    batch: int = 32,
    lr: float = 3e-3,
    warmup: int = 50,
    weight_decay: float = 0.01,
    clip_norm: float = 1.0,
    seed: int = 0,
    valid_ids=None,
    eval_every: int = 0,
    eval_chars: int = 32_768,
    progress: bool = True,
    on_step: Callable[[dict], None] | None = None,
    rates: Mapping[str, float] | None = None,
) -> list[dict]:
    """Train ``model`` on random windows of ``train_ids``; return one log row per step.

    Parameters
    ----------
    model : CharTransformer
    train_ids : array_like
        Character ids, ``(N,)``.
    steps, batch : int
        Optimisation steps, windows per step (each ``model.config.context`` characters).
    lr, warmup, weight_decay, clip_norm : float, int, float, float
        AdamW, linear warm-up then cosine decay to ``lr / 10``, gradient-norm clipping.
    seed : int
        Seeds the window generator and ``torch.manual_seed``: the same seed on the same
        machine gives the same run.
    valid_ids : array_like, optional
        Every ``eval_every`` steps (and after the last), the bits per character of its first
        ``eval_chars`` characters go into the log row (``valid_bpc``).
    progress : bool
        A tqdm bar.
    on_step : callable, optional
        Called with each log row.
    rates : dict, optional
        ``{name: peak rate}``: single parameters, by their names in ``model.named_parameters()``
        (e.g. GAM's brains, ``"blocks.0.attn.inner.b"``); every other parameter peaks at
        ``lr``. Each follows the same warm-up and decay, scaled to its own peak.

    Returns
    -------
    list of dict
        ``{"step", "chars", "lr", "train_bpc", "valid_bpc"}`` (``valid_bpc`` NaN where not
        evaluated; ``lr`` the rate of the parameters that peak at ``lr``); ``chars`` counts
        the training characters seen (``batch · context`` a step).

    Raises
    ------
    TypeError, ValueError
        On a bad size or rate (named), a name in ``rates`` that is not a parameter of
        ``model``, or a non-finite loss.
    """
    steps, batch = check_int(steps, "steps"), check_int(batch, "batch")
    warmup = check_int(warmup, "warmup", minimum=0)
    eval_every = check_int(eval_every, "eval_every", minimum=0)
    lr = check_float(lr, "lr")
    weight_decay = check_float(weight_decay, "weight_decay", positive=False)
    clip_norm = check_float(clip_norm, "clip_norm")
    train_ids = _as_ids(train_ids, "train_ids")
    valid = None if valid_ids is None else _as_ids(valid_ids, "valid_ids")[:eval_chars]
    context = model.config.context
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(
        _param_groups(model, lr, weight_decay, rates), lr=lr, betas=(0.9, 0.99)
    )
    device = next(model.parameters()).device
    model.train()
    log = []
    bar = tqdm(range(steps), desc="training", disable=not progress, unit="step")
    for step in bar:
        rate = _lr_at(step, steps, lr, warmup)
        for group in optimizer.param_groups:
            group["lr"] = _lr_at(step, steps, group["peak"], warmup)
        x, y = random_windows(train_ids, context, batch, generator)
        loss = model.loss(x.to(device), y.to(device))
        if not torch.isfinite(loss):
            raise ValueError(f"the loss is not finite at step {step}: {float(loss)}")
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
        optimizer.step()
        row = {
            "step": step + 1,
            "chars": (step + 1) * batch * context,
            "lr": rate,
            "train_bpc": float(loss.detach()) / LN2,
            "valid_bpc": math.nan,
        }
        last = step + 1 == steps
        if valid is not None and ((eval_every and (step + 1) % eval_every == 0) or last):
            row["valid_bpc"] = bits_per_char(model, valid)
        log.append(row)
        bar.set_postfix(bpc=f"{row['train_bpc']:.3f}")
        if on_step is not None:
            on_step(row)
    model.eval()
    return log


@torch.no_grad()
def generate(
    model: nn.Module,
    prompt,
    length: int,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Continue ``prompt`` by ``length`` characters sampled at ``temperature``.

    Each new character is drawn from ``softmax(logits / temperature)`` of the last
    ``context`` characters; a seeded ``generator`` makes the sample reproducible.

    Shapes
    ------
    ``prompt (n,)`` ids, ``n >= 1`` → ``(n + length,)`` ids.

    Raises
    ------
    ValueError
        If ``prompt`` is empty or ``temperature`` is not positive.
    """
    prompt = _as_ids(prompt, "prompt")
    length = check_int(length, "length", minimum=0)
    temperature = check_float(temperature, "temperature")
    if len(prompt) == 0:
        raise ValueError("prompt is empty: give at least one character to continue")
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    out = prompt.to(device)
    for _ in range(length):
        logits = model(out[-model.config.context :][None])[0, -1].float()
        p = torch.softmax(logits / temperature, dim=-1)
        nxt = torch.multinomial(p.cpu(), 1, generator=generator).to(device)
        out = torch.cat([out, nxt])
    model.train(was_training)
    return out.cpu()
