"""Shaw et al.'s (2018) clipped relative positions as a trainable multi-head layer (ch. 09).

:class:`ShawRelativeAttention`: multi-head self-attention with two learned tables ``a^K``,
``a^V`` of ``2 k_max + 1`` vectors each, indexed by the key's distance ``j - i`` from the query
clipped to ``[-k_max, k_max]`` and shared by all heads. Tensors are ``batch_first``; boolean
masks say ``True`` where a query may attend.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attnlab._validate import check_bool, check_int
from attnlab.nn.attention import _require_bool_mask, masked_softmax
from attnlab.nn.multihead import _check_tokens
from attnlab.positions import relative_position_index


def _prepare_mask(mask: Tensor, logits_shape: torch.Size) -> Tensor:
    """Return ``mask`` broadcastable to ``(batch, h, s, s)`` (a 3-D mask gains a head axis)."""
    _require_bool_mask(mask)
    if mask.dim() == 3:
        mask = mask.unsqueeze(1)
    try:
        full = torch.broadcast_shapes(mask.shape, logits_shape)
    except RuntimeError:
        full = None
    if mask.dim() not in (2, 4) or full != logits_shape:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} must be (s, s), (batch, s, s) or "
            f"(batch, h, s, s) broadcastable to the logits {tuple(logits_shape)}"
        )
    return mask


class ShawRelativeAttention(nn.Module):
    """Multi-head self-attention with Shaw et al.'s clipped relative position representations.

    For each head, with ``q = x W^Q``, ``k = x W^K``, ``v = x W^V`` split into ``h`` heads of
    width ``d_k = d / h`` and ``a^K_ij = rel_k[clip(j - i, -k_max, k_max) + k_max]`` (likewise
    ``a^V``),

    ``e_ij = q_i · (k_j + a^K_ij) / sqrt(d_k)``, ``α = softmax_j(e)``,
    ``z_i = Σ_j α_ij (v_j + a^V_ij)``,

    and the heads are concatenated and projected by ``W^O``. The two tables have
    ``2 k_max + 1`` rows of width ``d_k`` and are shared by all heads, as in the paper; a
    sequence of any length works, because every distance beyond ``k_max`` reuses the end rows.

    Parameters
    ----------
    d : int
        Model width.
    h : int
        Number of heads; must divide ``d``.
    k_max : int
        Clipping distance, ``k_max >= 0``.
    bias : bool
        Whether the four projections have biases (``False`` by default, as in the equations).

    Attributes
    ----------
    w_q, w_k, w_v, w_o : torch.nn.Linear
        Projections ``(d → d)``; ``nn.Linear`` stores its weight as ``(out, in)``.
    rel_k, rel_v : torch.nn.Embedding
        The tables ``a^K`` and ``a^V``, weights of shape ``(2 k_max + 1, d_k)``, initialised
        ``N(0, 1/d_k)``.

    Shapes
    ------
    ``x (batch, s, d)``, ``mask`` ``(s, s)``, ``(batch, s, s)`` or ``(batch, h, s, s)`` →
    ``out (batch, s, d)``, and with ``need_weights=True`` also ``weights (batch, h, s, s)``.

    Raises
    ------
    ValueError
        At construction if ``d`` or ``h`` is not positive, ``h`` does not divide ``d`` or
        ``k_max < 0``; in ``forward`` if ``x`` is not ``(batch, s, d)`` in the parameters'
        dtype and device, or the mask is not boolean or has the wrong shape. While
        :func:`attnlab.nn.check_values` is on, also on a non-finite ``x`` or logits that
        overflow the dtype (as :func:`attnlab.positions.shaw_attention` always does).
    TypeError
        At construction if ``d``, ``h`` or ``k_max`` is not an integer (a bool or a float is
        not); in ``forward`` if ``x`` or the mask is not a torch tensor, or ``need_weights``
        is not a bool (``1`` is not ``True``).

    Examples
    --------
    >>> import torch
    >>> from attnlab.nn import ShawRelativeAttention
    >>> _ = torch.manual_seed(0)
    >>> layer = ShawRelativeAttention(d=8, h=2, k_max=3)
    >>> x = torch.randn(4, 10, 8)
    >>> tuple(layer(x).shape)                               # the output only, by default
    (4, 10, 8)
    >>> out, w = layer(x, need_weights=True)
    >>> tuple(out.shape), tuple(w.shape), bool(torch.allclose(w.sum(-1), torch.ones(4, 2, 10)))
    ((4, 10, 8), (4, 2, 10, 10), True)
    """

    def __init__(self, d: int, h: int, k_max: int, *, bias: bool = False) -> None:
        super().__init__()
        d, h = check_int(d, "d"), check_int(h, "h")
        k_max = check_int(k_max, "k_max (the clipping distance)", 0)
        if d % h:
            raise ValueError(f"h must be a positive divisor of d: got d={d}, h={h}")
        self.d, self.h, self.k_max, self.d_k = d, h, k_max, d // h
        self.w_q = nn.Linear(d, d, bias=bias)
        self.w_k = nn.Linear(d, d, bias=bias)
        self.w_v = nn.Linear(d, d, bias=bias)
        self.w_o = nn.Linear(d, d, bias=bias)
        self.rel_k = nn.Embedding(2 * k_max + 1, self.d_k)
        self.rel_v = nn.Embedding(2 * k_max + 1, self.d_k)
        for table in (self.rel_k, self.rel_v):
            nn.init.normal_(table.weight, std=self.d_k**-0.5)

    def relative_tables(self, s: int) -> tuple[Tensor, Tensor]:
        """The per-pair vectors ``a^K_ij`` and ``a^V_ij`` for a sequence of length ``s``.

        Shapes
        ------
        ``→ (s, s, d_k)`` each.
        """
        index = relative_position_index(s, self.k_max)
        index = torch.as_tensor(index, device=self.rel_k.weight.device)
        return self.rel_k(index), self.rel_v(index)

    def _split(self, t: Tensor) -> Tensor:
        """``(batch, s, d) → (batch, h, s, d_k)``."""
        batch, s, _ = t.shape
        return t.view(batch, s, self.h, self.d_k).transpose(1, 2)

    def forward(
        self, x: Tensor, mask: Tensor | None = None, need_weights: bool = False
    ) -> Tensor | tuple[Tensor, Tensor]:
        """Attend: the output ``(batch, s, d)``, and with ``need_weights`` the weights.

        The calling convention of :class:`~attnlab.nn.multihead.MultiHeadAttention`. There is
        no fused path here: the value table ``a^V`` is averaged with the weights themselves
        (``Σ_j α_ij a^V_ij``), so they are computed either way and ``need_weights`` only
        decides whether they are returned.

        Parameters
        ----------
        x : torch.Tensor
            ``(batch, s, d)``.
        mask : torch.Tensor of bool, optional
            ``True`` where a query may attend; ``(s, s)``, ``(batch, s, s)`` or
            ``(batch, h, s, s)``.
        need_weights : bool, optional
            Also return every head's attention weights.

        Returns
        -------
        out : torch.Tensor
            ``(batch, s, d)``.
        weights : torch.Tensor
            Only if ``need_weights``: ``(batch, h, s, s)``.
        """
        check_bool(need_weights, "need_weights")
        _check_tokens(x, "x", self.w_q.weight, "(batch, s, d)")  # type, dtype, device, values
        if x.dim() != 3 or x.shape[-1] != self.d or x.shape[1] == 0:
            raise ValueError(
                f"x must have shape (batch, s, d) with d={self.d} and s >= 1, got {tuple(x.shape)}"
            )
        batch, s, _ = x.shape
        q, k, v = self._split(self.w_q(x)), self._split(self.w_k(x)), self._split(self.w_v(x))
        a_k, a_v = self.relative_tables(s)
        logits = q @ k.transpose(-2, -1) + torch.einsum("bhid,ijd->bhij", q, a_k)
        if mask is not None:
            mask = _prepare_mask(mask, logits.shape)
        weights = masked_softmax(logits / math.sqrt(self.d_k), mask)
        z = weights @ v + torch.einsum("bhij,ijd->bhid", weights, a_v)
        out = self.w_o(z.transpose(1, 2).reshape(batch, s, self.d))
        return (out, weights) if need_weights else out
