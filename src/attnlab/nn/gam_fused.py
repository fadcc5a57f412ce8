"""GAM as attention on features: the fused path of :mod:`attnlab.nn.gam` (chapter 08).

Each term of GAM's feature function is multiplicative, so its logits are dot products of
stacked features (:func:`~attnlab.nn.gam.gam_features`) and every brain is a standard
attention with scale 1. :func:`~attnlab.nn.gam.gam_fused_heads` runs all heads and brains in
one ``torch.nn.functional.scaled_dot_product_attention`` call, without any ``n × n`` matrix;
:class:`~attnlab.nn.gam.GeneralizedAttention` takes this path when no weights are asked for.
Both names are re-exported (and documented) by :mod:`attnlab.nn.gam`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from attnlab.nn.gam_functional import _check_y_b, _terms, signed_power

__all__ = ["gam_features", "gam_fused_heads"]


def gam_features(
    y: Tensor,
    b: Tensor,
    *,
    f: str = "power",
    n1: float = 1.0,
    coeffs: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Queries and keys whose dot products are GAM's logits: ``ε = Q Kᵀ``.

    Because each term of ``f`` is multiplicative (``(ab)^l = a^l b^l``, and the signed power
    alike), ``Σ_l A_l Y^{∘l} B (Y^{∘l})ᵀ`` is one dot product of stacked features:
    ``Q = [A_1 Y^{∘1} B, …, A_L Y^{∘L} B]`` against ``K = [Y^{∘1}, …, Y^{∘L}]``. So each brain
    is standard attention with these queries and keys and scale 1 (chapter 08, "GAM is
    attention on features").

    Parameters
    ----------
    y, b, f, n1, coeffs
        As in :func:`gam_logits`.

    Returns
    -------
    queries : torch.Tensor
        One set per brain (per leading axis of ``b``).
    keys : torch.Tensor
        Shared by every brain.

    Shapes
    ------
    ``y (batch, n, M)``, ``b (*lead, M, M)`` → ``queries (batch, *lead, n, L·M)``,
    ``keys (batch, n, L·M)`` (``L = 1`` for the power law).

    Raises
    ------
    ValueError
        As :func:`gam_logits`.

    Examples
    --------
    >>> import torch
    >>> from attnlab.nn.gam import gam_features, gam_logits
    >>> y, b = torch.randn(2, 5, 3, dtype=torch.float64), torch.randn(4, 3, 3, dtype=torch.float64)
    >>> q, k = gam_features(y, b, n1=1.5)
    >>> tuple(q.shape), tuple(k.shape)
    ((2, 4, 5, 3), (2, 5, 3))
    >>> bool(torch.allclose(q @ k.unsqueeze(1).transpose(-1, -2), gam_logits(y, b, n1=1.5)))
    True
    """
    _check_y_b(y, b)
    lead = b.shape[:-2]
    batch, n, m = y.shape
    queries, keys = [], []
    for a_l, p in _terms(f, n1, coeffs):
        g = signed_power(y, p)  # (batch, n, M)
        q = g.reshape(batch, *([1] * len(lead)), n, m) @ b  # (batch, *lead, n, M)
        queries.append(q if a_l is None else a_l[..., None, None] * q)
        keys.append(g)
    return torch.cat(queries, dim=-1), torch.cat(keys, dim=-1)


def gam_fused_heads(
    y: Tensor,
    b: Tensor,
    mix: Tensor,
    values: Tensor,
    mask: Tensor | None = None,
    *,
    f: str = "power",
    n1: float = 1.0,
    coeffs: Tensor | None = None,
    pad: bool | None = None,
) -> Tensor:
    """Every head's ``Σ_i mix_{a,i} SDPA(f(y) B_{a,i}, f(y), V_a)`` in one fused SDPA call.

    GAM's head outputs ``Φ_a V_a`` without any ``n × n`` matrix (chapter 08, "GAM is attention
    on features"). PyTorch's CPU flash kernel needs values as wide as the queries
    (``F = L·d``), so on the CPU (``pad=None`` or ``True``) every head and brain attends over
    all ``d`` value columns (zero-padded to ``F``) and keeps its own head's slice; keys and
    values are broadcast views, not copies. Elsewhere (``pad=False``) each head and brain gets
    its own ``d_v`` columns, which CUDA's memory-efficient kernel accepts. A query whose keys
    are all masked gets a zero output, as on the explicit path.

    Parameters
    ----------
    y : torch.Tensor
        The sequences the features come from (``batch`` may be 1 and broadcast).
    b : torch.Tensor
        Brains ``(h, N_B, d, d)``.
    mix : torch.Tensor
        Mixing weights ``(h, N_B)``.
    values : torch.Tensor
        ``(batch, n, d)``; head ``a`` owns columns ``a·d_v … (a+1)·d_v - 1``.
    mask : torch.Tensor of bool, optional
        ``(batch or 1, n, n)``, ``True`` = may attend (already checked).
    f, n1, coeffs
        As in :func:`gam_logits` (``coeffs`` of shape ``(L, h, 1)``).
    pad : bool, optional
        The value layout; default: padded on the CPU only.

    Returns
    -------
    torch.Tensor
        The head outputs.

    Shapes
    ------
    ``y (batch or 1, n, d)``, ``values (batch, n, d)`` → ``(batch, h, n, d / h)``.
    """
    batch, n, d = values.shape
    h, n_b = b.shape[0], b.shape[1]
    d_v = d // h
    if pad is None:
        pad = values.device.type == "cpu"
    q, k = gam_features(y, b, f=f, n1=n1, coeffs=coeffs)
    width = q.shape[-1]  # F = L·d
    q = q.reshape(-1, h * n_b, n, width).expand(batch, h * n_b, n, width)
    k = k.unsqueeze(1).expand(batch, h * n_b, n, width)
    if pad:
        v = F.pad(values, (0, width - d)) if width > d else values
        v = v.unsqueeze(1).expand(batch, h * n_b, n, width)
    else:
        v = values.reshape(batch, n, h, 1, d_v).permute(0, 2, 3, 1, 4)  # (batch, h, 1, n, d_v)
        v = v.expand(batch, h, n_b, n, d_v).reshape(batch, h * n_b, n, d_v)
    attn_mask, has_key = None, None
    if mask is not None:
        # A query with no allowed key attends to all (finite on every kernel and version),
        # then its output is zeroed: the book's convention, which the explicit path follows.
        has_key = mask.any(dim=-1, keepdim=True)  # (batch or 1, n, 1)
        attn_mask = (mask | ~has_key).unsqueeze(1)  # (batch or 1, 1, n, n)
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, scale=1.0)
    if pad:
        o = o[..., :d].reshape(batch, h, n_b, n, h, d_v)
        own = torch.diagonal(o, dim1=1, dim2=4)  # (batch, N_B, n, d_v, h): head a's columns
    else:
        own = o.reshape(batch, h, n_b, n, d_v).permute(0, 2, 3, 4, 1)  # the same layout
    z = torch.einsum("bindh,hi->bhnd", own, mix.to(own.dtype))
    if has_key is not None:
        z = z * has_key.unsqueeze(1).to(z.dtype)
    return z
