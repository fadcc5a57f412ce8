"""GAM's relative positions (Pandya 2022, eq. 20–29) in numpy (ch. 09).

Per token a vector ``r^α`` of corpus distances (:func:`gam_relative_vectors`), from which a
learned embedding ``p^α`` feeds a second set of GAM brains ``B^P``
(:func:`gam_position_weights`, :func:`gam_relative_attention`), mixed with content attention
linearly (:func:`combine_linear`, eq. 20) or by a signed geometric mean
(:func:`combine_geometric`, eq. 25).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from attnlab._validate import (
    as_float_array,
    check_float,
    reject_tensor,
    require_finite,
    require_finite_logits,
    require_ndim,
)
from attnlab.attention import _check_mask
from attnlab.gam import check_mix, gam_attention, gam_logits
from attnlab.softmax import softmax


def gam_relative_vectors(positions: np.typing.ArrayLike) -> np.ndarray:
    """GAM's relative position vectors ``r^α`` (Pandya 2022, eq. 27–29), one per row.

    For tokens taken from a corpus at positions ``positions[0] < positions[1] < …``,
    ``r[α, α] = 1`` and ``r[α, i] = 2 + n_e`` where ``n_e`` is the number of corpus elements
    strictly between the two tokens. Since ``n_e = |p_α - p_i| - 1``, the closed form is
    ``r[α, i] = |p_α - p_i| + 1`` (which also gives 1 on the diagonal).

    Parameters
    ----------
    positions : array_like of int
        Corpus positions of the ``n`` tokens of the sequence, strictly increasing.

    Returns
    -------
    numpy.ndarray
        ``r``, integers, symmetric, ``r[α]`` is the vector ``r^α`` of token ``α``.

    Shapes
    ------
    ``positions (n,)`` → ``(n, n)``.

    Raises
    ------
    ValueError
        If ``positions`` is not a non-empty 1-D array of integers (that fit in ``int64``), or
        is not strictly increasing (the book's rule: tokens in corpus order, see chapter 09).

    Examples
    --------
    >>> from attnlab import gam_relative_vectors
    >>> gam_relative_vectors([0, 1, 3])      # "My name Vikram" from "My name is Vikram"
    array([[1, 2, 4],
           [2, 1, 3],
           [4, 3, 1]])
    """
    reject_tensor(positions, "positions")
    p = np.asarray(positions)
    if p.ndim != 1 or p.size == 0:
        raise ValueError(f"positions must be a non-empty 1-D array (n,), got shape {p.shape}")
    if not np.issubdtype(p.dtype, np.integer):
        raise ValueError(f"positions must be integers (corpus indices), got dtype {p.dtype}")
    if p.dtype == np.uint64 and int(p.max()) > np.iinfo(np.int64).max:
        raise ValueError(
            f"positions must fit in int64 (corpus indices), got {int(p.max())} in dtype uint64"
        )
    # In int64, so that an unsigned difference cannot wrap around (uint8: 1 - 3 = 254 > 0).
    p = p.astype(np.int64)
    steps = np.diff(p)
    if np.any(steps <= 0):
        bad = int(np.argmax(steps <= 0))
        raise ValueError(
            "positions must be strictly increasing (tokens in corpus order, no repeats); "
            f"got positions[{bad}]={p[bad]} then positions[{bad + 1}]={p[bad + 1]}"
        )
    return np.abs(p[:, None] - p[None, :]) + 1


def gam_position_weights(
    p: np.typing.ArrayLike,
    b_p: np.typing.ArrayLike,
    *,
    f: str = "power",
    n1: float = 1,
    coeffs: Sequence[float] | np.ndarray | None = None,
    mix_s: np.typing.ArrayLike | None = None,
    mask: np.typing.ArrayLike | None = None,
) -> np.ndarray:
    """GAM's positional attention weights ``Θ`` (Pandya 2022, eq. 22–24).

    From the embedded relative positions ``p`` (one ``p^α`` per row) and the positional
    brains ``B^P_i``: ``δ_i = Σ_rt f(p^α_r p^β_t) (B^P_i)_rt`` (:func:`attnlab.gam.gam_logits`,
    the same feature function as the content branch), ``ξ_i = softmax(δ_i)`` over the keys,
    and ``Θ = Σ_i W^S_i ξ_i``.

    ``W^S`` is constrained like GAM's ``W^P``: non-negative and summing to one
    (:func:`attnlab.gam.check_mix`), so ``Θ`` is a convex mixture of softmaxes and each of its
    rows is a probability vector. The paper leaves the constraint unstated (its sentence
    breaks off after "Here constraint on").

    Parameters
    ----------
    p : array_like
        Embedded relative positions, one row per token.
    b_p : array_like
        Positional brains ``B^P_i``.
    f, n1, coeffs
        Feature function, as in :func:`attnlab.gam.gam_logits`.
    mix_s : array_like, optional
        ``W^S``; default uniform ``1 / N_B``.
    mask : array_like of bool, optional
        ``True`` where token ``α`` may attend to ``β``; fully-masked rows get zero weights.

    Returns
    -------
    numpy.ndarray
        ``Θ``; rows sum to one (or zero if fully masked).

    Shapes
    ------
    ``p (n, M)``, ``b_p (N_B, M, M)`` or ``(M, M)``, ``mix_s (N_B,)`` → ``(n, n)``.

    Raises
    ------
    ValueError
        As :func:`attnlab.gam.gam_logits`, on a ``W^S`` that is negative or does not sum to one,
        on a bad mask, on non-finite ``p`` or ``b_p``, or on position logits ``δ`` that
        overflow the dtype (easy in float16; the softmax would read them as masked keys).

    Examples
    --------
    >>> import numpy as np
    >>> from attnlab import gam_position_weights
    >>> p = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> gam_position_weights(p, np.log(3.0) * np.eye(2)).round(3)
    array([[0.75, 0.25],
           [0.25, 0.75]])
    """
    p, b_p = as_float_array(p, "p"), as_float_array(b_p, "b_p")
    require_ndim(p, "p", 2, "(n, M)")
    if p.shape[0] == 0 or p.shape[1] == 0:
        raise ValueError(f"p must be a non-empty sequence (n, M), got shape {p.shape}")
    if b_p.ndim not in (2, 3) or b_p.shape[-2:] != (p.shape[1], p.shape[1]):
        raise ValueError(
            f"b_p must have shape (N_B, M, M) or (M, M) with M={p.shape[1]} (the width of p "
            f"{p.shape}), got shape {b_p.shape}"
        )
    if b_p.ndim == 3 and b_p.shape[0] == 0:
        raise ValueError("b_p must hold at least one positional brain, got N_B = 0")
    require_finite(p, "p")
    require_finite(b_p, "b_p")
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is reported just below
        delta = gam_logits(p, b_p, f=f, n1=n1, coeffs=coeffs, what="position logits δ")
    require_finite_logits(delta, what="position logits δ")  # finite inputs: an overflow
    w_s = check_mix(mix_s, delta.shape[0])
    if mask is not None:
        delta = np.where(_check_mask(mask, delta.shape[1:]), delta, -np.inf)
    xi = softmax(delta, axis=-1)
    return np.tensordot(w_s.astype(xi.dtype, copy=False), xi, axes=1)


def _check_pair(z: np.typing.ArrayLike, pi: np.typing.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """``z`` and ``pi`` as finite float arrays of one shape, or raise."""
    z, pi = as_float_array(z, "z"), as_float_array(pi, "pi")
    if z.shape != pi.shape:
        raise ValueError(f"z and pi must have the same shape, got {z.shape} and {pi.shape}")
    require_finite(z, "z")
    require_finite(pi, "pi")
    return z, pi


def _check_c1(c1: float) -> float:
    """``c1`` as a float strictly between 0 and 1 (eq. 20), or raise."""
    c1 = check_float(c1, "c1", positive=False)
    if not 0.0 < c1 < 1.0:
        raise ValueError(f"c1 must lie strictly between 0 and 1 (eq. 20), got c1={c1}")
    return c1


def combine_linear(z: np.typing.ArrayLike, pi: np.typing.ArrayLike, c1: float) -> np.ndarray:
    """GAM's linear combination of content and position outputs (Pandya 2022, eq. 20).

    ``z_total = c1 · z + (1 - c1) · π`` with ``0 < c1 < 1`` strictly: ``c1 = 1`` would switch
    positions off and ``c1 = 0`` content, and a ``c1`` outside ``[0, 1]`` is no longer an
    average of the two.

    Shapes
    ------
    ``z (..., d)``, ``pi (..., d)`` (same shape) → ``(..., d)``.

    Raises
    ------
    ValueError
        If ``c1`` is not strictly between 0 and 1, the shapes differ, or an input is not
        finite.
    TypeError
        If ``c1`` is not a real number (a bool is not).

    Examples
    --------
    >>> from attnlab import combine_linear
    >>> combine_linear([2.0, -1.0], [0.0, 1.0], c1=0.25)
    array([0.5, 0.5])
    """
    z, pi = _check_pair(z, pi)
    c1 = _check_c1(c1)
    return c1 * z + (1.0 - c1) * pi


def combine_geometric(z: np.typing.ArrayLike, pi: np.typing.ArrayLike) -> np.ndarray:
    """GAM's geometric mean of content and position outputs (eq. 25), with a sign rule.

    The paper writes ``sqrt(z π)`` entry by entry, which is not a real number where ``z`` and
    ``π`` have opposite signs, and is positive where both are negative (a "mean" of -4 and -1
    that equals +2). The book's rule is the signed geometric mean

    ``g(z, π) = sign(z) · sqrt(z π)`` where ``z π >= 0``, and ``0`` where ``z π < 0``.

    It agrees with eq. 25 where both are non-negative, lies between ``z`` and ``π`` everywhere
    (``min <= g <= max``), is odd (``g(-z, -π) = -g(z, π)``), symmetric and continuous: where
    the signs disagree the only value between the two that joins up continuously with both
    sides is zero.

    Shapes
    ------
    ``z (..., d)``, ``pi (..., d)`` (same shape) → ``(..., d)``.

    Raises
    ------
    ValueError
        If the shapes differ or an input is not finite.

    Examples
    --------
    >>> from attnlab import combine_geometric
    >>> combine_geometric([4.0, -4.0, 4.0], [1.0, -1.0, -1.0])
    array([ 2., -2.,  0.])
    """
    z, pi = _check_pair(z, pi)
    # sqrt|z| · sqrt|π| rather than sqrt(z π): the product may overflow where the root does not
    root = np.sign(z) * (np.sqrt(np.abs(z)) * np.sqrt(np.abs(pi)))
    return np.where(z * np.sign(pi) > 0, root, np.zeros_like(root))  # 0 (not -0.0) off z π > 0


def gam_relative_attention(
    y: np.typing.ArrayLike,
    p: np.typing.ArrayLike,
    b: np.typing.ArrayLike,
    b_p: np.typing.ArrayLike,
    w_v: np.typing.ArrayLike,
    *,
    combine: str = "linear",
    c1: float = 0.5,
    f: str = "power",
    n1: float = 1,
    coeffs: Sequence[float] | np.ndarray | None = None,
    mix: np.typing.ArrayLike | None = None,
    mix_s: np.typing.ArrayLike | None = None,
    mask: np.typing.ArrayLike | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One GAM head with its relative-position branch (Pandya 2022, eq. 13–25).

    Content: ``z = Φ (y W^V)`` with ``Φ`` from the brains ``B`` (:func:`attnlab.gam.gam_attention`).
    Position: ``π = Θ (y W^V)`` with ``Θ`` from the positional brains ``B^P`` applied to the
    embedded relative positions ``p`` (:func:`gam_position_weights`); the same ``W^V``
    (eq. 21). Then ``z_total = c1 z + (1 - c1) π`` (``combine="linear"``, eq. 20) or the
    signed geometric mean (``combine="geometric"``, eq. 25, :func:`combine_geometric`).

    The branch assumes ``y`` carries no position information (no absolute table added).

    Parameters
    ----------
    y : array_like
        The sequence (content only), one element per row.
    p : array_like
        Embedded relative positions ``p^α``, same width ``M`` as ``y``.
    b, b_p : array_like
        Content brains ``B_i`` and positional brains ``B^P_i``.
    w_v : array_like
        Value matrix, shared by both branches.
    combine : str
        How to mix the two outputs: ``"linear"`` (eq. 20) or ``"geometric"`` (eq. 25).
    c1 : float
        Weight of content in the linear combination, ``0 < c1 < 1``.
    f, n1, coeffs
        Feature function of both branches.
    mix, mix_s : array_like, optional
        ``W^P`` and ``W^S`` (non-negative, sum to one); default uniform.
    mask : array_like of bool, optional
        ``True`` where ``α`` may attend to ``β``, applied to both branches.

    Returns
    -------
    z_total : numpy.ndarray
        The head's output.
    phi : numpy.ndarray
        Content weights ``Φ``.
    theta : numpy.ndarray
        Positional weights ``Θ``.

    Shapes
    ------
    ``y (n, M)``, ``p (n, M)``, ``b (N_B, M, M)``, ``b_p (N_S, M, M)``, ``w_v (M, M_v)`` →
    ``z_total (n, M_v)``, ``phi (n, n)``, ``theta (n, n)``.

    Raises
    ------
    ValueError
        If ``p`` and ``y`` differ in shape, ``c1`` is outside ``(0, 1)``, ``combine`` is
        unknown, or as in :func:`attnlab.gam.gam_attention`.

    Examples
    --------
    >>> import numpy as np
    >>> from attnlab import gam_relative_attention
    >>> y = np.eye(2); p = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> zero = np.zeros((2, 2))                 # content brain: uniform weights
    >>> z, phi, theta = gam_relative_attention(y, p, zero, np.log(3.0) * np.eye(2), np.eye(2))
    >>> z.round(3)                              # half of uniform, half of the 3:1 position
    array([[0.625, 0.375],
           [0.375, 0.625]])
    """
    y = as_float_array(y, "y")
    p = as_float_array(p, "p")
    if y.shape != p.shape:
        raise ValueError(
            f"p (the embedded relative positions) must have the shape of y (n, M): "
            f"y {y.shape}, p {p.shape}"
        )
    if combine not in ("linear", "geometric"):
        raise ValueError(f'combine must be "linear" or "geometric", got {combine!r}')
    if combine == "linear":
        c1 = _check_c1(c1)
    theta = gam_position_weights(p, b_p, f=f, n1=n1, coeffs=coeffs, mix_s=mix_s, mask=mask)
    z, phi = gam_attention(y, b, w_v, f=f, n1=n1, coeffs=coeffs, mix=mix, mask=mask)
    pi = theta @ (y @ as_float_array(w_v, "w_v"))
    if combine == "linear":
        return combine_linear(z, pi, c1), phi, theta
    return combine_geometric(z, pi), phi, theta
