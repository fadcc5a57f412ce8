"""Attention in linear memory: tiles, the online softmax and its backward pass (appendix A1).

:func:`tiled_attention` computes ``softmax(q kᵀ · scale) v`` one block of queries and keys at a
time, the way FlashAttention does (Dao et al. 2022), in plain PyTorch:

* forward: for each tile of queries, walk over the tiles of keys keeping a running maximum
  ``m`` and a running sum ``l`` of the exponentials (the *online softmax*, Milakov &
  Gimelshein 2018); when ``m`` grows, the sum and the partial output are rescaled by
  ``exp(m_old - m_new)``, which makes the result exact, not an approximation. Only the output
  and the log-sum-exp ``L = m + log l`` of every query are stored;
* backward: for each pair of tiles, the weights are recomputed from the saved ``L``
  (``P = exp(S - L)``) and the softmax's gradient uses ``D = rowsum(dO ∘ O)`` instead of the
  full weight matrix.

So no ``(s_q, s_k)`` matrix exists at any time, only ``(q_tile, k_tile)`` blocks, and what the
backward pass keeps is ``q, k, v, out`` and ``L``: linear in the sequence length.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from attnlab._validate import (
    QK_OVERFLOW,
    check_bool,
    check_float,
    check_int,
    require_finite_logits,
    values_checked,
)
from attnlab.nn.attention import _check_inputs, _check_mask

__all__ = ["tiled_attention"]


def _accumulator(dtype: torch.dtype) -> torch.dtype:
    """Running max, sum and output in float32 at least (float16 and bfloat16 inputs)."""
    return torch.promote_types(dtype, torch.float32)


def _block_mask(
    mask: Tensor | None, causal: bool, i0: int, i1: int, j0: int, j1: int, device: torch.device
) -> Tensor | None | bool:
    """Which keys ``j0:j1`` the queries ``i0:i1`` may see: a bool tensor, ``None`` (all) or
    ``False`` (none: a causal tile wholly above the diagonal, skipped)."""
    if causal and j0 > i1 - 1:
        return False
    block = None if mask is None else mask[..., i0:i1, j0:j1]
    if causal and j1 - 1 > i0:  # the diagonal crosses this tile
        rows = torch.arange(i0, i1, device=device)[:, None]
        tri = rows >= torch.arange(j0, j1, device=device)[None, :]
        block = tri if block is None else block & tri
    return block


def _logits(q_i: Tensor, k_j: Tensor, block: Tensor | None, acc: torch.dtype) -> Tensor:
    """``S = q_i k_jᵀ`` (queries already scaled), masked keys at ``-inf``: ``(..., tq, tk)``."""
    s = q_i @ k_j.transpose(-2, -1)
    if values_checked():  # in the inputs' dtype, where an overflow happens
        require_finite_logits(s, **QK_OVERFLOW)
    s = s.to(acc)
    if block is not None:
        s = s.masked_fill(~block, -math.inf)
    return s


def _inplace(op, a: Tensor, b: Tensor) -> Tensor:
    """``op(a, b)`` in place in ``a`` when ``a`` has the broadcast shape, else a new tensor
    (the logits of queries and keys shared by a batch are smaller than the values' batch)."""
    if a.shape == torch.broadcast_shapes(a.shape, b.shape):
        return getattr(a, f"{op}_")(b)
    return getattr(a, op)(b)


def _forward(q, k, v, mask, causal, scale, q_tile, k_tile) -> tuple[Tensor, Tensor]:
    """Output ``(lead, s_q, d_v)`` and log-sum-exp ``(lead, s_q)`` (``+inf`` on empty rows)."""
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    s_q, s_k, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
    acc = _accumulator(q.dtype)
    out = torch.empty(*lead, s_q, d_v, dtype=q.dtype, device=q.device)
    lse = torch.empty(*lead, s_q, dtype=acc, device=q.device)
    for i0 in range(0, s_q, q_tile):
        i1 = min(i0 + q_tile, s_q)
        q_i = q[..., i0:i1, :] * scale
        m = torch.full((*lead, i1 - i0), -math.inf, dtype=acc, device=q.device)  # running max
        l = torch.zeros_like(m)  # noqa: E741  running sum of exp(S - m)
        o = torch.zeros(*lead, i1 - i0, d_v, dtype=acc, device=q.device)  # running Σ exp(S-m) v
        for j0 in range(0, s_k, k_tile):
            j1 = min(j0 + k_tile, s_k)
            block = _block_mask(mask, causal, i0, i1, j0, j1, q.device)
            if block is False:
                continue
            s = _logits(q_i, k[..., j0:j1, :], block, acc)
            m_new = torch.maximum(m, s.amax(dim=-1))
            m_safe = m_new.masked_fill(m_new == -math.inf, 0.0)  # a row with no key yet
            alpha = torch.exp(m - m_safe)  # rescales what was summed against the old maximum
            p = _inplace("sub", s, m_safe[..., None]).exp_()  # masked keys: exp(-inf) = 0
            l = alpha * l + p.sum(dim=-1)  # noqa: E741
            o = o.mul_(alpha[..., None]).add_((p.to(v.dtype) @ v[..., j0:j1, :]).to(acc))
            m = m_new
        has_key = l > 0  # l >= 1 on every row that saw a key (its maximum adds exp(0) = 1)
        out[..., i0:i1, :] = o / torch.where(has_key, l, 1.0)[..., None]  # empty rows: 0
        lse[..., i0:i1] = torch.where(has_key, m + torch.log(l), math.inf)
    return out, lse


def _backward(q, k, v, out, lse, d_out, mask, causal, scale, q_tile, k_tile):
    """``dq, dk, dv`` of the broadcast shape (``lead``), from the saved ``lse``, tile by tile."""
    s_q, s_k = q.shape[-2], k.shape[-2]
    acc = _accumulator(q.dtype)
    d_out = d_out.to(acc)
    delta = (d_out * out.to(acc)).sum(dim=-1)  # D = rowsum(dO ∘ O), (lead, s_q)
    lead = delta.shape[:-1]
    dq = torch.zeros(*lead, s_q, q.shape[-1], dtype=acc, device=q.device)
    dk = torch.zeros(*lead, s_k, k.shape[-1], dtype=acc, device=q.device)
    dv = torch.zeros(*lead, s_k, v.shape[-1], dtype=acc, device=q.device)
    for j0 in range(0, s_k, k_tile):
        j1 = min(j0 + k_tile, s_k)
        k_j, v_j = k[..., j0:j1, :].to(acc), v[..., j0:j1, :].to(acc)
        for i0 in range(0, s_q, q_tile):
            i1 = min(i0 + q_tile, s_q)
            block = _block_mask(mask, causal, i0, i1, j0, j1, q.device)
            if block is False:
                continue
            q_i = q[..., i0:i1, :].to(acc) * scale
            s = _logits(q_i, k_j, block, acc)
            p = _inplace("sub", s, lse[..., i0:i1, None]).exp_()  # the weights again
            do_i = d_out[..., i0:i1, :]
            dv[..., j0:j1, :] += p.transpose(-2, -1) @ do_i  # dV = Pᵀ dO
            dp = do_i @ v_j.transpose(-2, -1)  # dP = dO Vᵀ
            ds = _inplace("mul", p, dp.sub_(delta[..., i0:i1, None]))  # dS = P ∘ (dP - D)
            dq[..., i0:i1, :].add_(ds @ k_j, alpha=scale)  # S = scale · q kᵀ
            dk[..., j0:j1, :] += ds.transpose(-2, -1) @ q_i  # q_i already carries the scale
    return dq, dk, dv


class _TiledAttention(torch.autograd.Function):
    """The autograd function behind :func:`tiled_attention` (arguments already checked)."""

    @staticmethod
    def forward(ctx, q, k, v, mask, causal, scale, q_tile, k_tile):  # noqa: D102
        out, lse = _forward(q, k, v, mask, causal, scale, q_tile, k_tile)
        ctx.save_for_backward(q, k, v, out, lse, mask)
        ctx.args = (causal, scale, q_tile, k_tile)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, d_out):  # noqa: D102
        q, k, v, out, lse, mask = ctx.saved_tensors
        dq, dk, dv = _backward(q, k, v, out, lse, d_out, mask, *ctx.args)
        grads = []
        for g, x in ((dq, q), (dk, k), (dv, v)):  # sum over the axes that were broadcast
            grads.append(g.sum_to_size(x.shape).to(x.dtype) if ctx.needs_input_grad[len(grads)]
                         else None)  # fmt: skip
        return (*grads, None, None, None, None, None)


def tiled_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    is_causal: bool = False,
    scale: float | None = None,
    q_tile: int = 128,
    k_tile: int = 128,
) -> Tensor:
    """``softmax(q kᵀ · scale) v`` in tiles, keeping memory linear in the sequence length.

    FlashAttention's algorithm (Dao et al. 2022) in plain PyTorch: the forward pass walks over
    ``k_tile`` keys at a time with the online softmax (a running maximum and sum, rescaled
    exactly when the maximum grows) and stores only the output and each query's log-sum-exp;
    the backward pass recomputes each tile's weights from the log-sum-exp and uses
    ``D = rowsum(dO ∘ O)``. No ``(s_q, s_k)`` matrix is ever formed: the largest temporaries
    are ``(q_tile, k_tile)`` blocks, and the tensors kept for the backward pass are
    ``q, k, v``, the output and the log-sum-exp (and the mask, if one is given).

    Parameters
    ----------
    q, k, v : torch.Tensor
        Queries, keys and values, one token per row, one floating dtype and device; leading
        batch (and head) axes broadcast.
    mask : torch.Tensor of bool, optional
        ``True`` where a query may attend; broadcastable to ``(..., s_q, s_k)``.
    is_causal : bool
        Query ``i`` may attend to keys ``j <= i`` only (top-left aligned, as
        ``torch.nn.functional.scaled_dot_product_attention``); tiles wholly above the diagonal
        are skipped. Combines with ``mask``: a key must be allowed by both.
    scale : float, optional
        Multiplier of the logits; defaults to ``1 / sqrt(d_k)``.
    q_tile, k_tile : int
        Queries and keys per tile (the last tile may be shorter).

    Returns
    -------
    torch.Tensor
        The attended values. A query whose keys are all masked gets a zero output and passes
        no gradient (the book's contract).

    Shapes
    ------
    ``q (..., s_q, d_k)``, ``k (..., s_k, d_k)``, ``v (..., s_k, d_v)``, ``mask`` broadcastable
    to ``(..., s_q, s_k)`` → ``(..., s_q, d_v)`` (the leading axes broadcast).

    Raises
    ------
    TypeError
        If ``q``, ``k``, ``v`` or ``mask`` is not a tensor, ``is_causal`` is not a bool, or
        ``scale``, ``q_tile``, ``k_tile`` are not numbers of the right kind (a bool is none).
    ValueError
        As :func:`~attnlab.nn.attention.scaled_dot_product_attention` (shapes, dtypes,
        devices, empty sequences, the mask), or on a non-positive scale or tile size. While
        :func:`attnlab.nn.check_values` is on, also on non-finite inputs and on logits that
        overflow the dtype (checked tile by tile).

    Examples
    --------
    >>> import torch
    >>> import torch.nn.functional as F
    >>> from attnlab.nn import tiled_attention
    >>> g = torch.Generator().manual_seed(0)
    >>> q, k = torch.randn(2, 10, 4, generator=g), torch.randn(2, 10, 4, generator=g)
    >>> v = torch.randn(2, 10, 3, generator=g)                  # d_v = 3, not d_k = 4
    >>> out = tiled_attention(q, k, v, is_causal=True, q_tile=4, k_tile=3)
    >>> tuple(out.shape)
    (2, 10, 3)
    >>> bool(torch.allclose(out, F.scaled_dot_product_attention(q, k, v, is_causal=True),
    ...                     atol=1e-6))
    True
    """
    _check_inputs(q, k, v)
    causal = check_bool(is_causal, "is_causal")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else check_float(scale, "scale")
    q_tile, k_tile = check_int(q_tile, "q_tile"), check_int(k_tile, "k_tile")
    if mask is not None:
        lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        _check_mask(mask, torch.Size((*lead, q.shape[-2], k.shape[-2])))
        if mask.device != q.device:
            raise ValueError(f"mask is on {mask.device} but q is on {q.device}; move it with .to")
        mask = mask.expand(*mask.shape[:-2], q.shape[-2], k.shape[-2])  # a view: tiles slice it
    return _TiledAttention.apply(q, k, v, mask, causal, scale, q_tile, k_tile)
