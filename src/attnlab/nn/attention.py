"""Scaled dot-product attention in PyTorch (chapters 02–04).

The torch counterpart of :func:`attnlab.scaled_dot_product_attention`, differentiable and
batched, with the book's mask convention (``True`` = may attend) and zero weights and output
for a query whose keys are all masked.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    scale: float | None = None,
) -> tuple[Tensor, Tensor]:
    """``softmax(q kᵀ · scale) v`` with an optional boolean mask; returns output and weights.

    Parameters
    ----------
    q, k, v : torch.Tensor
        Queries, keys and values, one token per row; leading batch (and head) axes broadcast.
    mask : torch.Tensor of bool, optional
        ``True`` where a query may attend; broadcastable to ``(..., s_q, s_k)``.
    scale : float, optional
        Multiplier of the logits; defaults to ``1 / sqrt(d_k)``.

    Returns
    -------
    out : torch.Tensor
        The attended values.
    weights : torch.Tensor
        Attention weights; rows sum to one, fully-masked rows are zero.

    Shapes
    ------
    ``q (..., s_q, d_k)``, ``k (..., s_k, d_k)``, ``v (..., s_k, d_v)`` →
    ``out (..., s_q, d_v)``, ``weights (..., s_q, s_k)``.

    Raises
    ------
    ValueError
        On mismatched ``d_k``, keys and values of different lengths, an empty sequence, or a
        mask that is not boolean or does not broadcast to the logits.

    Examples
    --------
    >>> import math, torch
    >>> from attnlab.nn import scaled_dot_product_attention
    >>> q = k = v = torch.eye(2).unsqueeze(0)            # batch 1, two tokens, d = 2
    >>> out, w = scaled_dot_product_attention(q, k, v, scale=math.log(3.0))
    >>> w.squeeze(0)
    tensor([[0.7500, 0.2500],
            [0.2500, 0.7500]])
    """
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"queries and keys must share d_k: q {tuple(q.shape)}, k {tuple(k.shape)}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"keys and values must have the same length s_k: k {tuple(k.shape)}, "
            f"v {tuple(v.shape)}"
        )
    if q.shape[-2] == 0 or k.shape[-2] == 0:
        raise ValueError(f"empty sequence: q {tuple(q.shape)}, k {tuple(k.shape)}")
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    logits = (q @ k.transpose(-2, -1)) * scale
    if mask is None:
        weights = torch.softmax(logits, dim=-1)
        return weights @ v, weights
    if mask.dtype != torch.bool:
        raise ValueError(f"mask must be boolean (True = may attend), got dtype {mask.dtype}")
    try:
        full = torch.broadcast_shapes(mask.shape, logits.shape)
    except RuntimeError:
        full = None
    if full != logits.shape:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to the logits of shape "
            f"{tuple(logits.shape)} (..., s_q, s_k)"
        )
    # The most negative finite number instead of -inf keeps a fully-masked row finite
    # (softmax would give 0/0 = NaN); multiplying by the mask then zeroes that row exactly.
    logits = logits.masked_fill(~mask, torch.finfo(logits.dtype).min)
    weights = torch.softmax(logits, dim=-1) * mask
    return weights @ v, weights
