"""Multi-head self-attention from stacked weight tensors (chapter 05).

``h`` heads each run scaled dot-product attention with their own query, key and value
projections. Stacking the per-head matrices gives 3-tensors, and the whole layer is

1. ``Q = einsum("sd,hdk->hsk", X, W_Q)``, likewise ``K`` and ``V`` (one slice per head),
2. ``O_head = softmax(Q Kᵀ / sqrt(d_k)) V`` for every head at once, shape ``(h, s, d_v)``,
3. transpose to ``(s, h, d_v)`` and flatten to ``(s, h·d_v)`` (heads side by side, token by
   token),
4. multiply by ``W_O`` of shape ``(h·d_v, d_out)``.

Step 3 must transpose *before* it flattens: reshaping ``(h, s, d_v)`` straight to
``(s, h·d_v)`` is legal numpy but glues pieces of different tokens into one row.

:func:`split_heads` and :func:`merge_heads` convert between one wide matrix and the stacked
per-head form (the layout ``torch.nn.MultiheadAttention`` uses inside its single
``in_proj_weight``).
"""

from __future__ import annotations

import numpy as np

from attnlab._validate import (
    as_float_array,
    check_int,
    reject_tensor,
    require_finite,
    require_finite_logits,
    require_min_ndim,
    require_ndim,
)
from attnlab.attention import scaled_dot_product_attention


def split_heads(a: np.typing.ArrayLike, h: int) -> np.ndarray:
    """Cut the last axis of ``a`` into ``h`` equal blocks and stack them in front of axis -2.

    Used on a wide weight matrix ``W`` of shape ``(d, h·d_k)`` it gives the stacked per-head
    weights ``(h, d, d_k)``; used on projected tokens ``(s, h·d_k)`` it gives ``(h, s, d_k)``.
    Block ``i`` is the columns ``i·d_k … (i+1)·d_k - 1``.

    Parameters
    ----------
    a : array_like
        At least 2-D; its last size must be a multiple of ``h``.
    h : int
        Number of heads, ``h >= 1``.

    Returns
    -------
    numpy.ndarray
        The blocks, stacked on a new head axis.

    Shapes
    ------
    ``a (..., n, h·k)`` → ``(..., h, n, k)``.

    Raises
    ------
    TypeError
        If ``h`` is not an integer (a bool is not: ``True`` is not one head).
    ValueError
        If ``h < 1`` or ``h`` does not divide the last size of ``a``.

    Examples
    --------
    >>> import numpy as np
    >>> from attnlab import split_heads
    >>> w = np.arange(8.0).reshape(2, 4)        # d = 2, two heads of d_k = 2
    >>> split_heads(w, 2)[1]                    # head 1 = the last two columns
    array([[2., 3.],
           [6., 7.]])
    """
    a = as_float_array(a, "a")
    require_min_ndim(a, "a", 2, "(..., n, h*k) in split_heads")
    h = check_int(h, "h")
    width = a.shape[-1]
    if width % h != 0:
        raise ValueError(
            f"h={h} heads do not divide the width {width} of an array of shape {a.shape}"
        )
    k = width // h
    blocks = a.reshape(*a.shape[:-1], h, k)  # (..., n, h, k)
    return np.swapaxes(blocks, -3, -2)  # (..., h, n, k)


def merge_heads(a: np.typing.ArrayLike) -> np.ndarray:
    """Put the heads side by side again: the inverse of :func:`split_heads`.

    Transposes ``(..., h, n, k)`` to ``(..., n, h, k)`` and flattens the last two axes, so row
    ``t`` of the result is ``[a[0, t], a[1, t], …, a[h-1, t]]``: every piece comes from token
    ``t``.

    Parameters
    ----------
    a : array_like
        Stacked per-head arrays, at least 3-D.

    Returns
    -------
    numpy.ndarray
        The heads concatenated along the last axis.

    Shapes
    ------
    ``a (..., h, n, k)`` → ``(..., n, h·k)``.

    Raises
    ------
    ValueError
        If ``a`` has fewer than 3 axes.

    Examples
    --------
    >>> import numpy as np
    >>> from attnlab import merge_heads
    >>> heads = np.array([[[1.0], [2.0]], [[10.0], [20.0]]])   # h = 2, s = 2, d_v = 1
    >>> merge_heads(heads)                                     # token 0: [1, 10]
    array([[ 1., 10.],
           [ 2., 20.]])
    """
    a = as_float_array(a, "a")
    require_min_ndim(a, "a", 3, "(..., h, n, k) in merge_heads")
    h, n, k = a.shape[-3:]
    return np.swapaxes(a, -3, -2).reshape(*a.shape[:-3], n, h * k)


def multi_head_attention(
    x: np.typing.ArrayLike,
    w_q: np.typing.ArrayLike,
    w_k: np.typing.ArrayLike,
    w_v: np.typing.ArrayLike,
    w_o: np.typing.ArrayLike,
    mask: np.typing.ArrayLike | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Multi-head self-attention with stacked per-head weights (no biases).

    Every head ``i`` computes ``softmax(X W_Q[i] (X W_K[i])ᵀ / sqrt(d_k)) X W_V[i]``; the
    ``h`` results are placed side by side, token by token, and multiplied by ``W_O``.

    Parameters
    ----------
    x : array_like
        The sequence, one token per row.
    w_q, w_k : array_like
        Stacked query and key weights, ``w_q[i]`` is head ``i``'s ``(d, d_k)`` matrix.
    w_v : array_like
        Stacked value weights.
    w_o : array_like
        Output weights; rows ``i·d_v … (i+1)·d_v - 1`` read head ``i``.
    mask : array_like of bool, optional
        ``True`` where a query may attend to a key; shape ``(s, s)`` (the same for every
        head) or ``(h, s, s)``. A query with no allowed key gets zero weights and a zero
        head output.

    Returns
    -------
    out : numpy.ndarray
        The new sequence.
    weights : numpy.ndarray
        Every head's attention weights.

    Shapes
    ------
    ``x (s, d)``, ``w_q, w_k (h, d, d_k)``, ``w_v (h, d, d_v)``, ``w_o (h·d_v, d_out)``,
    ``mask (s, s)`` or ``(h, s, s)`` → ``out (s, d_out)``, ``weights (h, s, s)``.

    Raises
    ------
    ValueError
        If a weight is not 3-D (``w_o``: 2-D), if the weights disagree on ``h``, ``d``,
        ``d_k`` or ``d_v``, if they hold no head (``h = 0``), if ``w_o`` does not have
        ``h·d_v`` rows, if a weight is not finite or a projection overflows the dtype, or as in
        :func:`attnlab.attention.scaled_dot_product_attention` (empty sequence, bad mask, non-finite
        input).

    Notes
    -----
    The function does not require ``h`` to divide ``d``: the stacked form works for any
    ``d_k`` and ``d_v``. The usual choice ``d_k = d_v = d / h`` (which needs ``h | d``)
    makes the layer cost as much as one head of full width; :func:`split_heads` builds such
    weights from ``(d, d)`` matrices.

    Examples
    --------
    >>> import numpy as np
    >>> from attnlab import multi_head_attention
    >>> x = np.array([[1.0, 0.0], [0.0, 1.0]])        # s = 2 tokens, d = 2
    >>> w_zero = np.zeros((2, 2, 1))                  # h = 2 heads, d_k = 1: uniform weights
    >>> w_v = np.stack([[[1.0], [0.0]], [[0.0], [1.0]]])   # head 0 reads x[:, 0], head 1 x[:, 1]
    >>> out, w = multi_head_attention(x, w_zero, w_zero, w_v, np.eye(2))
    >>> out                                            # every token gets the mean token
    array([[0.5, 0.5],
           [0.5, 0.5]])
    >>> w.shape
    (2, 2, 2)
    """
    x = as_float_array(x, "x")
    require_ndim(x, "x", 2, "(s, d)")
    require_finite(x, "x")
    w_q = as_float_array(w_q, "w_q")
    w_k = as_float_array(w_k, "w_k")
    w_v = as_float_array(w_v, "w_v")
    w_o = as_float_array(w_o, "w_o")
    require_ndim(w_q, "w_q", 3, "(h, d, d_k)")
    require_ndim(w_k, "w_k", 3, "(h, d, d_k)")
    require_ndim(w_v, "w_v", 3, "(h, d, d_v)")
    require_ndim(w_o, "w_o", 2, "(h*d_v, d_out)")
    s, d = x.shape
    h, _, d_k = w_q.shape
    d_v = w_v.shape[2]
    if w_k.shape != w_q.shape:
        raise ValueError(
            f"w_q and w_k must have the same shape (h, d, d_k): got {w_q.shape} and {w_k.shape}"
        )
    if w_v.shape[:2] != (h, d) or w_q.shape[1] != d:
        raise ValueError(
            f"the weights must be (h, d, ·) with h={h} and d={d} (the width of x {x.shape}): "
            f"got w_q {w_q.shape}, w_v {w_v.shape}"
        )
    if h == 0:
        raise ValueError(f"the weights must hold h >= 1 heads, got w_q of shape {w_q.shape}")
    for name, w in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v), ("w_o", w_o)):
        require_finite(w, name)
    if w_o.shape[0] != h * d_v:
        raise ValueError(f"w_o must have h*d_v = {h}*{d_v} = {h * d_v} rows, got shape {w_o.shape}")
    if s == 0:
        raise ValueError(f"empty sequence: x has shape {x.shape}; every sequence needs a token")
    if mask is not None:
        reject_tensor(mask, "mask")
        m = np.asarray(mask)
        if m.shape not in ((s, s), (h, s, s)):
            raise ValueError(
                f"mask must have shape (s, s) = {(s, s)} or (h, s, s) = {(h, s, s)}, got {m.shape}"
            )
    # Step 1: one projection per head, (s, d) x (h, d, d_k) -> (h, s, d_k).
    projections = {}
    for name, w in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v)):
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is reported below
            projections[name] = np.einsum("sd,hdk->hsk", x, w)
        require_finite_logits(projections[name], what=f"projection x @ {name}")
    q, k, v = projections.values()
    # Step 2: every head attends at once; the head axis is a batch axis.
    heads, weights = scaled_dot_product_attention(q, k, v, mask=mask)  # (h, s, d_v), (h, s, s)
    # Steps 3-4: (h, s, d_v) -> (s, h, d_v) -> (s, h*d_v), then the output projection.
    with np.errstate(over="ignore", invalid="ignore"):
        out = merge_heads(heads) @ w_o
    require_finite_logits(out, what="output projection @ w_o")
    return out, weights
