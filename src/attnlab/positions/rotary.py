"""Rotary position embeddings, RoPE (Su et al. 2021), in numpy (chapter 09).

RoPE does not add a position vector to the tokens: it *rotates* each query and each key by an
angle proportional to its position, one rotation per pair of coordinates. With ``d`` even and
the ``d // 2`` frequencies ``θ_i = base^(-2i/d)``, the pair ``i`` of a vector at position ``p``
turns by the angle ``p θ_i``. A rotation by ``p θ`` followed by the dot product with a vector
turned by ``r θ`` depends only on ``r - p``, so ``q_p · k_r`` sees the *relative* position.

Which coordinates form the pair ``i`` is a convention, and the libraries differ:

* ``layout="interleaved"``: pairs ``(2i, 2i+1)``, as in the paper (eq. 13–15), GPT-J
  (``rotate_every_two`` in mesh-transformer-jax) and Meta's original LLaMA code
  (``torch.view_as_complex`` on consecutive pairs);
* ``layout="half"``: pairs ``(i, i + d/2)``, as in GPT-NeoX and Hugging Face's LLaMA
  (``rotate_half``).

The two are the same map up to a fixed permutation of the coordinates (evens first, then
odds), so a checkpoint trained in one layout needs its ``W_Q``, ``W_K`` columns permuted to
run in the other.

* :func:`rotary_angles`: the ``(n, d // 2)`` table of angles ``p θ_i``.
* :func:`apply_rotary`: rotate ``x (..., n, d)``, in either layout.

The torch twin is :func:`attnlab.nn.apply_rotary` (and the module
:class:`attnlab.nn.RotaryEmbedding`).
"""

from __future__ import annotations

import numpy as np

from attnlab._validate import (
    as_float_array,
    check_float,
    check_int,
    require_finite,
    require_min_ndim,
    shape_of,
)

#: The two pair layouts :func:`apply_rotary` knows.
ROTARY_LAYOUTS = ("interleaved", "half")


def check_rotary_args(d: int, base: float, layout: str) -> tuple[int, float, str]:
    """Validate the width ``d`` (even, ``>= 2``), ``base`` (finite, ``> 0``) and ``layout``.

    Shared by the numpy and the torch RoPE, so that both say the same thing.
    """
    d = check_int(d, "d", 2)
    if d % 2:
        raise ValueError(
            f"d must be even for rotary positions (coordinates are rotated in pairs), got d={d}"
        )
    base = check_float(base, "base", positive=True)
    if not isinstance(layout, str):
        raise TypeError(
            f"layout must be 'interleaved' or 'half', got {layout!r} of type "
            f"{type(layout).__name__}"
        )
    if layout not in ROTARY_LAYOUTS:
        raise ValueError(
            f"layout must be 'interleaved' (pairs (2i, 2i+1)) or 'half' (pairs (i, i + d/2)), "
            f"got {layout!r}"
        )
    return d, base, layout


def require_even_width(x_shape: tuple[int, ...], name: str) -> None:
    """Raise ``ValueError`` unless the last axis (width ``d``) of ``name`` is even, ``>= 2``."""
    d = x_shape[-1]
    if d < 2 or d % 2:
        raise ValueError(
            f"{name} must have an even last axis d >= 2 (rotary positions turn coordinates in "
            f"pairs), got shape {x_shape}"
        )


def rotary_frequencies(d: int, base: float = 10000.0) -> np.ndarray:
    """The ``d // 2`` frequencies ``θ_i = base^(-2i/d)``, ``float64``, shape ``(d // 2,)``."""
    d, base, _ = check_rotary_args(d, base, "interleaved")
    return base ** (-np.arange(0, d, 2, dtype=np.float64) / d)


def rotary_angles(n: int, d: int, base: float = 10000.0) -> np.ndarray:
    """The rotation angles ``p θ_i`` of RoPE for the positions ``p = 0, …, n-1``.

    ``angles[p, i] = p · base^(-2i/d)``: the angle by which pair ``i`` of a vector at
    position ``p`` is turned (pair ``i`` is ``(2i, 2i+1)`` or ``(i, i + d/2)`` by layout).

    Parameters
    ----------
    n : int
        Number of positions, ``n >= 0``.
    d : int
        Width of the rotated vectors (the per-head key size ``d_k``); even, ``>= 2``.
    base : float
        The wavelength base, 10000 in the paper; a positive finite number.

    Returns
    -------
    numpy.ndarray
        The angles in radians, ``float64``.

    Shapes
    ------
    ``→ (n, d // 2)``.

    Raises
    ------
    ValueError
        If ``n`` is negative, ``d`` is odd or below 2, or ``base`` is not a positive finite
        number.
    TypeError
        If ``n`` or ``d`` is not an integer (a bool or a float is not), or ``base`` is not a
        real number.

    Examples
    --------
    >>> from attnlab import rotary_angles
    >>> rotary_angles(3, 4)          # θ = (1, 0.01) for d = 4
    array([[0.  , 0.  ],
           [1.  , 0.01],
           [2.  , 0.02]])
    """
    n = check_int(n, "n", 0)
    freqs = rotary_frequencies(d, base)
    return np.arange(n, dtype=np.float64)[:, None] * freqs[None, :]


def check_positions_shape(pos_shape: tuple[int, ...], x_shape: tuple[int, ...]) -> None:
    """Raise ``ValueError`` unless ``positions`` of ``pos_shape`` fits ``x (..., n, d)``.

    ``positions`` must end in ``n`` and broadcast against ``x``'s leading axes ``(..., n)``
    without growing them (shared by numpy and torch).
    """
    lead = x_shape[:-1]
    layout = f"(n,) or broadcastable to {lead} (x has shape {x_shape})"
    if len(pos_shape) < 1 or pos_shape[-1] != lead[-1]:
        raise ValueError(f"positions must have shape {layout}, got shape {pos_shape}")
    try:
        full = np.broadcast_shapes(pos_shape, lead)
    except ValueError:
        full = None
    if full != lead:
        raise ValueError(f"positions must have shape {layout}, got shape {pos_shape}")


def _positions(positions: object, x_shape: tuple[int, ...]) -> np.ndarray:
    """``positions`` as an ``int64`` array fitting ``x (..., n, d)``; ``None`` → ``0, …, n-1``."""
    n = x_shape[-2]
    if positions is None:
        return np.arange(n, dtype=np.int64)
    if type(positions).__module__.startswith("torch"):
        raise TypeError(
            "positions must be a numpy array or a sequence of integers, got a torch.Tensor; "
            "attnlab.nn.apply_rotary takes tensors"
        )
    try:
        pos = np.asarray(positions)
    except (ValueError, TypeError) as error:
        raise ValueError(f"positions cannot be read as an array of integers: {error}") from None
    if pos.dtype == np.bool_ or not np.issubdtype(pos.dtype, np.integer):
        raise TypeError(
            f"positions must hold integers (token positions), got dtype {pos.dtype}; "
            "booleans and floats are not positions"
        )
    check_positions_shape(shape_of(pos), x_shape)
    return pos.astype(np.int64)


def apply_rotary(
    x: np.typing.ArrayLike,
    positions: np.typing.ArrayLike | None = None,
    base: float = 10000.0,
    layout: str = "interleaved",
) -> np.ndarray:
    """Rotate the vectors ``x`` by their positions: rotary position embeddings (RoPE).

    For the token at position ``p`` and each pair ``i`` of coordinates ``(a, b)``
    (``(x[2i], x[2i+1])`` in the interleaved layout, ``(x[i], x[i + d/2])`` in the half
    layout), with ``φ = p θ_i`` and ``θ_i = base^(-2i/d)``:

    ``a' = a cos φ - b sin φ``,  ``b' = a sin φ + b cos φ``.

    Applied to queries and keys (never to values), it makes ``q'_p · k'_r`` a function of
    ``q``, ``k`` and ``r - p`` only. Each token's vector keeps its length.

    Parameters
    ----------
    x : array_like
        Queries or keys, one token per row; the last axis is rotated in pairs.
    positions : array_like of int, optional
        The token positions: shape ``(n,)`` (shared by every leading axis) or any shape that
        ends in ``n`` and broadcasts against ``x.shape[:-1]`` (for example ``(batch, 1, n)``
        for per-sequence offsets of ``x (batch, h, n, d)``). Default ``0, 1, …, n-1``.
        Negative positions are allowed (only differences matter).
    base : float
        The wavelength base (10000 in the paper), positive.
    layout : {"interleaved", "half"}
        Which coordinates form a pair: ``(2i, 2i+1)`` (Su et al., GPT-J, Meta's LLaMA code)
        or ``(i, i + d/2)`` (GPT-NeoX, Hugging Face's LLaMA).

    Returns
    -------
    numpy.ndarray
        The rotated vectors, in the float dtype of ``x`` (integers become ``float64``). The
        angles and the rotation are computed in ``float64``.

    Shapes
    ------
    ``x (..., n, d)``, ``positions (n,)`` or ``(..., n)`` → ``(..., n, d)``.

    Raises
    ------
    ValueError
        If ``x`` has fewer than 2 axes, an odd last axis, or holds NaN or inf; if
        ``positions`` has the wrong shape; if ``base`` is not a positive finite number; or
        ``layout`` is unknown.
    TypeError
        If ``positions`` does not hold integers (booleans and floats do not), ``layout`` is not
        a string, ``base`` is not a real number, or ``x`` is a torch tensor.

    Examples
    --------
    >>> import numpy as np
    >>> from attnlab import apply_rotary
    >>> x = np.array([[1.0, 0.0], [1.0, 0.0]])      # the same vector at positions 0 and 1
    >>> apply_rotary(x).round(4)                     # d = 2: θ_0 = 1, so position 1 turns 1 rad
    array([[1.    , 0.    ],
           [0.5403, 0.8415]])
    """
    arr = as_float_array(x, "x")
    require_min_ndim(arr, "x", 2, "(..., n, d)")
    require_even_width(shape_of(arr), "x")
    check_rotary_args(arr.shape[-1], base, layout)
    require_finite(arr, "x")
    pos = _positions(positions, shape_of(arr))
    angles = pos[..., None].astype(np.float64) * rotary_frequencies(arr.shape[-1], base)
    cos, sin = np.cos(angles), np.sin(angles)
    wide = arr.astype(np.float64)
    out = np.empty_like(wide)
    if layout == "interleaved":
        a, b = wide[..., 0::2], wide[..., 1::2]
        out[..., 0::2] = a * cos - b * sin
        out[..., 1::2] = a * sin + b * cos
    else:
        half = arr.shape[-1] // 2
        a, b = wide[..., :half], wide[..., half:]
        out[..., :half] = a * cos - b * sin
        out[..., half:] = a * sin + b * cos
    return out.astype(arr.dtype, copy=False)
