"""A decoder-only, pre-norm transformer over characters (chapter 11).

Token ids ``(b, n)`` → embeddings ``(b, n, d)`` (plus an absolute position table, unless the
positions are rotary) → ``L`` pre-norm blocks, each ``x + attn(norm(x))`` then
``x + mlp(norm(x))`` → a final norm → logits over the ``V`` characters ``(b, n, V)``. Every
projection is bias-free. The loss is the next-character cross-entropy; divided by ``ln 2``
it is the number of bits per character.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab._validate import check_int, shape_of
from attnlab.lm.blocks import ATTENTIONS, GELUMLP, CausalSelfAttention, RMSNorm, SwiGLU
from attnlab.positions import sinusoidal_positions

__all__ = ["LMConfig", "CharTransformer", "Block", "POSITIONS", "NORMS", "MLPS"]

POSITIONS = ("learned", "sinusoidal", "rotary")
NORMS = ("layernorm", "rmsnorm")
MLPS = ("gelu", "swiglu")


@dataclass(frozen=True)
class LMConfig:
    """The sizes and choices of a :class:`CharTransformer`.

    Parameters
    ----------
    vocab_size : int
        ``V``: classes of the output softmax (the ``<unk>`` id included).
    d : int
        Model width.
    layers : int
        Blocks ``L``.
    heads : int
        Heads per block; must divide ``d``.
    context : int
        Longest input ``n`` (the size of a learned position table).
    positions : str
        ``"learned"``, ``"sinusoidal"`` or ``"rotary"``.
    norm : str
        ``"layernorm"`` or ``"rmsnorm"``.
    mlp : str
        ``"gelu"`` or ``"swiglu"``:
        GELU with hidden width ``4d``, or SwiGLU with ``8d/3`` rounded up to a multiple of 8.
    mlp_hidden : int, optional
        The MLP's hidden width instead of those defaults (chapter 11 trains with ``2d`` to fit
        its time budget).
    attention : str
        ``"book"`` or ``"sdpa"``.
        See :class:`attnlab.lm.blocks.CausalSelfAttention`.

    Raises
    ------
    TypeError
        If a size is not an integer (a bool is not).
    ValueError
        If a size is not positive, ``heads`` does not divide ``d``, a choice is unknown, or
        (rotary, sinusoidal) ``d_k`` or ``d`` is odd.

    Examples
    --------
    >>> from attnlab.lm.model import LMConfig
    >>> LMConfig(vocab_size=85, d=64, layers=2, heads=4, context=128).d_k
    16
    """

    vocab_size: int
    d: int = 128
    layers: int = 2
    heads: int = 4
    context: int = 128
    positions: str = "learned"
    norm: str = "layernorm"
    mlp: str = "gelu"
    attention: str = "book"
    mlp_hidden: int | None = None

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d", "layers", "heads", "context"):
            check_int(getattr(self, name), name)
        if self.mlp_hidden is not None:
            check_int(self.mlp_hidden, "mlp_hidden")
        if self.d % self.heads:
            raise ValueError(f"heads={self.heads} must divide d={self.d}")
        for name, allowed in (
            ("positions", POSITIONS),
            ("norm", NORMS),
            ("mlp", MLPS),
            ("attention", ATTENTIONS),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        if self.positions == "rotary" and self.d_k % 2:
            raise ValueError(f"rotary positions need an even d_k = d/heads, got {self.d_k}")
        if self.positions == "sinusoidal" and self.d % 2:
            raise ValueError(f"sinusoidal positions need an even d, got {self.d}")

    @property
    def d_k(self) -> int:
        return self.d // self.heads

    @property
    def hidden(self) -> int:
        """The MLP's hidden width, ``mlp_hidden`` if given, else the default of ``mlp``."""
        if self.mlp_hidden is not None:
            return self.mlp_hidden
        return 4 * self.d if self.mlp == "gelu" else 8 * math.ceil(8 * self.d / 3 / 8)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> LMConfig:
        """The config of ``values`` (unknown keys are refused, so a typo is not ignored)."""
        known = {f.name for f in fields(cls)}
        unknown = set(values) - known
        if unknown:
            raise ValueError(f"unknown config keys {sorted(unknown)}; known: {sorted(known)}")
        return cls(**values)


def _norm(kind: str, d: int) -> nn.Module:
    return nn.LayerNorm(d, bias=False) if kind == "layernorm" else RMSNorm(d)


def _rotary(d_k: int) -> nn.Module:
    try:
        from attnlab.nn.rotary import RotaryEmbedding
    except ImportError as err:  # pragma: no cover - until attnlab.nn.rotary exists
        raise ValueError("positions='rotary' needs attnlab.nn.rotary") from err
    return RotaryEmbedding(d_k)


class Block(nn.Module):
    """One pre-norm decoder block: ``x + attn(norm₁(x))``, then ``x + mlp(norm₂(x))``.

    Shapes
    ------
    ``x (b, n, d)`` → ``(b, n, d)`` (and ``weights (b, h, n, n)`` with ``need_weights``).
    """

    def __init__(self, config: LMConfig) -> None:
        super().__init__()
        rotary = _rotary(config.d_k) if config.positions == "rotary" else None
        self.norm1 = _norm(config.norm, config.d)
        self.attn = CausalSelfAttention(config.d, config.heads, config.attention, rotary)
        self.norm2 = _norm(config.norm, config.d)
        mlp = GELUMLP if config.mlp == "gelu" else SwiGLU
        self.mlp = mlp(config.d, config.hidden)

    def forward(self, x: Tensor, need_weights: bool = False):
        if need_weights:
            a, w = self.attn(self.norm1(x), need_weights=True)
            x = x + a
            return x + self.mlp(self.norm2(x)), w
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class CharTransformer(nn.Module):
    """Decoder-only transformer language model over character ids.

    Parameters
    ----------
    config : LMConfig

    Shapes
    ------
    ``ids (b, n)`` int64 with ``1 <= n <= context`` → ``logits (b, n, V)``;
    ``logits[:, t]`` scores the character at ``t + 1`` from ``ids[:, :t + 1]`` only.
    Inside: embeddings ``(V, d)``, position table ``(context, d)`` (learned or sinusoidal),
    ``L`` blocks, head ``(d, V)``.

    Raises
    ------
    TypeError
        If ``config`` is not an :class:`LMConfig` or ``ids`` is not a tensor.
    ValueError
        If ``ids`` is not a 2-D integer tensor, is longer than ``context``, or holds an id
        outside ``0 … V - 1``.

    Examples
    --------
    >>> import torch
    >>> from attnlab.lm.model import CharTransformer, LMConfig
    >>> _ = torch.manual_seed(0)
    >>> model = CharTransformer(LMConfig(vocab_size=10, d=32, layers=2, heads=4, context=16))
    >>> model(torch.zeros(3, 16, dtype=torch.long)).shape
    torch.Size([3, 16, 10])
    """

    def __init__(self, config: LMConfig) -> None:
        super().__init__()
        if not isinstance(config, LMConfig):
            raise TypeError(f"config must be an LMConfig, got {type(config).__name__}")
        self.config = config
        c = config
        self.embed = nn.Embedding(c.vocab_size, c.d)
        if c.positions == "learned":
            self.positions = nn.Parameter(torch.zeros(c.context, c.d))
        elif c.positions == "sinusoidal":
            table = torch.from_numpy(sinusoidal_positions(c.context, c.d)).float()
            self.register_buffer("positions", table, persistent=False)
        else:
            self.positions = None  # rotary: positions enter every attention layer
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.layers))
        self.norm = _norm(c.norm, c.d)
        self.head = nn.Linear(c.d, c.vocab_size, bias=False)
        self._init_weights()

    def _init_weights(self) -> None:
        """GPT-2's: normal(0, 0.02), residual outputs scaled by ``1/sqrt(2L)``."""
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02
                if name.endswith("attn.out.weight") or name.endswith("mlp.down.weight"):
                    std /= math.sqrt(2 * self.config.layers)
                nn.init.normal_(p, std=std)

    def _check(self, ids: Tensor) -> None:
        if not isinstance(ids, Tensor):
            raise TypeError(f"ids must be a torch.Tensor, got {type(ids).__name__}")
        if ids.dim() != 2 or ids.dtype not in (torch.int64, torch.int32):
            raise ValueError(
                f"ids must be a (b, n) int64 tensor, got shape {shape_of(ids)}, {ids.dtype}"
            )
        n = ids.shape[1]
        if not 1 <= n <= self.config.context:
            raise ValueError(f"ids must have 1 … context={self.config.context} columns, got {n}")
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= self.config.vocab_size):
            raise ValueError(
                f"ids must lie in 0 … {self.config.vocab_size - 1}, got values from "
                f"{int(ids.min())} to {int(ids.max())}"
            )

    def forward(self, ids: Tensor, need_weights: bool = False):
        """Logits ``(b, n, V)``; with ``need_weights`` also a list of ``(b, h, n, n)`` weights."""
        self._check(ids)
        x = self.embed(ids)  # (b, n, d)
        if self.positions is not None:
            x = x + self.positions[: ids.shape[1]]  # (n, d) broadcast over the batch
        weights = []
        for block in self.blocks:
            if need_weights:
                x, w = block(x, need_weights=True)
                weights.append(w)
            else:
                x = block(x)
        logits = self.head(self.norm(x))  # (b, n, V)
        return (logits, weights) if need_weights else logits

    def loss(self, ids: Tensor, targets: Tensor) -> Tensor:
        """Mean next-character cross-entropy in nats: ``ids (b, n)``, ``targets (b, n)``."""
        logits = self(ids)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
