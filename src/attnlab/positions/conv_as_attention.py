"""Attention that is a convolution (Cordonnier et al. 2020), in one dimension (ch. 09).

``2C+1`` heads whose logits depend on the relative position only, one per kernel offset,
reproduce :func:`attnlab.conv.local_context`: :func:`circular_offsets`,
:func:`convolution_attention_params` and :func:`convolution_as_attention`.
"""

from __future__ import annotations

import numpy as np

from attnlab._validate import (
    as_float_array,
    building_table,
    check_float,
    check_int,
    require_finite,
    require_finite_logits,
    require_ndim,
)
from attnlab.softmax import softmax


def circular_offsets(s: int) -> np.ndarray:
    """Signed circular offset ``δ[i, j]`` of key ``j`` from query ``i`` in a ring of ``s``.

    ``δ[i, j] ≡ j - i (mod s)``, taken in ``-⌊s/2⌋ … ⌈s/2⌉ - 1`` (the nearest way round;
    for even ``s`` the opposite token counts as ``-s/2``).

    Shapes
    ------
    ``→ (s, s)``, integers.

    Examples
    --------
    >>> from attnlab.positions import circular_offsets
    >>> circular_offsets(4)
    array([[ 0,  1, -2, -1],
           [-1,  0,  1, -2],
           [-2, -1,  0,  1],
           [ 1, -2, -1,  0]])
    """
    s = check_int(s, "s", 1)
    with building_table("circular_offsets", {"s": s}, (s, s)):
        idx = np.arange(s)
        return (idx[None, :] - idx[:, None] + s // 2) % s - s // 2


def convolution_attention_params(
    kernel: np.typing.ArrayLike, s: int, alpha: float | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Multi-head attention parameters that reproduce :func:`attnlab.conv.local_context`.

    One head per offset ``c - C`` of the kernel (``h = 2C+1`` heads). Head ``c`` attends by
    relative position only; its logit for query ``i`` and key ``j`` is

    * ``alpha=None`` (hard): ``0`` if ``δ[i, j] = c - C`` and ``-inf`` otherwise, so its
      weights are exactly one-hot on the key at offset ``c - C`` (mod ``s``);
    * ``alpha`` given (Cordonnier's quadratic encoding): ``-alpha · (δ[i, j] - (c - C))²``,
      one-hot only as ``alpha → ∞``; every other key has logit ``<= -alpha``, so the weight
      off target is at most ``(s - 1)·exp(-alpha)``.

    Its value projection is the kernel slice ``kernel[c]`` and the output projection sums the
    heads (a stack of identities).

    Parameters
    ----------
    kernel : array_like
        Local-context kernel, ``kernel[c]`` multiplies offset ``c - C``.
    s : int
        Sequence length; ``2C+1 <= s``.
    alpha : float, optional
        Positive sharpness of the quadratic encoding; ``None`` for the exact hard version.

    Returns
    -------
    logits : numpy.ndarray
        Positional logits per head (``-inf`` where the hard version forbids a key).
    w_v : numpy.ndarray
        Value projections per head.
    w_o : numpy.ndarray
        Output projection, ``h`` stacked identities.

    Shapes
    ------
    ``kernel (2C+1, d_in, d_out)`` → ``logits (h, s, s)``, ``w_v (h, d_in, d_out)``,
    ``w_o (h·d_out, d_out)`` with ``h = 2C+1``.

    Raises
    ------
    ValueError
        If the kernel is not 3-D with an odd number of offsets or not finite, ``2C+1 > s``,
        or ``alpha`` is not a positive finite number.
    TypeError
        If ``s`` is not an integer or ``alpha`` not a real number (a bool is neither).

    Examples
    --------
    >>> import numpy as np
    >>> from attnlab.positions import convolution_attention_params
    >>> logits, w_v, w_o = convolution_attention_params(np.ones((3, 1, 1)), s=4)
    >>> (logits[0] == 0).astype(int)        # head 0: every query looks one step left
    array([[0, 0, 0, 1],
           [1, 0, 0, 0],
           [0, 1, 0, 0],
           [0, 0, 1, 0]])
    """
    kernel = as_float_array(kernel, "kernel")
    require_ndim(kernel, "kernel", 3, "(2C+1, d_in, d_out)")
    require_finite(kernel, "kernel")
    s = check_int(s, "s", 1)
    h, _, d_out = kernel.shape
    if h % 2 == 0:
        raise ValueError(f"kernel must have an odd number 2C+1 of offsets, got {kernel.shape}")
    if h > s:
        raise ValueError(
            f"kernel has {h} offsets but the sequence has only s={s} tokens (offsets would "
            "wrap onto each other)"
        )
    if alpha is not None:
        alpha = check_float(alpha, "alpha (None for the hard version)")
    offsets = np.arange(h) - h // 2  # (h,)
    delta = circular_offsets(s)[None, :, :] - offsets[:, None, None]  # (h, s, s)
    if alpha is None:
        logits = np.where(delta == 0, 0.0, -np.inf)
    else:
        logits = -alpha * delta.astype(np.float64) ** 2  # -inf in float16 is the hard limit
    w_o = np.tile(np.eye(d_out, dtype=kernel.dtype), (h, 1))
    with np.errstate(over="ignore"):
        logits = logits.astype(kernel.dtype)
    return logits, kernel.copy(), w_o


def convolution_as_attention(
    x: np.typing.ArrayLike, kernel: np.typing.ArrayLike, alpha: float | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Run the ``2C+1``-head positional attention of :func:`convolution_attention_params`.

    ``out = concat_c(softmax(logits_c) @ (x @ w_v[c])) @ w_o``. With ``alpha=None`` this
    equals ``local_context(x, kernel)`` up to rounding; with a finite ``alpha`` each output
    row is within ``2 (s - 1) exp(-alpha) · Σ_c max_j |x_j @ kernel[c]|`` of it.

    Parameters
    ----------
    x : array_like
        The sequence, one token per row.
    kernel : array_like
        Local-context kernel.
    alpha : float, optional
        Sharpness of the quadratic encoding; ``None`` for the exact hard version.

    Returns
    -------
    out : numpy.ndarray
        The attention layer's output.
    weights : numpy.ndarray
        The weights of every head.

    Shapes
    ------
    ``x (s, d_in)``, ``kernel (2C+1, d_in, d_out)`` → ``out (s, d_out)``,
    ``weights (2C+1, s, s)``.

    Raises
    ------
    ValueError
        If ``x`` is not 2-D, empty or finite, its width differs from the kernel's, the values
        ``x @ kernel[c]`` overflow the dtype, or as in
        :func:`convolution_attention_params`.

    Examples
    --------
    >>> import numpy as np
    >>> from attnlab import local_context
    >>> from attnlab.positions import convolution_as_attention
    >>> x = np.arange(1.0, 6.0).reshape(5, 1)
    >>> k = np.array([1.0, 2.0, 3.0]).reshape(3, 1, 1)
    >>> out, _ = convolution_as_attention(x, k)
    >>> out.ravel(), local_context(x, k).ravel()
    (array([13., 14., 20., 26., 17.]), array([13., 14., 20., 26., 17.]))
    """
    x = as_float_array(x, "x")
    require_ndim(x, "x", 2, "(s, d_in)")
    kernel = as_float_array(kernel, "kernel")
    require_ndim(kernel, "kernel", 3, "(2C+1, d_in, d_out)")
    if x.shape[0] == 0:
        raise ValueError(f"x is an empty sequence: shape {x.shape}")
    require_finite(x, "x")
    if kernel.shape[1] != x.shape[1]:
        raise ValueError(
            f"kernel input width {kernel.shape[1]} does not match x: x {x.shape} (s, d_in), "
            f"kernel {kernel.shape} (2C+1, d_in, d_out)"
        )
    logits, w_v, w_o = convolution_attention_params(kernel, x.shape[0], alpha)
    weights = softmax(logits, axis=-1)  # (h, s, s)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is reported just below
        values = x[None, :, :] @ w_v  # (h, s, d_out)
    require_finite_logits(values, what="values x @ kernel")  # finite inputs: an overflow
    heads = weights @ values  # (h, s, d_out)
    concat = np.concatenate(list(heads), axis=-1)  # (s, h * d_out)
    return concat @ w_o, weights
