"""Sinusoidal absolute positions (Vaswani et al. 2017) and the shift that rotates them (ch. 09).

* :func:`sinusoidal_positions`: the fixed ``(n, d)`` table added to the token vectors,
  interleaved layout ``PE[p, 2i] = sin(p ω_i)``, ``PE[p, 2i+1] = cos(p ω_i)``.
* :func:`sinusoidal_shift_matrix`: the rotation ``M_k`` with ``PE[p + k] = PE[p] @ M_k``.
"""

from __future__ import annotations

import numpy as np

from attnlab._validate import building_table, check_float, check_int


def _check_d_base(d: int, base: float) -> tuple[int, float]:
    """Validate the width ``d`` (even, ``>= 2``) and the wavelength ``base`` (finite, ``> 1``)."""
    d = check_int(d, "d", 2)
    if d % 2:
        raise ValueError(
            f"d must be even for the interleaved sine/cosine layout (pairs of columns), got d={d}"
        )
    base = check_float(base, "base", positive=False)
    if not base > 1:
        raise ValueError(f"base must be a finite number > 1, got {base}")
    return d, base


def _sinusoid_frequencies(d: int, base: float) -> np.ndarray:
    """The ``d // 2`` angular frequencies ``ω_i = base^(-2i/d)``, shape ``(d // 2,)``."""
    return base ** (-np.arange(0, d, 2, dtype=np.float64) / d)


def sinusoidal_positions(n: int, d: int, base: float = 10000.0) -> np.ndarray:
    """Sinusoidal position table of Vaswani et al. (2017), interleaved sine/cosine layout.

    ``PE[p, 2i] = sin(p · ω_i)`` and ``PE[p, 2i+1] = cos(p · ω_i)`` with
    ``ω_i = base^(-2i/d)``, for positions ``p = 0, …, n-1``.

    Parameters
    ----------
    n : int
        Number of positions (rows), ``n >= 0``.
    d : int
        Model width (columns); must be even, because sine and cosine come in pairs.
    base : float
        The wavelength base, 10000 in the paper.

    Returns
    -------
    numpy.ndarray
        The table, ``float64``.

    Shapes
    ------
    ``→ (n, d)``.

    Raises
    ------
    ValueError
        If ``d`` is odd or not positive, ``n`` is negative, or ``base`` is not a finite
        number ``> 1``.
    TypeError
        If ``n`` or ``d`` is not an integer (a bool or a float is not), or ``base`` is not a
        real number.

    Examples
    --------
    >>> from attnlab import sinusoidal_positions
    >>> sinusoidal_positions(3, 4).round(3)     # columns: sin, cos at ω=1, then ω=0.01
    array([[ 0.   ,  1.   ,  0.   ,  1.   ],
           [ 0.841,  0.54 ,  0.01 ,  1.   ],
           [ 0.909, -0.416,  0.02 ,  1.   ]])
    """
    n = check_int(n, "n", 0)
    d, base = _check_d_base(d, base)
    with building_table("sinusoidal_positions", {"n": n, "d": d}, (n, d)):
        angles = np.arange(n, dtype=np.float64)[:, None] * _sinusoid_frequencies(d, base)[None, :]
        table = np.empty((n, d), dtype=np.float64)
        table[:, 0::2] = np.sin(angles)
        table[:, 1::2] = np.cos(angles)
        return table


def sinusoidal_shift_matrix(k: float, d: int, base: float = 10000.0) -> np.ndarray:
    """The matrix ``M_k`` with ``PE[p + k] = PE[p] @ M_k`` for every position ``p``.

    Block-diagonal with one ``2×2`` block per frequency ``ω_i``:
    ``[[cos kω_i, -sin kω_i], [sin kω_i, cos kω_i]]`` (row convention: the row vector
    ``(sin pω, cos pω)`` is multiplied on the right). It does not depend on ``p``: a shift in
    position is a fixed linear map, a rotation of each sine/cosine pair.

    Parameters
    ----------
    k : float
        The shift (may be negative or fractional).
    d : int
        Model width, even.
    base : float
        Wavelength base, as in :func:`sinusoidal_positions`.

    Returns
    -------
    numpy.ndarray
        ``M_k``, ``float64``, orthogonal.

    Shapes
    ------
    ``→ (d, d)``.

    Raises
    ------
    ValueError
        If ``d`` is odd or not positive, ``k`` is not finite, or ``base`` is not a finite
        number ``> 1`` (the rule of :func:`sinusoidal_positions`).
    TypeError
        If ``d`` is not an integer, or ``k`` or ``base`` is not a real number (a bool is not).

    Examples
    --------
    >>> import numpy as np
    >>> from attnlab import sinusoidal_positions, sinusoidal_shift_matrix
    >>> pe = sinusoidal_positions(10, 6)
    >>> bool(np.allclose(pe[2] @ sinusoidal_shift_matrix(5, 6), pe[7]))
    True
    """
    k = check_float(k, "k (the shift)", positive=False)
    d, base = _check_d_base(d, base)
    theta = k * _sinusoid_frequencies(d, base)
    with building_table("sinusoidal_shift_matrix", {"d": d}, (d, d)):
        m = np.zeros((d, d), dtype=np.float64)
        m[0::2, 0::2] = np.diag(np.cos(theta))
        m[0::2, 1::2] = np.diag(-np.sin(theta))
        m[1::2, 0::2] = np.diag(np.sin(theta))
        m[1::2, 1::2] = np.diag(np.cos(theta))
        return m
