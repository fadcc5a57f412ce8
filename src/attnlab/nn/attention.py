"""Scaled dot-product attention in PyTorch (chapters 02–04).

The torch counterpart of :func:`attnlab.attention.scaled_dot_product_attention`, differentiable and
batched, with the book's mask convention (``True`` = may attend) and zero weights and output
for a query whose keys are all masked. Unlike
``torch.nn.functional.scaled_dot_product_attention`` it also returns the weights, which the
book plots; forward and backward agree with the built-in (see ``tests/test_nn_attention.py``).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attnlab._validate import (
    QK_OVERFLOW,
    check_float,
    require_finite,
    require_finite_logits,
    require_min_ndim,
    require_qkv_sizes,
    shape_of,
    values_checked,
)


def _check_inputs(q: Tensor, k: Tensor, v: Tensor) -> None:
    """Raise unless ``q``, ``k``, ``v`` have compatible attention shapes (values if switched on)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        require_min_ndim(t, name, 2, "(..., s, d)")
        if not t.is_floating_point():
            raise ValueError(f"{name} must be a floating-point tensor, got dtype {t.dtype}")
    if not q.dtype == k.dtype == v.dtype:
        raise ValueError(f"q, k and v must share one dtype, got {q.dtype}, {k.dtype} and {v.dtype}")
    if not q.device == k.device == v.device:
        raise ValueError(
            f"q, k and v must be on one device, got {q.device}, {k.device} and {v.device}"
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"queries and keys must share d_k: q has shape {shape_of(q)}, k has shape {shape_of(k)}"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"keys and values must have the same length s_k: k has shape {shape_of(k)}, "
            f"v has shape {shape_of(v)}"
        )
    require_qkv_sizes(q, k, v)
    if values_checked():
        for name, t in (("q", q), ("k", k), ("v", v)):
            require_finite(t, name)


def _require_bool_mask(mask: Tensor) -> None:
    """Raise ``TypeError`` unless ``mask`` is a tensor, ``ValueError`` unless it is boolean."""
    if not isinstance(mask, Tensor):
        raise TypeError(
            f"mask must be a torch.Tensor of bool, got {type(mask).__name__}; "
            "convert a numpy mask with torch.from_numpy(mask)"
        )
    if mask.dtype != torch.bool:
        raise ValueError(f"mask must be boolean (True = may attend), got dtype {mask.dtype}")


def _check_mask(mask: Tensor, logits_shape: torch.Size) -> None:
    """Raise ``ValueError`` unless ``mask`` is boolean and broadcasts to ``logits_shape``."""
    _require_bool_mask(mask)
    try:
        full = torch.broadcast_shapes(mask.shape, logits_shape)
    except RuntimeError:
        full = None
    if full != logits_shape:
        raise ValueError(
            f"mask of shape {shape_of(mask)} does not broadcast to the logits of shape "
            f"{tuple(logits_shape)} (..., s_q, s_k)"
        )


def masked_softmax(logits: Tensor, mask: Tensor | None) -> Tensor:
    """Softmax over the last axis (the keys) with the book's boolean mask.

    Masked keys (``False``) get weight exactly 0, and a query whose keys are all masked gets a
    row of zeros instead of NaN. The most negative finite number, not ``-inf``, is written into
    the masked logits: softmax of an all ``-inf`` row would be 0/0 = NaN in the forward and the
    backward pass. In a row with at least one key left, ``exp`` of that number minus the row's
    maximum is exactly 0; a row with no key left would come out uniform, so when the mask has
    such a row the weights are multiplied by the mask, which zeroes the row and cuts its
    gradient. (A causal mask has none, and skips that multiplication: one pass over the
    ``(..., s_q, s_k)`` weights fewer, forward and backward.)

    Parameters
    ----------
    logits : torch.Tensor
        Attention logits.
    mask : torch.Tensor of bool or None
        ``True`` where a query may attend; broadcastable to ``logits``. ``None``: plain softmax.

    Returns
    -------
    torch.Tensor
        The weights, same shape as ``logits``.

    Shapes
    ------
    ``logits (..., s_q, s_k)``, ``mask`` broadcastable to it → ``(..., s_q, s_k)``.

    Raises
    ------
    TypeError
        If ``logits`` or ``mask`` is not a tensor.
    ValueError
        If ``logits`` are not floating point or have no key (an empty last axis), or ``mask``
        is not boolean or does not broadcast to the logits; while
        :func:`attnlab.nn.check_values` is on, also if a logit is NaN or infinite (an
        overflow of the dtype or a non-finite input upstream).

    Examples
    --------
    >>> import torch
    >>> from attnlab.nn.attention import masked_softmax
    >>> masked_softmax(torch.zeros(2, 3), torch.tensor([[True, True, False], [False] * 3]))
    tensor([[0.5000, 0.5000, 0.0000],
            [0.0000, 0.0000, 0.0000]])
    """
    if not isinstance(logits, Tensor):
        raise TypeError(f"logits must be a torch.Tensor, got {type(logits).__name__}")
    if not logits.is_floating_point():
        raise ValueError(f"logits must be a floating-point tensor, got dtype {logits.dtype}")
    require_min_ndim(logits, "logits", 1, "(..., s_k)")
    if logits.shape[-1] == 0:
        raise ValueError(
            f"empty sequence: logits has shape {shape_of(logits)}; softmax needs at least one key"
        )
    if values_checked():
        require_finite_logits(logits, inputs_checked=False)
    return _softmax_with_mask(logits, mask)


def _softmax_with_mask(logits: Tensor, mask: Tensor | None) -> Tensor:
    """:func:`masked_softmax` after the logits were checked."""
    if mask is None:
        return torch.softmax(logits, dim=-1)
    _check_mask(mask, logits.shape)
    # masked keys get the most negative finite logit (torch.where is cheaper than masked_fill
    # here, forward and backward, and needs no inverted copy of the mask)
    weights = torch.softmax(torch.where(mask, logits, torch.finfo(logits.dtype).min), dim=-1)
    # Some query has no key left, so its row came out uniform: zero it, and its gradient. (This
    # reads the mask's values: a GPU waits for them; the meta device has none and multiplies.)
    if mask.is_meta or not mask.any(dim=-1).all():
        weights = weights * mask
    return weights


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
        Queries, keys and values, one token per row, one floating dtype; leading batch
        (and head) axes broadcast.
    mask : torch.Tensor of bool, optional
        ``True`` where a query may attend; broadcastable to ``(..., s_q, s_k)``. A query
        whose keys are all masked gets zero weights and a zero output (as the built-in
        ``torch.nn.functional.scaled_dot_product_attention`` does in torch 2.13).
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
        On mismatched ``d_k``, keys and values of different lengths, an empty sequence,
        batch axes that do not broadcast, inputs of different or non-float dtypes or
        devices, a non-positive scale, or a mask that is not boolean or does not broadcast.
        While :func:`attnlab.nn.check_values` is on, also on non-finite inputs and on logits
        that overflow the dtype (as the numpy core always does); otherwise those give NaN.
    TypeError
        If an input is not a tensor or ``scale`` is not a real number.

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
    _check_inputs(q, k, v)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else check_float(scale, "scale")
    # Scaling the queries (s_q·d_k numbers) is cheaper than scaling the logits (s_q·s_k).
    logits = (q * scale) @ k.transpose(-2, -1)
    if values_checked():  # the inputs are finite: a non-finite logit is an overflow
        require_finite_logits(logits, **QK_OVERFLOW)
    weights = _softmax_with_mask(logits, mask)
    return weights @ v, weights


class ScaledDotProductAttention(nn.Module):
    """Scaled dot-product attention as a module (no parameters), returning output and weights.

    A thin wrapper around :func:`scaled_dot_product_attention` for use inside
    ``nn.Sequential``-style models and hooks; the ``scale`` is fixed at construction.

    Parameters
    ----------
    scale : float, optional
        Multiplier of the logits; defaults to ``1 / sqrt(d_k)`` of each call's queries.

    Shapes
    ------
    ``q (..., s_q, d_k)``, ``k (..., s_k, d_k)``, ``v (..., s_k, d_v)`` →
    ``out (..., s_q, d_v)``, ``weights (..., s_q, s_k)``.

    Examples
    --------
    >>> import torch
    >>> from attnlab.nn import ScaledDotProductAttention
    >>> attend = ScaledDotProductAttention()
    >>> x = torch.zeros(2, 5, 4)                          # batch 2, five tokens, d = 4
    >>> out, w = attend(x, x, x)
    >>> tuple(out.shape), tuple(w.shape), round(float(w[0, 0, 0]), 4)   # uniform
    ((2, 5, 4), (2, 5, 5), 0.2)
    """

    def __init__(self, scale: float | None = None) -> None:
        super().__init__()
        self.scale = None if scale is None else check_float(scale, "scale")

    def forward(
        self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """Attend from ``q`` to ``k``, average ``v`` (see :func:`scaled_dot_product_attention`)."""
        return scaled_dot_product_attention(q, k, v, mask=mask, scale=self.scale)

    def extra_repr(self) -> str:
        return f"scale={self.scale}"
