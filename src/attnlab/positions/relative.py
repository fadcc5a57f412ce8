"""Shaw et al.'s (2018) clipped relative positions in numpy (ch. 09).

Two learned tables of ``2 k_max + 1`` vectors, ``a^K`` added to the keys and ``a^V`` to the
values, indexed by the signed distance ``j - i`` of key ``j`` from query ``i`` clipped to
``[-k_max, k_max]``: :func:`relative_position_index` and :func:`shaw_attention`.
"""

from __future__ import annotations

import numpy as np

from attnlab._validate import (
    as_float_array,
    building_table,
    check_int,
    require_finite,
    require_finite_logits,
    require_min_ndim,
    require_ndim,
    require_qkv_sizes,
)
from attnlab.attention import _check_mask
from attnlab.softmax import softmax


def relative_position_index(n: int, k_max: int) -> np.ndarray:
    """Shaw et al.'s table index ``clip(j - i, -k_max, k_max) + k_max`` for query ``i``, key ``j``.

    Parameters
    ----------
    n : int
        Sequence length, ``n >= 1``.
    k_max : int
        Clipping distance, ``k_max >= 0``: all keys further than ``k_max`` to one side share a
        vector.

    Returns
    -------
    numpy.ndarray
        Integer indices in ``0 … 2 k_max``; index ``k_max`` is the token itself, ``k_max + 1``
        the next token to the right, ``k_max - 1`` the one to the left.

    Shapes
    ------
    ``→ (n, n)``, rows are queries ``i``, columns keys ``j``.

    Raises
    ------
    ValueError
        If ``n < 1`` or ``k_max < 0``.
    TypeError
        If ``n`` or ``k_max`` is not an integer (a bool or a float is not).

    Examples
    --------
    >>> from attnlab import relative_position_index
    >>> relative_position_index(4, k_max=1)
    array([[1, 2, 2, 2],
           [0, 1, 2, 2],
           [0, 0, 1, 2],
           [0, 0, 0, 1]])
    """
    n = check_int(n, "n", 1)
    k_max = check_int(k_max, "k_max (the clipping distance)", 0)
    with building_table("relative_position_index", {"n": n}, (n, n)):
        positions = np.arange(n)
        distance = positions[None, :] - positions[:, None]  # [i, j] = j - i
        return np.clip(distance, -k_max, k_max) + k_max


def _check_qkv(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> None:
    """Self-attention shapes: ``q, k (..., s, d_k)``, ``v (..., s, d_v)``, batch axes broadcast."""
    for name, arr in (("q", q), ("k", k), ("v", v)):
        require_min_ndim(arr, name, 2, "(..., s, d)")
    s = q.shape[-2]
    if k.shape[-2] != s or v.shape[-2] != s or q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"self-attention needs q, k (..., s, d_k) and v (..., s, d_v) of one length s: "
            f"got q {q.shape}, k {k.shape}, v {v.shape}"
        )
    require_qkv_sizes(q, k, v)


def _check_tables(a_k: np.ndarray, a_v: np.ndarray, d_k: int, d_v: int) -> int:
    """Validate Shaw's tables ``a_k (2k_max+1, d_k)``, ``a_v (2k_max+1, d_v)``; return k_max."""
    require_ndim(a_k, "a_k", 2, "(2k_max+1, d_k)")
    require_ndim(a_v, "a_v", 2, "(2k_max+1, d_v)")
    if a_k.shape[0] != a_v.shape[0] or a_k.shape[0] % 2 == 0:
        raise ValueError(
            f"a_k and a_v must both have 2k_max+1 rows (an odd number): got shapes {a_k.shape} "
            f"and {a_v.shape}"
        )
    if a_k.shape[1] != d_k or a_v.shape[1] != d_v:
        raise ValueError(
            f"table widths must match the heads: a_k {a_k.shape} needs d_k={d_k}, "
            f"a_v {a_v.shape} needs d_v={d_v}"
        )
    return a_k.shape[0] // 2


def shaw_attention(
    q: np.typing.ArrayLike,
    k: np.typing.ArrayLike,
    v: np.typing.ArrayLike,
    a_k: np.typing.ArrayLike,
    a_v: np.typing.ArrayLike,
    mask: np.typing.ArrayLike | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Self-attention with Shaw et al.'s relative position tables added to keys and values.

    With ``a^K_ij = a_k[clip(j-i, -k_max, k_max) + k_max]`` and ``a^V_ij`` likewise,

    ``e_ij = q_i · (k_j + a^K_ij) / sqrt(d_k)``, ``α_ij = softmax_j(e_ij)``,
    ``z_i = Σ_j α_ij (v_j + a^V_ij)``,

    where the clipping distance ``k_max`` is read from the tables' ``2 k_max + 1`` rows.

    Parameters
    ----------
    q, k : array_like
        Projected queries and keys (``q = x W^Q``, ``k = x W^K``); leading axes (batch, heads)
        broadcast.
    v : array_like
        Projected values.
    a_k, a_v : array_like
        The tables, one row per clipped distance ``-k_max … k_max`` (shared by all heads, as in the
        paper).
    mask : array_like of bool, optional
        ``True`` where query ``i`` may attend to key ``j``, broadcastable to ``(..., s, s)``.
        A query with no allowed key gets zero weights and a zero output.

    Returns
    -------
    out : numpy.ndarray
        ``z``, the attended values plus the value table.
    weights : numpy.ndarray
        ``α``, each row sums to one (or is all zero if fully masked).

    Shapes
    ------
    ``q, k (..., s, d_k)``, ``v (..., s, d_v)``, ``a_k (2k_max+1, d_k)``, ``a_v (2k_max+1, d_v)`` →
    ``out (..., s, d_v)``, ``weights (..., s, s)``.

    Raises
    ------
    ValueError
        On mismatched shapes (queries, keys and values must share the length ``s`` and
        broadcast in their batch axes; tables must have an odd number of rows and the heads'
        widths), an empty sequence or ``d_k = 0``, a non-boolean mask,
        non-finite input, or logits that overflow the dtype (easy in float16, whose largest
        number is 65504; without this check the softmax would read them as masked keys).
    TypeError
        If an input is a torch tensor.

    Examples
    --------
    >>> import numpy as np
    >>> from attnlab import shaw_attention
    >>> q = k = np.zeros((3, 2)); v = np.zeros((3, 1))
    >>> a_k = np.array([[0.0, 0.0], [0.0, 0.0], [0.0, 0.0]])   # k_max = 1: no key bias
    >>> a_v = np.array([[-1.0], [0.0], [1.0]])                 # values say "left" or "right"
    >>> out, w = shaw_attention(q, k, v, a_k, a_v)
    >>> out.ravel().round(3)          # token 0 sees one self + two right; token 2 the mirror
    array([ 0.667,  0.   , -0.667])
    """
    q, k, v = (as_float_array(t, name) for t, name in ((q, "q"), (k, "k"), (v, "v")))
    a_k, a_v = as_float_array(a_k, "a_k"), as_float_array(a_v, "a_v")
    for name, arr in (("q", q), ("k", k), ("v", v), ("a_k", a_k), ("a_v", a_v)):
        require_finite(arr, name)
    _check_qkv(q, k, v)
    clip = _check_tables(a_k, a_v, q.shape[-1], v.shape[-1])
    s = q.shape[-2]
    index = relative_position_index(s, clip)
    rel_k, rel_v = a_k[index], a_v[index]  # (s, s, d_k), (s, s, d_v)
    dtype = np.result_type(q, k, v, a_k, a_v)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is reported just below
        # Scaling the queries first (as scaled_dot_product_attention does) keeps float16 in range.
        q_scaled = (q * dtype.type(1.0 / np.sqrt(q.shape[-1]))).astype(dtype, copy=False)
        logits = q_scaled @ np.swapaxes(k, -1, -2) + np.einsum("...id,ijd->...ij", q_scaled, rel_k)
        logits = logits.astype(dtype, copy=False)
    require_finite_logits(logits)  # the inputs are finite: a non-finite logit is an overflow
    if mask is not None:
        logits = np.where(_check_mask(mask, logits.shape), logits, -np.inf)
    weights = softmax(logits, axis=-1)
    out = weights @ v + np.einsum("...ij,ijd->...id", weights, rel_v)
    return out.astype(dtype, copy=False), weights
