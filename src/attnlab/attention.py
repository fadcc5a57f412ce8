"""Scaled dot-product attention and single-head self-attention (chapters 02–04).

Row convention: queries ``q`` of shape ``(..., s_q, d_k)``, keys ``k`` of shape
``(..., s_k, d_k)``, values ``v`` of shape ``(..., s_k, d_v)``, one token per row:

.. math:: \\operatorname{Attention}(Q, K, V) = \\operatorname{softmax}\\!\\left(
          \\frac{Q K^\\top}{\\sqrt{d_k}}\\right) V ,

with the softmax over the last axis (the keys), so each row of weights sums to one.
"""

from __future__ import annotations

import numpy as np

from attnlab._validate import as_float_array, require_finite
from attnlab.softmax import softmax


def _check_mask(mask: np.typing.ArrayLike, logits_shape: tuple[int, ...]) -> np.ndarray:
    """Return ``mask`` as a boolean array that broadcasts to ``logits_shape`` (or raise)."""
    m = np.asarray(mask)
    if m.dtype != np.bool_:
        raise ValueError(
            f"mask must be boolean (True = may attend), got dtype {m.dtype}; "
            "additive float masks are not accepted"
        )
    try:
        np.broadcast_shapes(m.shape, logits_shape)
    except ValueError:
        raise ValueError(
            f"mask of shape {m.shape} does not broadcast to the attention logits of shape "
            f"{logits_shape} (..., s_q, s_k)"
        ) from None
    if np.broadcast_shapes(m.shape, logits_shape) != tuple(logits_shape):
        raise ValueError(
            f"mask of shape {m.shape} would enlarge the logits of shape {logits_shape}"
        )
    return m


def scaled_dot_product_attention(
    q: np.typing.ArrayLike,
    k: np.typing.ArrayLike,
    v: np.typing.ArrayLike,
    mask: np.typing.ArrayLike | None = None,
    scale: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Scaled dot-product attention, ``softmax(q kᵀ · scale) v``, with optional boolean mask.

    Parameters
    ----------
    q : array_like
        Queries, one per row.
    k : array_like
        Keys, one per row; same last size ``d_k`` as ``q``.
    v : array_like
        Values, one per key.
    mask : array_like of bool, optional
        ``True`` where a query may attend to a key (the convention of
        ``torch.nn.functional.scaled_dot_product_attention``); must broadcast to
        ``(..., s_q, s_k)``. A query whose keys are all masked gets zero weights and a zero
        output (not NaN).
    scale : float, optional
        Multiplier of the logits; defaults to ``1 / sqrt(d_k)``, the per-head key size.

    Returns
    -------
    out : numpy.ndarray
        The attended values.
    weights : numpy.ndarray
        The attention weights; each row sums to one (or is all zero if fully masked).

    Shapes
    ------
    ``q (..., s_q, d_k)``, ``k (..., s_k, d_k)``, ``v (..., s_k, d_v)``, ``mask``
    broadcastable to ``(..., s_q, s_k)`` → ``out (..., s_q, d_v)``,
    ``weights (..., s_q, s_k)``. Leading batch axes broadcast.

    Raises
    ------
    ValueError
        On mismatched ``d_k``, keys and values of different lengths, an empty sequence, a
        mask that is not boolean or does not broadcast, a non-positive or non-finite scale,
        or non-finite inputs.

    Examples
    --------
    >>> import numpy as np
    >>> from attnlab import scaled_dot_product_attention
    >>> q = np.array([[1.0, 0.0]])               # one query, d_k = 2
    >>> k = np.array([[1.0, 0.0], [0.0, 1.0]])   # two keys
    >>> v = np.array([[10.0], [20.0]])           # their values, d_v = 1
    >>> out, w = scaled_dot_product_attention(q, k, v, scale=np.log(3.0))
    >>> w.round(3), out.round(3)
    (array([[0.75, 0.25]]), array([[12.5]]))
    """
    q = as_float_array(q, "q")
    k = as_float_array(k, "k")
    v = as_float_array(v, "v")
    for name, arr in (("q", q), ("k", k), ("v", v)):
        if arr.ndim < 2:
            raise ValueError(f"{name} must have shape (..., s, d), got shape {arr.shape}")
        require_finite(arr, name)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"queries and keys must share d_k: q has shape {q.shape}, k has shape {k.shape}"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"keys and values must have the same length s_k: k has shape {k.shape}, "
            f"v has shape {v.shape}"
        )
    if q.shape[-2] == 0 or k.shape[-2] == 0:
        raise ValueError(f"empty sequence: q has shape {q.shape}, k has shape {k.shape}")
    d_k = q.shape[-1]
    if scale is None:
        scale = 1.0 / np.sqrt(d_k)
    elif not (np.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a positive finite number, got {scale}")
    dtype = np.result_type(q, k, v)
    logits = (q @ np.swapaxes(k, -1, -2)) * np.asarray(scale, dtype=dtype)
    if mask is not None:
        m = _check_mask(mask, logits.shape)
        logits = np.where(m, logits, -np.inf)
    weights = softmax(logits.astype(dtype, copy=False), axis=-1)
    return weights @ v, weights


def self_attention(
    x: np.typing.ArrayLike,
    w_q: np.typing.ArrayLike,
    w_k: np.typing.ArrayLike,
    w_v: np.typing.ArrayLike,
    mask: np.typing.ArrayLike | None = None,
    scale: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Single-head self-attention: queries, keys and values are projections of the same ``x``.

    Computes ``q = x @ w_q``, ``k = x @ w_k``, ``v = x @ w_v`` and then
    :func:`scaled_dot_product_attention`.

    Parameters
    ----------
    x : array_like
        The sequence, one token per row.
    w_q, w_k : array_like
        Query and key projections (right-multiplied, ``(d_in, d_out)`` layout).
    w_v : array_like
        Value projection.
    mask : array_like of bool, optional
        ``True`` where a query may attend, broadcastable to ``(s, s)``.
    scale : float, optional
        Defaults to ``1 / sqrt(d_k)``.

    Returns
    -------
    out : numpy.ndarray
        The new sequence.
    weights : numpy.ndarray
        The attention weights.

    Shapes
    ------
    ``x (..., s, d)``, ``w_q, w_k (d, d_k)``, ``w_v (d, d_v)`` → ``out (..., s, d_v)``,
    ``weights (..., s, s)``.

    Raises
    ------
    ValueError
        If a weight matrix is not 2-D or its input size differs from ``x``'s width, if
        ``w_q`` and ``w_k`` have different ``d_k``, or as in
        :func:`scaled_dot_product_attention`.

    Examples
    --------
    >>> import numpy as np
    >>> from attnlab import self_attention
    >>> x = np.eye(3)                            # three one-hot tokens, d = 3
    >>> out, w = self_attention(x, np.eye(3), np.eye(3), np.eye(3), scale=0.0001)
    >>> w.round(2)[0]                            # almost no scale: nearly uniform
    array([0.33, 0.33, 0.33])
    """
    x = as_float_array(x, "x")
    if x.ndim < 2:
        raise ValueError(f"x must have shape (..., s, d), got shape {x.shape}")
    d = x.shape[-1]
    mats = {"w_q": as_float_array(w_q, "w_q"), "w_k": as_float_array(w_k, "w_k"),
            "w_v": as_float_array(w_v, "w_v")}
    for name, w in mats.items():
        if w.ndim != 2 or w.shape[0] != d:
            raise ValueError(
                f"{name} must have shape (d, ·) with d={d} (the width of x {x.shape}), "
                f"got shape {w.shape}"
            )
    if mats["w_q"].shape[1] != mats["w_k"].shape[1]:
        raise ValueError(
            f"w_q and w_k must share d_k: got shapes {mats['w_q'].shape} and {mats['w_k'].shape}"
        )
    return scaled_dot_product_attention(
        x @ mats["w_q"], x @ mats["w_k"], x @ mats["w_v"], mask=mask, scale=scale
    )
