"""Local context by convolution: the layer attention generalises (chapter 01).

The layer mixes every token with its neighbours through one kernel shared by all positions:

.. math:: X^{(l+1)}_i = \\sum_{j=-C}^{C} X^{(l)}_{(i + j) \\bmod s} \\, K_j ,

with ``X`` of shape ``(s, d_in)`` (one token per row), ``K_j`` of shape ``(d_in, d_out)`` for
each signed offset ``j``, and indices taken modulo ``s`` (a circular sequence). In code the
offsets are stored in one array ``kernel`` of shape ``(2C+1, d_in, d_out)`` with
``kernel[c]`` holding ``K_{c - C}``: ``kernel[0]`` is the left-most neighbour, ``kernel[C]``
the token itself and ``kernel[2C]`` the right-most neighbour.
"""

from __future__ import annotations

import numpy as np

from attnlab._validate import (
    as_float_array,
    require_finite,
    require_finite_logits,
    require_ndim,
    require_nonempty,
)


def local_context(x: np.typing.ArrayLike, kernel: np.typing.ArrayLike) -> np.ndarray:
    """Circular local-context (convolution) layer, ``out[i] = Σ_j x[(i+j) mod s] @ K_j``.

    Parameters
    ----------
    x : array_like
        The sequence, one token per row.
    kernel : array_like
        One ``(d_in, d_out)`` matrix per signed offset ``j = -C, …, C``; ``kernel[c]``
        multiplies the token at offset ``j = c - C``.

    Returns
    -------
    numpy.ndarray
        The mixed sequence, in the promoted float dtype of ``x`` and ``kernel``.

    Shapes
    ------
    ``x (s, d_in)``, ``kernel (2C+1, d_in, d_out)`` → ``(s, d_out)``.

    Raises
    ------
    ValueError
        If ``x`` is not 2-D or empty, ``kernel`` is not 3-D, the kernel has an even number of
        offsets, its input width differs from ``x``'s, or it has more offsets than the sequence
        has tokens (offsets would wrap onto each other); if an input is not finite or the
        output overflows the dtype.

    Notes
    -----
    This is a cross-correlation (no kernel flip), the same operation as
    ``torch.nn.functional.conv1d`` with circular padding of ``C`` and weight
    ``kernel.transpose(2, 1, 0)`` (shape ``(d_out, d_in, 2C+1)``).

    Examples
    --------
    >>> import numpy as np
    >>> from attnlab import local_context
    >>> x = np.arange(1.0, 6.0).reshape(5, 1)          # s=5 tokens of width 1
    >>> k = np.array([1.0, 2.0, 3.0]).reshape(3, 1, 1)  # offsets -1, 0, +1
    >>> local_context(x, k).ravel()                      # 5*1 + 1*2 + 2*3 = 13 first
    array([13., 14., 20., 26., 17.])
    """
    x = as_float_array(x, "x")
    kernel = as_float_array(kernel, "kernel")
    require_ndim(x, "x", 2, "(s, d_in)")
    require_ndim(kernel, "kernel", 3, "(2C+1, d_in, d_out)")
    require_finite(x, "x")
    require_finite(kernel, "kernel")
    s, d_in = x.shape
    n_offsets = kernel.shape[0]
    require_nonempty({"x": x})
    if n_offsets % 2 == 0:
        raise ValueError(
            f"kernel must have an odd number 2C+1 of offsets (-C..C), got kernel shape "
            f"{kernel.shape} with {n_offsets} offsets"
        )
    if kernel.shape[1] != d_in:
        raise ValueError(
            f"kernel input width {kernel.shape[1]} does not match x: x has shape {x.shape} "
            f"(s, d_in) but kernel has shape {kernel.shape} (2C+1, d_in, d_out)"
        )
    if n_offsets > s:
        raise ValueError(
            f"kernel has {n_offsets} offsets but x has only s={s} tokens; offsets would wrap "
            f"onto each other (x shape {x.shape}, kernel shape {kernel.shape})"
        )
    half = n_offsets // 2
    out = np.zeros((s, kernel.shape[2]), dtype=np.result_type(x, kernel))
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is reported below
        for c in range(n_offsets):
            offset = c - half
            # np.roll(x, -offset)[i] == x[(i + offset) mod s]
            out += np.roll(x, -offset, axis=0) @ kernel[c]
    require_finite_logits(out, what="output")
    return out
