"""Scaled dot-product attention and single-head self-attention (chapters 02–04).

Row convention: queries ``q`` of shape ``(..., s_q, d_k)``, keys ``k`` of shape
``(..., s_k, d_k)``, values ``v`` of shape ``(..., s_k, d_v)``, one token per row:

.. math:: \\operatorname{Attention}(Q, K, V) = \\operatorname{softmax}\\!\\left(
          \\frac{Q K^\\top}{\\sqrt{d_k}}\\right) V ,

with the softmax over the last axis (the keys), so each row of weights sums to one.

Masks are boolean and say ``True`` where a query *may* attend to a key, as in
``torch.nn.functional.scaled_dot_product_attention``. A masked key gets the logit ``-inf``
and therefore the weight exactly zero. A query whose keys are *all* masked has nothing to
average over; it gets all-zero weights and a zero output instead of ``0/0 = NaN``.
"""

from __future__ import annotations

import numpy as np

from attnlab._validate import (
    QK_OVERFLOW,
    as_float_array,
    check_float,
    reject_tensor,
    require_finite,
    require_finite_logits,
    require_min_ndim,
    require_qkv_sizes,
)
from attnlab.softmax import softmax


def _check_qkv(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> None:
    """Raise ``ValueError`` unless ``q``, ``k``, ``v`` have compatible attention shapes."""
    for name, arr in (("q", q), ("k", k), ("v", v)):
        require_min_ndim(arr, name, 2, "(..., s, d)")
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
    require_qkv_sizes(q, k, v)


def _check_mask(mask: np.typing.ArrayLike, logits_shape: tuple[int, ...]) -> np.ndarray:
    """Return ``mask`` as a boolean array that broadcasts to ``logits_shape`` (or raise)."""
    reject_tensor(mask, "mask")
    m = np.asarray(mask)
    if m.dtype != np.bool_:
        raise ValueError(
            f"mask must be boolean (True = may attend), got dtype {m.dtype}; "
            "additive float masks are not accepted"
        )
    try:
        full = np.broadcast_shapes(m.shape, logits_shape)
    except ValueError:
        full = None
    if full != tuple(logits_shape):
        raise ValueError(
            f"mask of shape {m.shape} does not broadcast to the attention logits of shape "
            f"{tuple(logits_shape)} (..., s_q, s_k)"
        )
    return m


def _check_scale(scale: float | None, d_k: int) -> float:
    """The logit multiplier: ``1/sqrt(d_k)`` by default, else a positive finite ``scale``."""
    if scale is None:
        return 1.0 / float(np.sqrt(d_k))
    return check_float(scale, "scale")


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
        The attended values, in the promoted float dtype of ``q``, ``k``, ``v``.
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
        On mismatched ``d_k``, keys and values of different lengths, an empty sequence or
        ``d_k = 0``, batch axes that do not broadcast, a mask that is not boolean or does
        not broadcast, a non-positive or non-finite scale, non-finite inputs, or logits
        that overflow the dtype (easy in float16, whose largest number is 65504).
    TypeError
        If ``scale`` is not a real number (a bool is not), or an input is a torch tensor.

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
    _check_qkv(q, k, v)
    factor = _check_scale(scale, q.shape[-1])
    dtype = np.result_type(q, k, v)
    # Scaling the queries (s_q·d_k numbers) is cheaper than scaling the logits (s_q·s_k).
    with np.errstate(over="ignore"):  # an overflow is reported just below, with the cause
        logits = (q.astype(dtype, copy=False) * dtype.type(factor)) @ np.swapaxes(k, -1, -2)
    logits = logits.astype(dtype, copy=False)
    require_finite_logits(logits, **QK_OVERFLOW)  # finite inputs: a non-finite logit overflowed
    if mask is not None:
        m = _check_mask(mask, logits.shape)
        logits = np.where(m, logits, dtype.type(-np.inf))
    weights = softmax(logits, axis=-1)
    out = weights @ v.astype(dtype, copy=False)
    return out, weights


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
        Value projection, also ``(d_in, d_out)``: ``(d, d_v)``, not ``(d_v, d)``.
    mask : array_like of bool, optional
        ``True`` where a query may attend, broadcastable to ``(..., s, s)``.
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
        ``w_q`` and ``w_k`` have different ``d_k``, if an input is not finite or a
        projection overflows the dtype, or as in :func:`scaled_dot_product_attention`.

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
    require_min_ndim(x, "x", 2, "(..., s, d)")
    require_finite(x, "x")
    d = x.shape[-1]
    w_q = as_float_array(w_q, "w_q")
    w_k = as_float_array(w_k, "w_k")
    w_v = as_float_array(w_v, "w_v")
    for name, w in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v)):
        if w.ndim != 2 or w.shape[0] != d:
            raise ValueError(
                f"{name} must have shape (d, ·) with d={d} (the width of x {x.shape}), "
                f"got shape {w.shape}"
            )
    if w_q.shape[1] != w_k.shape[1]:
        raise ValueError(f"w_q and w_k must share d_k: got shapes {w_q.shape} and {w_k.shape}")
    projections = []
    for name, w in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v)):
        require_finite(w, name)
        with np.errstate(over="ignore", invalid="ignore"):  # reported with its cause below
            p = x @ w
        require_finite_logits(p, what=f"projection x @ {name}")
        projections.append(p)
    return scaled_dot_product_attention(*projections, mask=mask, scale=scale)
