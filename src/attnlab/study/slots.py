"""The attention variants of chapter 10's study, each wrapped for one slot of the model.

- ``ATTENTIONS``: the attention variants by name (scaled dot-product, Luong's general
  score, GAM with power 1 or 2 or a polynomial, one or two brains);
- :class:`LuongSelfAttention` and :class:`CorpusShawAttention`: Luong's score and Shaw's
  relative tables, both reading relative positions from *corpus* positions when given (on a
  gapped window the distance between two tokens is their corpus distance, not their slots');
- :func:`make_attention`: the slot content for a name, with or without relative positions,
  and for GAM's relative branch the embedding of ``r`` (``EMBEDDINGS``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnlab._validate import check_bool
from attnlab.gam import gam_init_std
from attnlab.nn import (
    GAMRelativeAttention,
    GeneralizedAttention,
    LuongAttention,
    MultiHeadAttention,
    ShawRelativeAttention,
)
from attnlab.nn.attention import masked_softmax


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

#: How GAM's relative branch embeds ``r^α`` (the paper does not say): ``"none"`` feeds the raw
#: integers ``1 … span`` to the linear embedding, ``"layernorm"`` normalises the embedded
#: ``p^α``, ``"scaled"`` divides ``r`` by its largest possible value first. ``"-"`` marks a
#: model without a GAM relative branch.
EMBEDDINGS = ("none", "layernorm", "scaled")


def uses_embedding(attention: str, positions: str) -> bool:
    """Whether the pair has GAM's relative branch, so that the ``embedding`` axis applies."""
    return ATTENTIONS[attention].kind == "gam" and positions == "rel"


def corpus_relative_index(positions: Tensor, k_max: int) -> Tensor:
    """Shaw's table index ``clip(p_j - p_i, -k_max, k_max) + k_max`` from corpus positions.

    Shapes
    ------
    ``positions (s,)`` or ``(batch, s)`` integers → ``(1 or batch, s, s)`` int64.

    Examples
    --------
    >>> import torch
    >>> from attnlab.study.slots import corpus_relative_index
    >>> corpus_relative_index(torch.tensor([0, 1, 5]), 2)[0].tolist()
    [[2, 3, 4], [1, 2, 4], [0, 0, 2]]
    """
    if positions.dim() == 1:
        positions = positions.unsqueeze(0)
    diff = positions.unsqueeze(-2) - positions.unsqueeze(-1)  # [b, i, j] = p_j - p_i
    return diff.clamp(-k_max, k_max).long() + k_max


def _default_positions(x: Tensor, positions: Tensor | None) -> Tensor:
    if positions is None:
        return torch.arange(x.shape[1], device=x.device)
    if positions.shape[-1] != x.shape[1]:
        raise ValueError(
            f"positions must have {x.shape[1]} entries per sequence, got {tuple(positions.shape)}"
        )
    return positions


class LuongSelfAttention(nn.Module):
    """Luong's general score as multi-head self-attention, optionally with Shaw's tables.

    Head ``a`` scores ``e_ij = x_i W_a (x_j + a^K_ij)ᵀ`` with a full ``W_a (d, d)`` (one
    :class:`attnlab.nn.luong.LuongAttention` ``"general"`` per head; no ``1/sqrt`` factor, as in
    Luong et al.), mixes its value slice ``v_j + a^V_ij`` (width ``d / h``), and the heads are
    concatenated and projected. ``W_a`` starts with normal entries of standard deviation
    :func:`attnlab.gam.gam_init_std` ``(d)``, the same as GAM's ``B``, so that ``"luong"`` and
    ``"gam-p1"`` differ only in the random draw. Without ``rel_k`` there are no tables; with
    them, ``a_ij`` is indexed by the clipped *corpus* distance ``p_j - p_i`` (default
    positions ``0 … s-1``: the slot distance).

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
    ``x (batch, s, d)``, ``positions (s,)`` or ``(batch, s)`` → ``(batch, s, d)``.

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

    def forward(
        self, x: Tensor, mask: Tensor | None = None, positions: Tensor | None = None
    ) -> Tensor:
        if x.dim() != 3 or x.shape[-1] != self.d:
            raise ValueError(f"x must have shape (batch, s, {self.d}), got {tuple(x.shape)}")
        batch, s, _ = x.shape
        d_v = self.d // self.h
        v = self.value(x).reshape(batch, s, self.h, d_v)
        if self.rel_k is not None:
            index = corpus_relative_index(_default_positions(x, positions), self.rel_k)
            a_k, a_v = self.rel_k_table(index), self.rel_v_table(index)  # (b|1, s, s, d | d_v)
        outputs = []
        for a, head in enumerate(self.heads):
            logits = head.scores(x, x)  # (batch, s, s): x_i · (W_a x_j)
            if self.rel_k is not None:
                # x_i · (W_a a_ij) = (x_i W_a) · a_ij: one d × d product per token, not per pair
                q = x @ head.w.weight  # (batch, s, d)
                if a_k.shape[0] == 1:  # the same table for every sequence of the batch
                    logits = logits + torch.einsum("bid,ijd->bij", q, a_k[0])
                else:
                    logits = logits + torch.einsum("bid,bijd->bij", q, a_k)
            weights = masked_softmax(logits, mask)
            z = weights @ v[:, :, a]
            if self.rel_k is not None:
                pattern = "bij,ijd->bid" if a_v.shape[0] == 1 else "bij,bijd->bid"
                z = z + torch.einsum(pattern, weights, a_v[0] if a_v.shape[0] == 1 else a_v)
            outputs.append(z)
        return self.out_proj(torch.cat(outputs, dim=-1))


class CorpusShawAttention(ShawRelativeAttention):
    """Shaw's relative attention whose tables are indexed by clipped *corpus* distances.

    Identical to :class:`attnlab.nn.positions.ShawRelativeAttention` (same parameters, same output)
    when ``positions`` is ``None`` or consecutive; on a gapped window ``a_ij`` is looked up at
    ``clip(p_j - p_i, -k_max, k_max)`` instead of ``clip(j - i, …)``.

    Shapes
    ------
    ``x (batch, s, d)``, ``positions (s,)`` or ``(batch, s)`` → ``out (batch, s, d)``, and
    with ``need_weights=True`` also ``weights (batch, h, s, s)`` (as the parent).
    """

    def __init__(self, d: int, h: int, k_max: int, *, bias: bool = False) -> None:
        super().__init__(d, h, k_max, bias=bias)
        self.clip = k_max

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        positions: Tensor | None = None,
        need_weights: bool = False,
    ) -> Tensor | tuple[Tensor, Tensor]:
        check_bool(need_weights, "need_weights")
        if positions is None:
            return super().forward(x, mask=mask, need_weights=need_weights)
        if x.dim() != 3 or x.shape[-1] != self.d or x.shape[1] == 0:
            raise ValueError(
                f"x must have shape (batch, s, d) with d={self.d} and s >= 1, got {tuple(x.shape)}"
            )
        batch, s, _ = x.shape
        index = corpus_relative_index(_default_positions(x, positions), self.clip)
        a_k = self.rel_k(index).expand(batch, -1, -1, -1)  # (batch, s, s, d_k)
        a_v = self.rel_v(index).expand(batch, -1, -1, -1)
        q, k, v = self._split(self.w_q(x)), self._split(self.w_k(x)), self._split(self.w_v(x))
        logits = q @ k.transpose(-2, -1) + torch.einsum("bhid,bijd->bhij", q, a_k)
        weights = masked_softmax(logits / math.sqrt(self.d_k), mask)
        z = weights @ v + torch.einsum("bhij,bijd->bhid", weights, a_v)
        out = self.w_o(z.transpose(1, 2).reshape(batch, s, self.d))
        return (out, weights) if need_weights else out


class SelfAttentionSlot(nn.Module):
    """Adapter: any of the book's attention modules as ``forward(x, mask, positions)``.

    The modules return their output only by default (``need_weights=False``, the convention
    of :class:`~attnlab.nn.multihead.MultiHeadAttention`). With ``explicit=True`` the slot
    asks the inner module for its weights and drops them: that runs the module's explicit
    path instead of its fused one. Chapter 10's GAM-relative rows were trained that way
    (:class:`~attnlab.nn.positions.GAMRelativeAttention` returned its weights by default
    then), so :func:`make_attention` keeps it for them; the two paths agree to rounding,
    not to the bit. Corpus positions reach the modules with relative positions; the others
    do not take them.

    Parameters
    ----------
    inner : torch.nn.Module
        The attention module.
    takes_positions : bool
        Pass ``positions`` on to ``inner``.
    explicit : bool
        Call ``inner`` with ``need_weights=True`` and keep the output.

    Shapes
    ------
    ``x (batch, s, d)`` → ``(batch, s, d)``.
    """

    def __init__(
        self, inner: nn.Module, takes_positions: bool = False, explicit: bool = False
    ) -> None:
        super().__init__()
        self.inner, self.takes_positions, self.explicit = inner, takes_positions, explicit

    def forward(
        self, x: Tensor, mask: Tensor | None = None, positions: Tensor | None = None
    ) -> Tensor:
        kwargs: dict[str, object] = {"mask": mask}
        if self.takes_positions:
            kwargs["positions"] = positions
        if self.explicit:
            out, _ = self.inner(x, need_weights=True, **kwargs)
            return out
        return self.inner(x, **kwargs)


def make_attention(
    name: str,
    d: int,
    h: int,
    n: int,
    relative: bool,
    shaw_k: int = 8,
    embedding: str = "none",
) -> SelfAttentionSlot:
    """Build the self-attention named ``name`` (a key of ``ATTENTIONS``).

    Parameters
    ----------
    name : str
        The variant.
    d, h : int
        Model width and heads.
    n : int
        Sequence length (GAM's relative branch is built for one length).
    relative : bool
        Add relative positions: Shaw's tables (``"sdpa"``, ``"luong"``, indexed by corpus
        distance) or GAM's relative branch (linear combination, ``c1 = 0.5``).
    shaw_k : int
        Clipping distance ``k_max`` of Shaw's tables.
    embedding : str
        How GAM's relative branch embeds ``r^α`` (``EMBEDDINGS``); must be ``"none"``
        for the other variants.

    Shapes
    ------
    The slot maps ``(batch, n, d)`` → ``(batch, n, d)``.

    Examples
    --------
    >>> import torch
    >>> from attnlab.study import make_attention
    >>> slot = make_attention("gam-p2-b2", d=8, h=2, n=6, relative=True, embedding="layernorm")
    >>> tuple(slot(torch.randn(3, 6, 8)).shape)
    (3, 6, 8)
    """
    if name not in ATTENTIONS:
        raise ValueError(f"unknown attention {name!r}; choose one of {', '.join(ATTENTIONS)}")
    if embedding not in EMBEDDINGS:
        raise ValueError(f"embedding must be one of {', '.join(EMBEDDINGS)}, got {embedding!r}")
    spec = ATTENTIONS[name]
    if embedding != "none" and not (spec.kind == "gam" and relative):
        raise ValueError(
            f"embedding={embedding!r} applies to GAM's relative branch only, not to "
            f"{name!r} with relative={relative}"
        )
    if spec.kind == "sdpa":
        inner: nn.Module = (
            CorpusShawAttention(d, h, shaw_k, bias=True) if relative else MultiHeadAttention(d, h)
        )
    elif spec.kind == "luong":
        inner = LuongSelfAttention(d, h, rel_k=shaw_k if relative else None)
    else:
        kwargs = dict(n_brains=spec.n_brains, f=spec.f, n1=spec.n1, degree=spec.degree)
        if relative:
            inner = GAMRelativeAttention(
                d, n, h, combine="linear", c1=0.5, rel_embedding=embedding, **kwargs
            )
            # The explicit path, as every GAM-relative row of chapter 10's study ran.
            return SelfAttentionSlot(inner, takes_positions=True, explicit=True)
        inner = GeneralizedAttention(d, h, **kwargs)
    return SelfAttentionSlot(inner, takes_positions=relative)
