"""The initialisation of GAM's brains: the standard deviation that gives unit-variance logits.

:func:`~attnlab.gam.gam_init_std` plays for GAM's ``B`` the role that ``1/sqrt(d_k)`` plays
for scaled dot-product attention (chapter 08): it keeps the logits of standard-normal inputs
at variance one for every feature function, through the Gaussian moments below. Re-exported
(and documented) by :mod:`attnlab.gam` and by ``attnlab``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from attnlab._validate import ANY_INT, check_int
from attnlab.gam_power import _power_terms

__all__ = ["gam_init_std"]


def _gaussian_abs_moment(s: float) -> float:
    """``E|u|^s`` for a standard normal ``u`` (``s > -1``): ``2^{s/2} Γ((s+1)/2) / √π``."""
    return 2.0 ** (s / 2) * math.gamma((s + 1) / 2) / math.sqrt(math.pi)


def _gaussian_moment(k: int) -> float:
    """``E[u^k]`` for a standard normal ``u``: 0 for odd ``k``, ``(k-1)!!`` for even ``k``."""
    return 0.0 if k % 2 else _gaussian_abs_moment(k)


def gam_init_std(
    m: int,
    *,
    f: str = "power",
    n1: float = 1,
    coeffs: Sequence[float] | np.ndarray | None = None,
) -> float:
    """Standard deviation of ``B``'s entries that gives GAM logits of unit variance.

    Assume the elements' entries are independent standard normal (as after a normalising
    layer) and ``B_rt`` independent, zero-mean with variance ``σ²``. For ``α ≠ β``,
    ``ε = Σ_rt B_rt f(y^α_r y^β_t)`` is a sum of ``M²`` uncorrelated zero-mean terms, so

    ``Var ε = M² σ² E[f(u v)²]`` with ``u, v`` independent standard normal.

    Power law: ``E[f(uv)²] = (E|u|^{2 n1})²``. Polynomial:
    ``E[f(uv)²] = Σ_{l,l'} A_l A_l' (E[u^{l+l'}])²``. Setting ``Var ε = 1`` gives
    ``σ = 1 / (M sqrt(E[f(uv)²]))``; for ``f`` the identity, ``σ = 1 / M``.

    Parameters
    ----------
    m : int
        The width ``M`` of the elements.
    f, n1, coeffs
        The feature function, as in :func:`gam_logits`.

    Returns
    -------
    float
        ``σ``.

    Shapes
    ------
    Scalars only.

    Raises
    ------
    ValueError
        On ``m < 1`` or a bad feature function.

    Examples
    --------
    >>> from attnlab import gam_init_std
    >>> round(gam_init_std(16), 6), round(gam_init_std(16, n1=2), 6)  # E[u^4] = 3 for n1 = 2
    (0.0625, 0.020833)
    """
    m = check_int(m, "m", minimum=ANY_INT)  # a bool or a float is a TypeError
    if m < 1:
        raise ValueError(f"m (the width M) must be at least 1, got {m}")
    terms = _power_terms(f, n1, coeffs)
    try:
        if f == "power":
            second = _gaussian_abs_moment(2 * n1) ** 2
        else:
            second = sum(
                a * a2 * _gaussian_moment(int(p) + int(p2)) ** 2
                for a, p in terms
                for a2, p2 in terms
            )
    except OverflowError:
        second = math.inf
    if not math.isfinite(second):
        raise ValueError(
            f"E[f(uv)^2] overflows float64 for n1={n1}, coeffs={coeffs}: the power n1 must "
            "stay below about 85"
        )
    if second <= 0:
        raise ValueError(f"the feature function is identically zero (coeffs={coeffs})")
    return 1.0 / (m * math.sqrt(second))
