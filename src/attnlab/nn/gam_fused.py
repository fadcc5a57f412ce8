"""GAM as attention on features: the fused path of :mod:`attnlab.nn.gam` (chapter 08).

Each term of GAM's feature function is multiplicative, so its logits are dot products of
stacked features (:func:`~attnlab.nn.gam.gam_features`) and every brain is a standard
attention with scale 1. :func:`~attnlab.nn.gam.gam_fused_heads` runs every head and brain
through ``torch.nn.functional.scaled_dot_product_attention``, one brain at a time, without any
``n × n`` matrix but the mask's; :class:`~attnlab.nn.gam.GeneralizedAttention` takes this path
when no weights are asked for. Both names are re-exported (and documented) by :mod:`attnlab.nn.gam`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.utils.checkpoint import checkpoint

from attnlab._validate import check_bool, check_int, check_tensor, shape_of
from attnlab.nn.attention import _check_mask
from attnlab.nn.gam_functional import _check_y_b, _terms, signed_power
from attnlab.nn.tiled import tiled_attention

__all__ = ["gam_features", "gam_fused_heads", "check_tiles"]


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
    keys = _stacked_powers(y, f, n1, coeffs)  # (batch, n, L·M)
    queries = []
    for term, (a_l, _) in enumerate(_terms(f, n1, coeffs)):
        g = keys[..., term * m : (term + 1) * m]  # Y^{∘l}, (batch, n, M)
        q = g.reshape(batch, *([1] * len(lead)), n, m) @ b  # (batch, *lead, n, M)
        queries.append(q if a_l is None else a_l[..., None, None] * q)
    return torch.cat(queries, dim=-1), keys


def _stacked_powers(y: Tensor, f: str, n1: float, coeffs: Tensor | None) -> Tensor:
    """The keys of every brain: ``[Y^{∘1}, …, Y^{∘L}]`` (signed powers), ``(…, n, L·M)``."""
    return torch.cat([signed_power(y, p) for _, p in _terms(f, n1, coeffs)], dim=-1)


def _brain_queries(keys: Tensor, b: Tensor, a: Tensor | None) -> Tensor:
    """One brain's queries ``Q = [A_l Y^{∘l} B]_l`` from the stacked keys, ``(…, n, L·M)``.

    ``keys (batch or 1, n, L·M)``, ``b (M, M)``, ``a (L,)`` or ``None`` (power law).
    """
    m = b.shape[-1]
    terms = keys.unflatten(-1, (-1, m))  # (batch or 1, n, L, M): Y^{∘l} for each l
    if a is None:
        q = terms @ b  # (batch or 1, n, 1, M): Y B
    else:  # scale B, not the product, so that autograd keeps no second (n, L·M) tensor
        q = (terms.transpose(-3, -2) @ (a[:, None, None] * b)).transpose(-3, -2)  # A_l Y^{∘l} B
    return q.flatten(-2)


def _one_brain(
    keys: Tensor,
    b: Tensor,
    a: Tensor | None,
    values: Tensor,
    bias: Tensor | None,
    weight: Tensor,
    cols: slice,
) -> Tensor:
    """One brain of one head: ``weight · SDPA(Q, K, V)[..., cols]`` with ``Q = [A_l Y^{∘l} B]_l``.

    ``keys (batch or 1, n, L·M)``, ``b (M, M)``, ``a (L,)`` or ``None`` (power law),
    ``values (batch, n, F or d_v)``, ``bias`` an additive mask ``(batch or 1, 1, n, n)`` or
    ``None``, ``weight`` the brain's ``W^P`` (a scalar) → ``(batch, n, d_v)``.
    """
    batch, n = values.shape[0], values.shape[1]
    q = _brain_queries(keys, b, a).unsqueeze(1).expand(batch, 1, n, keys.shape[-1])
    k = keys.unsqueeze(1).expand(batch, 1, n, keys.shape[-1])
    o = F.scaled_dot_product_attention(q, k, values.unsqueeze(1), attn_mask=bias, scale=1.0)
    return weight * o[:, 0, :, cols]  # (batch, n, d_v)


def _one_brain_tiled(
    keys: Tensor,
    b: Tensor,
    a: Tensor | None,
    values: Tensor,
    mask: Tensor | None,
    weight: Tensor,
    tiles: tuple[int, int],
) -> Tensor:
    """One brain through :func:`~attnlab.nn.tiled.tiled_attention`: ``weight · attn(Q, K, V_a)``.

    ``values (batch, n, d_v)``, the head's own columns; ``mask`` boolean ``(batch or 1, n, n)``
    or ``None`` → ``(batch, n, d_v)``. What the backward pass keeps of the brain is its
    output (``d_v`` wide) and log-sum-exp; its queries are not kept but rebuilt from the
    shared keys when the backward pass reaches the brain (``saved_tensors_hooks``): one
    ``(n, L·M) × (M, M)`` product again, against the ``n × n`` work of the attention.
    """
    q = _brain_queries(keys, b, a)
    recipe = (q.data_ptr(), q.shape, q.stride())

    def pack(t: Tensor) -> Tensor | tuple:
        same = (t.data_ptr(), t.shape, t.stride()) == recipe
        return ("queries",) if same else t

    def unpack(x: Tensor | tuple) -> Tensor:
        if isinstance(x, tuple):
            with torch.no_grad():
                return _brain_queries(keys, b, a)
        return x

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        o = tiled_attention(q, keys, values, mask, scale=1.0, q_tile=tiles[0], k_tile=tiles[1])
    return weight * o


def check_tiles(tiles: object, name: str = "tiles") -> tuple[int, int]:
    """``(q_tile, k_tile)`` as two positive ints, or a ``TypeError``/``ValueError`` naming it."""
    if not isinstance(tiles, tuple) or len(tiles) != 2:
        raise TypeError(f"{name} must be a tuple (q_tile, k_tile) of two ints, got {tiles!r}")
    return check_int(tiles[0], f"{name}[0] (q_tile)"), check_int(tiles[1], f"{name}[1] (k_tile)")


def _tiled_heads(y, b, mix, values, mask, f, n1, coeffs, tiles) -> Tensor:
    """The tiled path of :func:`gam_fused_heads` (arguments checked): ``(batch, h, n, d_v)``."""
    h, n_b, d = b.shape[0], b.shape[1], values.shape[-1]
    d_v = d // h
    keys = _stacked_powers(y, f, n1, coeffs)  # (batch or 1, n, L·d), shared by every brain
    mix = mix.to(values.dtype)
    heads = []
    for a in range(h):
        v = values[..., a * d_v : (a + 1) * d_v]  # this head's own d_v columns
        a_l = None if coeffs is None else coeffs[:, a, 0]
        z_a = None
        for i in range(n_b):
            o = _one_brain_tiled(keys, b[a, i], a_l, v, mask, mix[a, i], tiles)
            z_a = o if z_a is None else z_a + o
        heads.append(z_a)
    return torch.stack(heads, dim=1)


def _checked_mask(
    mask: Tensor | None, batch: int, n: int, device: torch.device
) -> Tensor | None:
    """A book mask for GAM's ``(batch, n, n)`` logits, as ``(batch or 1, n, n)``.

    One rule for the layer and :func:`gam_fused_heads`: a boolean tensor (``True`` = may
    attend) of shape ``(n, n)`` or ``(batch or 1, n, n)``, on ``device``.

    Raises
    ------
    TypeError
        If ``mask`` is not a tensor (a numpy mask: ``torch.from_numpy`` first).
    ValueError
        If it is not boolean, not 2-D or 3-D, does not broadcast to ``(batch, n, n)`` or lies
        on another device.
    """
    if mask is None:
        return None
    _check_mask(mask, torch.Size((batch, n, n)))  # a bool tensor that broadcasts
    if mask.dim() not in (2, 3):
        raise ValueError(f"mask must have shape (n, n) or (batch, n, n), got {shape_of(mask)}")
    if mask.device != device:
        raise ValueError(f"mask is on {mask.device} but y is on {device}; move it with .to")
    return mask if mask.dim() == 3 else mask.unsqueeze(0)


def _check_fused_args(
    y: Tensor, b: Tensor, mix: Tensor, values: Tensor, mask: Tensor | None
) -> Tensor | None:
    """Raise unless the arguments of :func:`gam_fused_heads` fit together; the checked mask."""
    _check_y_b(y, b)
    if b.dim() != 4:
        raise ValueError(f"b must have shape (h, N_B, d, d), got shape {shape_of(b)}")
    h, n_b, d = b.shape[0], b.shape[1], b.shape[-1]
    if tuple(mix.shape) != (h, n_b):
        raise ValueError(f"mix must have shape (h, N_B) = {(h, n_b)}, got {shape_of(mix)}")
    check_tensor(values, "values", f"(batch, n, {d})", min_ndim=3, like=y)
    n = y.shape[1]
    if values.dim() != 3 or values.shape[1:] != (n, d):
        raise ValueError(
            f"values must have shape (batch, n, d) = (batch, {n}, {d}), got {shape_of(values)}"
        )
    if d % h:
        raise ValueError(f"h = {h} must divide d = {d} (each head owns d / h value columns)")
    if y.shape[0] not in (1, values.shape[0]):
        raise ValueError(
            f"y must have batch 1 or the batch of values ({values.shape[0]}), got {shape_of(y)}"
        )
    return _checked_mask(mask, values.shape[0], n, values.device)


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
    recompute: bool = False,
    tiles: tuple[int, int] | None = None,
) -> Tensor:
    """Every head's ``Σ_i mix_{a,i} SDPA(Q_{a,i}, K, V_a)``, one brain at a time.

    GAM's head outputs ``Φ_a V_a`` without any ``n × n`` matrix (chapter 08, "GAM is attention
    on features"); with a mask, one additive ``(batch or 1, 1, n, n)`` copy of it is shared by
    every brain. Each brain of each head is one call of
    ``torch.nn.functional.scaled_dot_product_attention`` with scale 1, with queries
    ``Q_{a,i} = [A_{a,l} Y^{∘l} B_{a,i}]_l`` and keys ``K = [Y^{∘l}]_l``
    (:func:`gam_features`); the keys are computed once and shared. One brain at a time, not
    all in one batched call, so that only one brain's attention is being computed at any moment
    (a batched call would hold every brain's queries and outputs together). PyTorch's CPU flash
    kernel needs values as wide as the queries (``F = L·d``), so on the CPU
    (``pad=None`` or ``True``) every brain attends over all ``d`` value columns (zero-padded to
    ``F``) and keeps its own head's slice. Elsewhere (``pad=False``) each brain gets its own
    head's ``d_v`` columns, which CUDA's memory-efficient kernel should accept (not checked on a
    GPU yet). A query whose keys are all masked gets a zero output, as on the explicit path.

    With ``recompute=True`` each brain runs under ``torch.utils.checkpoint``: its queries and
    attention output are not kept for the backward pass but computed again there, one brain at
    a time. That trades one more forward pass of attention for memory: what the backward pass
    keeps no longer grows with ``h · N_B`` (Performance page).

    With ``tiles=(q_tile, k_tile)`` each brain runs through
    :func:`~attnlab.nn.tiled.tiled_attention` instead of PyTorch's kernel (the *tiled*
    path): every brain attends over its own head's ``d_v`` value columns on every device (no
    padding), the backward pass keeps each brain's ``d_v``-wide output and one log-sum-exp per
    query, and the brain's queries are rebuilt from the shared keys when the backward pass
    reaches it (appendix A1, Performance page).

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
        ``(n, n)`` or ``(batch or 1, n, n)``, ``True`` = may attend, on the values' device.
    f, n1, coeffs
        As in :func:`gam_logits` (``coeffs`` of shape ``(L, h, 1)``).
    pad : bool, optional
        The value layout; default: padded on the CPU only.
    recompute : bool
        Recompute each brain in the backward pass instead of storing it.
    tiles : tuple of int, optional
        ``(q_tile, k_tile)``: take the tiled path with these tiles; ``pad`` is then ignored
        and ``recompute`` must be ``False``.

    Returns
    -------
    torch.Tensor
        The head outputs.

    Shapes
    ------
    ``y (batch or 1, n, d)``, ``values (batch, n, d)`` → ``(batch, h, n, d / h)``.

    Raises
    ------
    ValueError
        If the shapes do not fit together (``b`` not ``(h, N_B, d, d)``, ``mix`` not
        ``(h, N_B)``, ``values`` not ``(batch, n, d)``, ``h`` not dividing ``d``), or the mask
        is not boolean, not 2-D or 3-D, does not broadcast to ``(batch, n, n)`` or lies on
        another device; and as :func:`gam_logits`.
    TypeError
        If the mask is not a tensor, ``pad`` / ``recompute`` is not a bool, or ``tiles`` is not
        a pair of positive integers (a ``ValueError`` if one is below 1, or ``recompute`` is
        ``True`` too).
    """
    mask = _check_fused_args(y, b, mix, values, mask)
    check_bool(recompute, "recompute")
    if tiles is not None:
        tiles = check_tiles(tiles)
        if recompute:
            raise ValueError("tiles and recompute=True are two ways to save memory; pick one")
        return _tiled_heads(y, b, mix, values, mask, f, n1, coeffs, tiles)
    if pad is not None:
        check_bool(pad, "pad")
    batch, n, d = values.shape
    h, n_b = b.shape[0], b.shape[1]
    d_v = d // h
    if pad is None:
        pad = values.device.type == "cpu"
    keys = _stacked_powers(y, f, n1, coeffs)  # (batch or 1, n, F), F = L·d
    width = keys.shape[-1]
    mix = mix.to(values.dtype)
    bias, has_key = None, None
    if mask is not None:
        # A query with no allowed key attends to all (finite on every kernel and version),
        # then its output is zeroed: the book's convention, which the explicit path follows.
        has_key = mask.any(dim=-1, keepdim=True)  # (batch or 1, n, 1)
        allowed = (mask | ~has_key).unsqueeze(1)  # (batch or 1, 1, n, n)
        bias = torch.zeros(allowed.shape, dtype=keys.dtype, device=keys.device)
        bias = bias.masked_fill(~allowed, -torch.inf)  # one additive mask for every brain
    padded = F.pad(values, (0, width - d)) if pad and width > d else values
    heads = []
    for a in range(h):
        own = slice(a * d_v, (a + 1) * d_v)
        v, cols = (padded, own) if pad else (values[..., own], slice(None))
        a_l = None if coeffs is None else coeffs[:, a, 0]  # (L,): this head's A_l
        z_a = None
        for i in range(n_b):
            args = (keys, b[a, i], a_l, v, bias, mix[a, i], cols)
            if recompute:
                o = checkpoint(_one_brain, *args, use_reentrant=False)
            else:
                o = _one_brain(*args)
            z_a = o if z_a is None else z_a + o
        heads.append(z_a)
    z = torch.stack(heads, dim=1)  # (batch, h, n, d_v)
    if has_key is not None:
        z = z * has_key.unsqueeze(1).to(z.dtype)
    return z
