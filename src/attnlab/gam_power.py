"""GAM's feature function ``f`` (Pandya 2022, eq. 17–18): the signed power and its terms.

``f`` is a power law ``f(x) = x^{n_1}`` or a polynomial ``f(x) = Σ_l A_l x^l``. For every
exponent GAM needs the real power of a possibly negative number,
:func:`~attnlab.gam.signed_power`; the logits (:mod:`attnlab.gam`) and the initialisation
(:mod:`attnlab.gam_init`) both read ``f`` as a list of ``(A_l, exponent)`` terms. The public
name is re-exported (and documented) by :mod:`attnlab.gam` and by ``attnlab``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from attnlab._validate import as_float_array, check_float

__all__ = ["signed_power"]

_FEATURES = ("power", "poly")


def _is_integer(p: float) -> bool:
    """True if ``p`` is a whole number (``2`` and ``2.0`` both count)."""
    return float(p).is_integer()


def _check_power(n1: float) -> float:
    """Return the exponent ``n1`` as a float if it is one positive finite number (eq. 17).

    Raises ``TypeError`` for anything but one real number (an array, a tensor, a complex
    number, a string or a bool) and ``ValueError`` for zero, a negative number, NaN or inf.
    """
    return check_float(n1, "the power n1")


def signed_power(x: np.typing.ArrayLike, n1: float) -> np.ndarray:
    """The real power ``x^{n1}`` extended to negative ``x``: the feature map of GAM's ``f``.

    * Integer ``n1``: the exact power ``x**n1`` (so ``(-2)**2 = 4`` and ``(-2)**3 = -8``).
    * Non-integer ``n1``: the signed power ``sign(x) * |x|**n1``.

    Why this rule. The paper's eq. 17 applies ``(y_r y_t)^{n1}`` to products that are
    negative half of the time, and a negative number has no real non-integer power (numpy
    returns NaN). The signed power is the odd extension of ``x^{n1}`` from ``x ≥ 0``: it agrees
    with the real power for ``x ≥ 0`` (the only place where a floating-point power with a
    non-integer exponent is real), is continuous and increasing for ``n1 > 0``, and, the
    property GAM needs, it is *multiplicative*: ``g(ab) = g(a) g(b)`` because
    ``sign(ab) = sign(a) sign(b)`` and ``|ab|^p = |a|^p |b|^p``. The exact integer power is
    multiplicative too, so both keep the factorisation ``f(y_r y_t) = g(y_r) g(y_t)``.

    The rule is discontinuous in ``n1`` at even integers: ``x**2`` is even in ``x`` while
    ``sign(x)|x|**2.0001`` is odd. Treat ``n1`` as a hyperparameter, not as a value to learn.

    Parameters
    ----------
    x : array_like
        Real numbers.
    n1 : float
        The exponent; must be positive (eq. 17 requires ``n1 > 0``).

    Returns
    -------
    numpy.ndarray
        Same shape and float dtype as ``x``.

    Shapes
    ------
    ``x (...)`` → ``(...)``.

    Raises
    ------
    ValueError
        If ``n1`` is not a positive finite number.
    TypeError
        If ``n1`` is not one real number (an array, a complex number, a string or a bool).

    Examples
    --------
    >>> import numpy as np
    >>> from attnlab import signed_power
    >>> signed_power(np.array([-2.0, 3.0]), 2)        # integer: exact power
    array([4., 9.])
    >>> signed_power(np.array([-4.0, 4.0]), 0.5)      # non-integer: signed power
    array([-2.,  2.])
    """
    x = as_float_array(x, "x")
    n1 = _check_power(n1)
    if _is_integer(n1):
        return x ** int(n1)
    return (np.sign(x) * np.abs(x) ** n1).astype(x.dtype, copy=False)


def _power_terms(
    f: str, n1: float, coeffs: Sequence[float] | np.ndarray | None
) -> list[tuple[float, float]]:
    """The feature function as a list of ``(A_l, exponent)`` pairs."""
    if f == "power":
        if coeffs is not None:
            raise ValueError('coeffs is only used with f="poly"; for f="power" give n1')
        return [(1.0, check_float(n1, "n1"))]  # a bool or a string is a TypeError
    if f == "poly":
        if coeffs is None:
            raise ValueError('f="poly" needs coeffs = (A_1, ..., A_L)')
        a = np.asarray(coeffs, dtype=np.float64)
        if a.ndim != 1 or a.size == 0 or not np.all(np.isfinite(a)):
            raise ValueError(
                f"coeffs must be a non-empty 1-D sequence of finite numbers (A_1, ..., A_L), "
                f"got shape {a.shape}"
            )
        return [(float(a_l), float(power)) for power, a_l in enumerate(a, start=1)]
    raise ValueError(f"f must be one of {_FEATURES}, got {f!r}")
