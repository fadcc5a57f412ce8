"""The Generalized Attention Mechanism (GAM) of Pandya (2022), chapter 08.

Notation of the paper mapped onto the book's row convention: the sequence ``y`` has shape
``(n, M)``, one element ``y^α`` per row. A head owns ``N_B`` "brains", square matrices
``B_i (M, M)``, a value matrix ``W^V (M, M_v)`` and mixing weights ``W^P (N_B,)``:

.. math::

    \\epsilon_i^{\\alpha\\beta} = \\sum_{r,t} f(y^\\alpha_r\\, y^\\beta_t)\\, (B_i)_{rt},
    \\qquad
    \\Psi_i = \\operatorname{softmax}(\\epsilon_i),
    \\qquad
    \\Phi = \\sum_i W^P_i\\, \\Psi_i,
    \\qquad
    Z = \\Phi\\, Y W^V .

The feature function ``f`` is a power law ``f(x) = x^{n_1}`` (eq. 17) or a polynomial
``f(x) = Σ_l A_l x^l`` (eq. 18). Because every power used here is *multiplicative*,
``(y_r y_t)^p = y_r^p y_t^p``, the logits factorise as

.. math:: \\epsilon_i = \\sum_l A_l\\, Y^{\\circ l} B_i (Y^{\\circ l})^\\top ,

which costs ``O(L (n M^2 + n^2 M))`` instead of the ``O(n^2 M^2)`` of the pairwise formula.

Scaled dot-product attention is the special case of one brain, ``f`` the identity and
``B = W_Q W_Kᵀ / sqrt(d_k)`` (eq. 10–12).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from attnlab._validate import (
    as_float_array,
    check_float,
    check_int,
    require_finite,
    require_finite_logits,
    require_ndim,
)
from attnlab.attention import _check_mask
from attnlab.softmax import softmax

_FEATURES = ("power", "poly")


def _is_integer(p: float) -> bool:
    """True if ``p`` is a whole number (``2`` and ``2.0`` both count)."""
    return float(p).is_integer()


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
    if not (math.isfinite(n1) and n1 > 0):
        raise ValueError(f"the power n1 must be a positive finite number, got {n1}")
    if _is_integer(n1):
        return x ** int(n1)
    return (np.sign(x) * np.abs(x) ** n1).astype(x.dtype, copy=False)


def _check_y_b(y: np.typing.ArrayLike, b: np.typing.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Validate ``y (n, M)`` and ``b (N_B, M, M)`` or ``(M, M)``; return ``b`` as 3-D."""
    y = as_float_array(y, "y")
    b = as_float_array(b, "b")
    require_ndim(y, "y", 2, "(n, M)")
    if y.shape[0] == 0 or y.shape[1] == 0:
        raise ValueError(f"y must be a non-empty sequence (n, M), got shape {y.shape}")
    if b.ndim == 2:
        b = b[np.newaxis]
    if b.ndim != 3 or b.shape[1:] != (y.shape[1], y.shape[1]):
        raise ValueError(
            f"b must have shape (N_B, M, M) or (M, M) with M={y.shape[1]} (the width of y "
            f"{y.shape}), got shape {np.shape(b) if b.ndim != 3 else b.shape}"
        )
    if b.shape[0] == 0:
        raise ValueError("b must hold at least one brain, got N_B = 0")
    require_finite(y, "y")
    require_finite(b, "b")
    return y, b


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


def gam_logits(
    y: np.typing.ArrayLike,
    b: np.typing.ArrayLike,
    *,
    f: str = "power",
    n1: float = 1,
    coeffs: Sequence[float] | np.ndarray | None = None,
    what: str = "logits",
) -> np.ndarray:
    """GAM logits ``ε_i^{αβ} = Σ_rt f(y^α_r y^β_t) (B_i)_rt`` by the factorisation (eq. 16).

    Computes ``ε_i = Σ_l A_l  Y^{∘l} B_i (Y^{∘l})ᵀ``, where ``Y^{∘l}`` is the elementwise
    power (:func:`signed_power`): one term with ``A = 1`` and exponent ``n1`` for the power
    law (eq. 17), terms ``l = 1..L`` with ``coeffs = (A_1, ..., A_L)`` for the polynomial
    (eq. 18). Cost ``O(L (n M² + n² M))`` per brain, memory ``O(n² + n M)``; the pairwise
    formula costs ``O(n² M²)``.

    Parameters
    ----------
    y : array_like
        The sequence, one element per row.
    b : array_like
        The brains' matrices ``B_i``; a single ``(M, M)`` matrix counts as one brain.
    f : str
        The feature function: ``"power"`` or ``"poly"``.
    n1 : float
        Exponent of the power law (``f="power"``), positive.
    coeffs : array_like, optional
        ``(A_1, ..., A_L)`` for ``f="poly"``.

    Returns
    -------
    numpy.ndarray
        The logits ``ε``, one ``(n, n)`` matrix per brain (rows: the element that attends).

    Shapes
    ------
    ``y (n, M)``, ``b (N_B, M, M)`` or ``(M, M)`` → ``eps (N_B, n, n)`` (``N_B = 1`` for a
    2-D ``b``).

    Raises
    ------
    ValueError
        On a ``b`` whose size differs from ``y``'s width, an empty ``y``, non-finite input,
        an unknown ``f``, a non-positive ``n1``, or missing/ill-shaped ``coeffs``.

    Examples
    --------
    >>> import numpy as np
    >>> from attnlab import gam_logits
    >>> y = np.array([[1.0, -1.0], [2.0, 0.0]])
    >>> gam_logits(y, np.eye(2), n1=2)[0]             # Σ_r y_r^2 y'_r^2
    array([[ 2.,  4.],
           [ 4., 16.]])
    """
    y, b = _check_y_b(y, b)
    terms = _power_terms(f, n1, coeffs)
    dtype = np.result_type(y, b)
    eps = np.zeros((b.shape[0], y.shape[0], y.shape[0]), dtype=dtype)
    for a_l, p in terms:
        if a_l == 0.0:
            continue
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is reported below
            g = signed_power(y, p).astype(dtype, copy=False)  # (n, M)
            eps += a_l * ((g @ b) @ g.T)  # (N_B, n, M) @ (M, n) -> (N_B, n, n)
    require_finite_logits(eps, what=what)  # finite inputs: a non-finite logit overflowed
    return eps


def check_mix(mix: np.typing.ArrayLike | None, n_brains: int, *, atol: float = 1e-6) -> np.ndarray:
    """Validate GAM's mixing weights ``W^P``: a point of the probability simplex.

    ``None`` gives the uniform mixture ``1 / N_B``. Otherwise ``mix`` must have ``N_B``
    finite, non-negative entries that sum to one (within ``atol``). The paper (eq. 19) asks
    only for the sum; without non-negativity the mixed weights ``Φ`` may be negative and the
    output may leave the convex hull of the values.

    Parameters
    ----------
    mix : array_like or None
        The weights ``W^P``.
    n_brains : int
        ``N_B``.
    atol : float
        Tolerance on the sum.

    Returns
    -------
    numpy.ndarray
        The weights as a float array.

    Shapes
    ------
    ``mix (N_B,)`` → ``(N_B,)``.

    Raises
    ------
    ValueError
        If ``mix`` has the wrong shape, a negative or non-finite entry, or does not sum to one.

    Examples
    --------
    >>> from attnlab.gam import check_mix
    >>> check_mix(None, 4)
    array([0.25, 0.25, 0.25, 0.25])
    """
    if mix is None:
        return np.full(n_brains, 1.0 / n_brains)
    w = as_float_array(mix, "mix")
    if w.shape != (n_brains,):
        raise ValueError(f"mix must have shape (N_B,) = ({n_brains},), got shape {w.shape}")
    require_finite(w, "mix")
    if np.any(w < 0):
        raise ValueError(
            f"mix must be non-negative (a convex mixture of the brains), got {w.tolist()}"
        )
    total = float(np.sum(w, dtype=np.float64))
    if abs(total - 1.0) > atol:
        raise ValueError(f"mix must sum to one, got {w.tolist()} with sum {total:.6g}")
    return w


def gam_attention(
    y: np.typing.ArrayLike,
    b: np.typing.ArrayLike,
    w_v: np.typing.ArrayLike,
    *,
    f: str = "power",
    n1: float = 1,
    coeffs: Sequence[float] | np.ndarray | None = None,
    mix: np.typing.ArrayLike | None = None,
    mask: np.typing.ArrayLike | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """One GAM head (eq. 13–19): brains' softmaxes mixed by ``W^P``, then applied to values.

    ``Ψ_i = softmax(ε_i)`` over the keys for each brain (:func:`gam_logits`),
    ``Φ = Σ_i W^P_i Ψ_i`` and ``z = Φ (y W^V)``.

    Parameters
    ----------
    y : array_like
        The sequence, one element per row.
    b : array_like
        The brains' matrices ``B_i``.
    w_v : array_like
        The value matrix ``W^V`` (right-multiplied).
    f, n1, coeffs
        The feature function, as in :func:`gam_logits`.
    mix : array_like, optional
        ``W^P``; default uniform ``1 / N_B``. Must be non-negative and sum to one
        (checked by ``attnlab.gam.check_mix``).
    mask : array_like of bool, optional
        ``True`` where element ``α`` may attend to ``β``; broadcastable to ``(n, n)``. A row
        with every key masked gets zero weights and a zero output.

    Returns
    -------
    z : numpy.ndarray
        The head's output.
    phi : numpy.ndarray
        The mixed attention weights ``Φ``; each row sums to one (zero if fully masked).

    Shapes
    ------
    ``y (n, M)``, ``b (N_B, M, M)`` or ``(M, M)``, ``w_v (M, M_v)``, ``mix (N_B,)`` →
    ``z (n, M_v)``, ``phi (n, n)``.

    Raises
    ------
    ValueError
        As :func:`gam_logits`, and on a ``w_v`` whose first size is not ``M``, a bad ``mix``
        or a bad ``mask``.

    Examples
    --------
    >>> import numpy as np
    >>> from attnlab import gam_attention
    >>> y = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> b = np.log(3.0) * np.eye(2)                   # each element prefers itself 3:1
    >>> z, phi = gam_attention(y, b, np.eye(2))
    >>> phi.round(3)
    array([[0.75, 0.25],
           [0.25, 0.75]])
    """
    y, b3 = _check_y_b(y, b)
    w_v = as_float_array(w_v, "w_v")
    if w_v.ndim != 2 or w_v.shape[0] != y.shape[1]:
        raise ValueError(
            f"w_v must have shape (M, M_v) with M={y.shape[1]} (the width of y {y.shape}), "
            f"got shape {w_v.shape}"
        )
    require_finite(w_v, "w_v")
    w_p = check_mix(mix, b3.shape[0])
    eps = gam_logits(y, b3, f=f, n1=n1, coeffs=coeffs)  # (N_B, n, n)
    if mask is not None:
        m = _check_mask(mask, eps.shape[1:])
        eps = np.where(m, eps, -np.inf)
    dtype = np.result_type(y, b3, w_v)
    psi = softmax(eps.astype(dtype, copy=False), axis=-1)  # (N_B, n, n)
    phi = np.tensordot(w_p.astype(dtype, copy=False), psi, axes=1)  # (n, n)
    return phi @ (y @ w_v), phi


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
    m = check_int(m, "m", minimum=-(2**62))  # a bool or a float is a TypeError
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
