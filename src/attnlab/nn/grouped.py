"""Grouped-query attention: ``h`` query heads share ``g`` key/value heads (chapter 05, §5.9).

Multi-query attention (Shazeer, 2019) gives all query heads one key head and one value head;
grouped-query attention (Ainslie et al., 2023) gives each group of ``h / g`` consecutive query
heads one. ``g = h`` is ordinary multi-head attention and ``g = 1`` is multi-query attention.
What shrinks is the key/value cache of autoregressive decoding, by the factor ``h / g``.

Query head ``i`` reads key/value head ``i // (h // g)``, the grouping of
``torch.nn.functional.scaled_dot_product_attention(..., enable_gqa=True)`` and of
``k.repeat_interleave(h // g, dim=1)``. The shared heads are broadcast, not copied: the queries
are viewed as ``(batch, g, h // g, s_q, d_k)`` against keys ``(batch, g, 1, s_k, d_k)``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from attnlab._validate import check_bool, check_tensor, require_ndim, require_nonempty, shape_of
from attnlab.nn.attention import _check_mask, scaled_dot_product_attention

LAYOUTS = {
    "q": "(batch, h, s_q, d_k)",
    "k": "(batch, g, s_k, d_k)",
    "v": "(batch, g, s_k, d_v)",
}


def _check_inputs(q: Tensor, k: Tensor, v: Tensor) -> None:
    """Raise unless ``q``, ``k``, ``v`` are 4-D float tensors with compatible grouped shapes."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        like = None if name == "q" else q
        check_tensor(t, name, LAYOUTS[name], min_ndim=4, like=like, like_name="q")
        require_ndim(t, name, 4, LAYOUTS[name])
    shapes = f"q has shape {shape_of(q)}, k has shape {shape_of(k)}, v has shape {shape_of(v)}"
    if not q.shape[0] == k.shape[0] == v.shape[0]:
        raise ValueError(f"q, k and v must have the same batch size (axis 0): {shapes}")
    h, g = q.shape[1], k.shape[1]
    if v.shape[1] != g:
        raise ValueError(f"k and v must have the same number g of key/value heads: {shapes}")
    if h == 0 or g == 0:
        raise ValueError(f"empty head axis: {shapes}; q and k need at least one head each")
    if h % g:
        raise ValueError(
            f"the g = {g} key/value heads of k and v must divide the h = {h} query heads of q "
            f"(each group of h/g query heads shares one key/value head): {shapes}"
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"queries and keys must share d_k: {shapes}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"keys and values must have the same length s_k: {shapes}")
    require_nonempty({"q": q, "k": k})
    if q.shape[-1] == 0:
        raise ValueError(f"empty key size d_k = 0: {shapes}")


def _grouped_mask(mask: Tensor, logits_shape: tuple[int, int, int, int], g: int) -> Tensor:
    """Check a book mask against ``(batch, h, s_q, s_k)``; view it as ``(., g, h/g, ., .)``."""
    _check_mask(mask, torch.Size(logits_shape))  # the rule of scaled_dot_product_attention
    mask4 = mask.reshape((1,) * (4 - mask.ndim) + tuple(mask.shape))
    b, heads, s_q, s_k = mask4.shape
    if heads == 1:  # one mask for every head: broadcast over groups and group members
        return mask4.unsqueeze(2)
    return mask4.reshape(b, g, heads // g, s_q, s_k)


def grouped_query_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    *,
    scale: float | None = None,
    need_weights: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """Scaled dot-product attention where ``h`` query heads share ``g`` key/value heads.

    Query head ``i`` attends with key/value head ``i // (h // g)``:
    ``out[:, i] = softmax(q[:, i] k[:, j]ᵀ · scale) v[:, j]`` with ``j = i // (h // g)``, the
    same as ``torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True)``.
    ``g = h`` is multi-head attention, ``g = 1`` multi-query attention.

    Parameters
    ----------
    q : torch.Tensor
        Queries of ``h`` heads.
    k, v : torch.Tensor
        Keys and values of ``g`` heads; ``g`` must divide ``h``. Same dtype and device as ``q``.
    mask : torch.Tensor of bool, optional
        ``True`` where a query may attend; broadcastable to ``(batch, h, s_q, s_k)``. A query
        whose keys are all masked gets zero weights and a zero output, as in
        :func:`attnlab.nn.attention.scaled_dot_product_attention`.
    scale : float, optional
        Multiplier of the logits; defaults to ``1 / sqrt(d_k)``.
    need_weights : bool, optional
        ``False`` (default): return the output only. ``True``: return ``(out, weights)``.

    Returns
    -------
    out : torch.Tensor
        The attended values of every query head; alone unless ``need_weights=True`` (unlike
        :func:`~attnlab.nn.attention.scaled_dot_product_attention`, which always returns the
        pair).
    weights : torch.Tensor
        Only with ``need_weights=True``: the attention weights of every query head.

    Shapes
    ------
    ``q (batch, h, s_q, d_k)``, ``k (batch, g, s_k, d_k)``, ``v (batch, g, s_k, d_v)`` →
    ``out (batch, h, s_q, d_v)``, ``weights (batch, h, s_q, s_k)``.

    Raises
    ------
    TypeError
        If ``q``, ``k``, ``v`` or ``mask`` is not a tensor, ``scale`` is not a real number,
        or ``need_weights`` is not a bool (``1`` is not ``True``).
    ValueError
        If an input does not have exactly four axes, is not floating point, differs from ``q``
        in dtype or device; if the batch sizes differ, ``k`` and ``v`` have different numbers
        of heads, a head axis is empty, ``g`` does not divide ``h``, ``d_k`` or ``s_k``
        disagree, or a sequence is empty; if ``scale`` is not positive and finite; if ``mask``
        is not boolean or does not broadcast. While :func:`attnlab.nn.check_values` is on,
        also on NaN or infinite inputs and logits that overflow the dtype.

    Examples
    --------
    >>> import torch
    >>> from attnlab.nn import grouped_query_attention
    >>> q = torch.zeros(1, 4, 3, 2)                  # batch 1, h = 4 query heads, 3 queries
    >>> k = torch.zeros(1, 2, 5, 2)                  # g = 2 key heads, 5 keys
    >>> v = torch.arange(10.0).reshape(1, 2, 5, 1)   # head 0 holds 0..4, head 1 holds 5..9
    >>> out = grouped_query_attention(q, k, v)       # equal logits: the mean of each head's v
    >>> out.shape, out[0, :, 0, 0]
    (torch.Size([1, 4, 3, 1]), tensor([2., 2., 7., 7.]))
    """
    check_bool(need_weights, "need_weights")
    _check_inputs(q, k, v)
    b, h, s_q, d_k = q.shape
    g, s_k = k.shape[1], k.shape[2]
    grouped_mask = None if mask is None else _grouped_mask(mask, (b, h, s_q, s_k), g)
    out, weights = scaled_dot_product_attention(
        q.reshape(b, g, h // g, s_q, d_k),  # (batch, g, h/g, s_q, d_k)
        k.unsqueeze(2),  # (batch, g, 1, s_k, d_k): shared by the h/g heads of a group
        v.unsqueeze(2),
        mask=grouped_mask,
        scale=scale,
    )
    out = out.reshape(b, h, s_q, v.shape[-1])
    if need_weights:
        return out, weights.reshape(b, h, s_q, s_k)
    return out
