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

One module per concept, re-exported here: the feature function (:func:`signed_power`) in
:mod:`attnlab.gam_power`, the initialisation (:func:`gam_init_std`) in :mod:`attnlab.gam_init`;
the logits and the attention are defined here.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from attnlab._validate import (
    as_float_array,
    require_finite,
    require_finite_logits,
    require_ndim,
)
from attnlab.attention import _check_mask
from attnlab.gam_init import gam_init_std
from attnlab.gam_power import _power_terms, signed_power
from attnlab.softmax import softmax

__all__ = ["signed_power", "gam_logits", "check_mix", "gam_attention", "gam_init_std"]


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
