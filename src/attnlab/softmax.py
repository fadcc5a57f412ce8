"""A numerically stable softmax.

Softmax turns a vector of real scores (logits) into weights that are positive and sum to one:

.. math:: \\operatorname{softmax}(x)_j = \\frac{e^{x_j}}{\\sum_{j'} e^{x_{j'}}}.

Computed literally, ``exp`` overflows to ``inf`` for logits above about 88 in float32 (709 in
float64) and the result becomes ``nan``. Subtracting the largest logit first changes nothing
mathematically (numerator and denominator are both multiplied by ``e^{-max}``) but keeps every
exponent at most zero, so the computation is finite for logits of any magnitude.
"""

from __future__ import annotations

import numpy as np

from attnlab._validate import ANY_INT, as_float_array, check_int


def softmax(x: np.typing.ArrayLike, axis: int = -1) -> np.ndarray:
    """Softmax of ``x`` along ``axis``, stable for logits of any magnitude.

    Parameters
    ----------
    x : array_like
        Logits. ``-inf`` is allowed and means "weight exactly zero" (a masked key); NaN and
        ``+inf`` are rejected.
    axis : int, optional
        The axis that is normalised (default: the last one, the keys in this book).

    Returns
    -------
    numpy.ndarray
        Same shape as ``x``; non-negative, and every slice along ``axis`` sums to one. A slice
        whose logits are all ``-inf`` (every key masked) gets all-zero weights instead of NaN.
        A float input keeps its dtype (float32 stays float32); integers become float64.

    Shapes
    ------
    ``(..., n) -> (..., n)`` for the default ``axis=-1``.

    Raises
    ------
    ValueError
        If ``x`` contains NaN or ``+inf``, ``axis`` is not one of its axes (a scalar has
        none), or ``x`` is empty along ``axis``.
    TypeError
        If ``axis`` is not an integer (a bool is not), or ``x`` is a torch tensor.

    Examples
    --------
    >>> import numpy as np
    >>> from attnlab import softmax
    >>> softmax(np.array([0.0, np.log(3.0)])).round(3)
    array([0.25, 0.75])
    >>> softmax(np.array([1e5, 0.0], dtype=np.float32))
    array([1., 0.], dtype=float32)
    """
    x = as_float_array(x, "x")
    axis = check_int(axis, "axis", minimum=ANY_INT)  # the range is checked below
    if np.isnan(x).any() or np.isposinf(x).any():
        raise ValueError("x (the logits) contains NaN or +inf; only -inf (masked) is allowed")
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"axis {axis} is out of range for the logits x of shape {x.shape}")
    if x.shape[axis] == 0:
        raise ValueError(
            f"empty sequence: x has shape {x.shape}; softmax needs at least one logit along "
            f"axis {axis}"
        )
    top = np.max(x, axis=axis, keepdims=True)
    # A slice that is all -inf has top = -inf; shifting by 0 there leaves exp(-inf) = 0.
    top = np.where(np.isneginf(top), 0, top)
    e = np.exp(x - top)
    total = np.sum(e, axis=axis, keepdims=True)
    out = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    return out.astype(x.dtype, copy=False)
