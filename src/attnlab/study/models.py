"""The model of chapter 10's study: a small transformer encoder with a swappable attention.

:class:`StudyModel` embeds tokens, adds learned absolute positions (``"abs"``) or none
(``"rel"``: relative positions inside every attention), runs ``layers`` pre-norm
:class:`Block` s and reads out one label distribution per position.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnlab.study.slots import ATTENTIONS, EMBEDDINGS, POSITIONS, make_attention, uses_embedding


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

    def forward(
        self, x: Tensor, mask: Tensor | None = None, positions: Tensor | None = None
    ) -> Tensor:
        x = x + self.attention(self.norm1(x), mask=mask, positions=positions)
        return x + self.mlp(self.norm2(x))


class StudyModel(nn.Module):
    """A small transformer encoder that labels every position, with a swappable attention.

    Parameters
    ----------
    vocab_in, vocab_out : int
        Input token ids and label ids.
    n : int
        Sequence length the model is built for (see :attr:`fixed_length`).
    attention : str
        A key of ``ATTENTIONS``.
    positions : str
        ``"abs"``: learned absolute position vectors (one per corpus position ``0 … span-1``)
        are added to the token embeddings; ``"rel"``: no absolute positions, relative ones
        inside every attention layer.
    d, h, layers : int
        Width, heads, blocks.
    embedding : str
        How GAM's relative branch embeds ``r`` (``EMBEDDINGS``);
        ``"none"`` for every other model.
    span : int, optional
        Number of corpus positions (``None``: ``n``, consecutive windows).
    shaw_k : int
        Clipping distance ``k_max`` of Shaw's tables (relative ``sdpa`` and ``luong``).

    Shapes
    ------
    ``tokens (batch, s)`` integers, ``positions (batch, s)`` or ``None`` →
    ``logits (batch, s, vocab_out)``; ``s == n`` unless the model is not :attr:`fixed_length`.

    Examples
    --------
    >>> import torch
    >>> from attnlab.study import StudyModel
    >>> _ = torch.manual_seed(0)
    >>> model = StudyModel(10, 7, n=5, attention="gam-poly", positions="rel", d=8, h=2)
    >>> tuple(model(torch.randint(0, 10, (3, 5))).shape)
    (3, 5, 7)
    >>> StudyModel(10, 7, n=5, attention="sdpa", positions="rel", d=8).fixed_length
    False
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
        embedding: str = "none",
        span: int | None = None,
        shaw_k: int = 8,
    ) -> None:
        super().__init__()
        if positions not in POSITIONS:
            raise ValueError(f"positions must be 'abs' or 'rel', got {positions!r}")
        if attention not in ATTENTIONS:
            choices = ", ".join(ATTENTIONS)
            raise ValueError(f"unknown attention {attention!r}; choose one of {choices}")
        if embedding not in EMBEDDINGS:
            choices = ", ".join(EMBEDDINGS)
            raise ValueError(f"embedding must be one of {choices}, got {embedding!r}")
        if layers < 1:
            raise ValueError(f"layers must be >= 1, got layers={layers}")
        self.n, self.positions, self.span = n, positions, n if span is None else span
        self.embed = nn.Embedding(vocab_in, d)
        self.pos = nn.Embedding(self.span, d) if positions == "abs" else None
        relative = positions == "rel"
        self.blocks = nn.ModuleList(
            Block(make_attention(attention, d, h, n, relative, shaw_k, embedding=embedding), d)
            for _ in range(layers)
        )
        self.norm = nn.LayerNorm(d)
        self.readout = nn.Linear(d, vocab_out)
        #: Whether the model accepts only sequences of length ``n``: learned absolute
        #: positions exist for ``0 … span-1`` only, and GAM's relative branch embeds ``r``
        #: with an ``nn.Linear(n, d)``. Shaw's clipped tables work at any length.
        self.fixed_length = positions == "abs" or uses_embedding(attention, positions)

    def forward(self, tokens: Tensor, positions: Tensor | None = None) -> Tensor:
        if tokens.dim() != 2 or (self.fixed_length and tokens.shape[1] != self.n):
            length = self.n if self.fixed_length else "s"
            raise ValueError(f"tokens must have shape (batch, {length}), got {tuple(tokens.shape)}")
        if positions is not None:
            if positions.shape != tokens.shape:
                raise ValueError(
                    f"positions must have the shape of tokens {tuple(tokens.shape)}, "
                    f"got {tuple(positions.shape)}"
                )
            if self.pos is not None and (positions.min() < 0 or positions.max() >= self.span):
                raise ValueError(f"positions must lie in [0, {self.span}) (the model's span)")
        x = self.embed(tokens)
        if self.pos is not None:
            index = torch.arange(tokens.shape[1], device=tokens.device)
            x = x + self.pos(index if positions is None else positions)
        for block in self.blocks:
            x = block(x, positions=positions)
        return self.readout(self.norm(x))
