"""Positions in attention: absolute, relative, and attention that reproduces convolution (ch. 09).

Self-attention treats its input as a set: permuting the tokens permutes the output the same
way. Order has to be put in from outside. This module holds the three ways the book studies,
plus the construction that closes the loop with chapter 01.

* **Sinusoidal absolute positions** (Vaswani et al. 2017): a fixed ``(n, d)`` table added to
  the token vectors, :func:`sinusoidal_positions`, with :func:`sinusoidal_shift_matrix`, the
  rotation that moves every row ``k`` places along.
* **Clipped relative positions** (Shaw et al. 2018): two learned tables of ``2 k_max + 1``
  vectors indexed by the signed distance ``j - i`` clipped to ``[-k_max, k_max]``,
  :func:`relative_position_index` and :func:`shaw_attention`.
* **GAM relative positions** (Pandya 2022, eq. 20–29): per token a vector ``r^α`` of corpus
  distances, :func:`gam_relative_vectors`, from which a learned embedding ``p^α`` feeds a
  second set of GAM brains ``B^P``: :func:`gam_position_weights`,
  :func:`gam_relative_attention`, and the two ways of mixing it with content attention,
  :func:`combine_linear` (eq. 20) and :func:`combine_geometric` (eq. 25).
* **Attention that is a convolution** (Cordonnier et al. 2020): ``2C+1`` heads whose logits
  depend on the relative position only, :func:`convolution_attention_params` and
  :func:`convolution_as_attention`, equal to :func:`attnlab.conv.local_context`.

Row convention throughout: one token per row, weights multiply on the right.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from attnlab._validate import as_float_array, require_finite, require_ndim
from attnlab.attention import _check_mask
from attnlab.gam import check_mix, gam_attention, gam_logits
from attnlab.softmax import softmax

# ---------------------------------------------------------------------------------------------
# Sinusoidal absolute positions
# ---------------------------------------------------------------------------------------------


def _check_size(value: int, name: str, minimum: int) -> int:
    """Return ``value`` as an ``int`` if it is an integer ``>= minimum`` (or raise)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {name}={value}")
    return int(value)


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
        If ``d`` is odd or not positive, ``n`` is negative, or ``base <= 1``.

    Examples
    --------
    >>> from attnlab import sinusoidal_positions
    >>> sinusoidal_positions(3, 4).round(3)     # columns: sin, cos at ω=1, then ω=0.01
    array([[ 0.   ,  1.   ,  0.   ,  1.   ],
           [ 0.841,  0.54 ,  0.01 ,  1.   ],
           [ 0.909, -0.416,  0.02 ,  1.   ]])
    """
    n = _check_size(n, "n", 0)
    d = _check_size(d, "d", 2)
    if d % 2:
        raise ValueError(
            f"d must be even for the interleaved sine/cosine layout (pairs of columns), got d={d}"
        )
    if not (np.isfinite(base) and base > 1):
        raise ValueError(f"base must be a finite number > 1, got {base}")
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
        If ``d`` is odd or not positive, or ``k`` is not finite.

    Examples
    --------
    >>> import numpy as np
    >>> from attnlab import sinusoidal_positions, sinusoidal_shift_matrix
    >>> pe = sinusoidal_positions(10, 6)
    >>> bool(np.allclose(pe[2] @ sinusoidal_shift_matrix(5, 6), pe[7]))
    True
    """
    d = _check_size(d, "d", 2)
    if d % 2:
        raise ValueError(f"d must be even (pairs of columns), got d={d}")
    if not np.isfinite(k):
        raise ValueError(f"the shift k must be finite, got {k}")
    theta = float(k) * _sinusoid_frequencies(d, base)
    m = np.zeros((d, d), dtype=np.float64)
    m[0::2, 0::2] = np.diag(np.cos(theta))
    m[0::2, 1::2] = np.diag(-np.sin(theta))
    m[1::2, 0::2] = np.diag(np.sin(theta))
    m[1::2, 1::2] = np.diag(np.cos(theta))
    return m


# ---------------------------------------------------------------------------------------------
# Shaw et al.: clipped relative positions
# ---------------------------------------------------------------------------------------------


def relative_position_index(n: int, k_max: int) -> np.ndarray:
    """Shaw et al.'s table index ``clip(j - i, -k_max, k_max) + k_max`` for query ``i``, key ``j``.

    Parameters
    ----------
    n : int
        Sequence length, ``n >= 1``.
    k_max : int
        Clipping distance, ``k_max >= 0``: all keys further than ``k_max`` to one side share a
        vector.

    Returns
    -------
    numpy.ndarray
        Integer indices in ``0 … 2 k_max``; index ``k_max`` is the token itself, ``k_max + 1``
        the next token to the right, ``k_max - 1`` the one to the left.

    Shapes
    ------
    ``→ (n, n)``, rows are queries ``i``, columns keys ``j``.

    Raises
    ------
    ValueError
        If ``n < 1`` or ``k_max < 0`` (or either is not an integer).

    Examples
    --------
    >>> from attnlab import relative_position_index
    >>> relative_position_index(4, k_max=1)
    array([[1, 2, 2, 2],
           [0, 1, 2, 2],
           [0, 0, 1, 2],
           [0, 0, 0, 1]])
    """
    n = _check_size(n, "n", 1)
    k_max = _check_size(k_max, "k_max (the clipping distance)", 0)
    positions = np.arange(n)
    distance = positions[None, :] - positions[:, None]  # [i, j] = j - i
    return np.clip(distance, -k_max, k_max) + k_max


def _check_tables(a_k: np.ndarray, a_v: np.ndarray, d_k: int, d_v: int) -> int:
    """Validate Shaw's tables ``a_k (2k_max+1, d_k)``, ``a_v (2k_max+1, d_v)``; return k_max."""
    require_ndim(a_k, "a_k", 2, "(2k_max+1, d_k)")
    require_ndim(a_v, "a_v", 2, "(2k_max+1, d_v)")
    if a_k.shape[0] != a_v.shape[0] or a_k.shape[0] % 2 == 0:
        raise ValueError(
            f"a_k and a_v must both have 2k_max+1 rows (an odd number): got shapes {a_k.shape} "
            f"and {a_v.shape}"
        )
    if a_k.shape[1] != d_k or a_v.shape[1] != d_v:
        raise ValueError(
            f"table widths must match the heads: a_k {a_k.shape} needs d_k={d_k}, "
            f"a_v {a_v.shape} needs d_v={d_v}"
        )
    return a_k.shape[0] // 2


def shaw_attention(
    q: np.typing.ArrayLike,
    k: np.typing.ArrayLike,
    v: np.typing.ArrayLike,
    a_k: np.typing.ArrayLike,
    a_v: np.typing.ArrayLike,
    mask: np.typing.ArrayLike | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Self-attention with Shaw et al.'s relative position tables added to keys and values.

    With ``a^K_ij = a_k[clip(j-i, -k_max, k_max) + k_max]`` and ``a^V_ij`` likewise,

    ``e_ij = q_i · (k_j + a^K_ij) / sqrt(d_k)``, ``α_ij = softmax_j(e_ij)``,
    ``z_i = Σ_j α_ij (v_j + a^V_ij)``,

    where the clipping distance ``k_max`` is read from the tables' ``2 k_max + 1`` rows.

    Parameters
    ----------
    q, k : array_like
        Projected queries and keys (``q = x W^Q``, ``k = x W^K``); leading axes (batch, heads)
        broadcast.
    v : array_like
        Projected values.
    a_k, a_v : array_like
        The tables, one row per clipped distance ``-k_max … k_max`` (shared by all heads, as in the
        paper).
    mask : array_like of bool, optional
        ``True`` where query ``i`` may attend to key ``j``, broadcastable to ``(..., s, s)``.
        A query with no allowed key gets zero weights and a zero output.

    Returns
    -------
    out : numpy.ndarray
        ``z``, the attended values plus the value table.
    weights : numpy.ndarray
        ``α``, each row sums to one (or is all zero if fully masked).

    Shapes
    ------
    ``q, k (..., s, d_k)``, ``v (..., s, d_v)``, ``a_k (2k_max+1, d_k)``, ``a_v (2k_max+1, d_v)`` →
    ``out (..., s, d_v)``, ``weights (..., s, s)``.

    Raises
    ------
    ValueError
        On mismatched shapes (queries, keys and values must share the length ``s``; tables
        must have an odd number of rows and the heads' widths), a non-boolean mask, or
        non-finite input.

    Examples
    --------
    >>> import numpy as np
    >>> from attnlab import shaw_attention
    >>> q = k = np.zeros((3, 2)); v = np.zeros((3, 1))
    >>> a_k = np.array([[0.0, 0.0], [0.0, 0.0], [0.0, 0.0]])   # k_max = 1: no key bias
    >>> a_v = np.array([[-1.0], [0.0], [1.0]])                 # values say "left" or "right"
    >>> out, w = shaw_attention(q, k, v, a_k, a_v)
    >>> out.ravel().round(3)          # token 0 sees one self + two right; token 2 the mirror
    array([ 0.667,  0.   , -0.667])
    """
    q, k, v = (as_float_array(t, name) for t, name in ((q, "q"), (k, "k"), (v, "v")))
    a_k, a_v = as_float_array(a_k, "a_k"), as_float_array(a_v, "a_v")
    for name, arr in (("q", q), ("k", k), ("v", v), ("a_k", a_k), ("a_v", a_v)):
        require_finite(arr, name)
    for name, arr in (("q", q), ("k", k), ("v", v)):
        if arr.ndim < 2:
            raise ValueError(f"{name} must have shape (..., s, d), got shape {arr.shape}")
    s = q.shape[-2]
    if k.shape[-2] != s or v.shape[-2] != s or q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"self-attention needs q, k (..., s, d_k) and v (..., s, d_v) of one length s: "
            f"got q {q.shape}, k {k.shape}, v {v.shape}"
        )
    if s == 0:
        raise ValueError(f"empty sequence: q has shape {q.shape}")
    clip = _check_tables(a_k, a_v, q.shape[-1], v.shape[-1])
    index = relative_position_index(s, clip)
    rel_k, rel_v = a_k[index], a_v[index]  # (s, s, d_k), (s, s, d_v)
    dtype = np.result_type(q, k, v, a_k, a_v)
    logits = q @ np.swapaxes(k, -1, -2) + np.einsum("...id,ijd->...ij", q, rel_k)
    logits = (logits / np.sqrt(q.shape[-1])).astype(dtype, copy=False)
    if mask is not None:
        logits = np.where(_check_mask(mask, logits.shape), logits, -np.inf)
    weights = softmax(logits, axis=-1)
    out = weights @ v + np.einsum("...ij,ijd->...id", weights, rel_v)
    return out.astype(dtype, copy=False), weights


# ---------------------------------------------------------------------------------------------
# GAM relative positions (Pandya 2022, eq. 26-29)
# ---------------------------------------------------------------------------------------------


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
        If ``positions`` is not a non-empty 1-D array of integers, or is not strictly
        increasing (a repeated or out-of-order position has no "elements between").

    Examples
    --------
    >>> from attnlab import gam_relative_vectors
    >>> gam_relative_vectors([0, 1, 3])      # "My name Vikram" from "My name is Vikram"
    array([[1, 2, 4],
           [2, 1, 3],
           [4, 3, 1]])
    """
    p = np.asarray(positions)
    if p.ndim != 1 or p.size == 0:
        raise ValueError(f"positions must be a non-empty 1-D array (n,), got shape {p.shape}")
    if not np.issubdtype(p.dtype, np.integer):
        raise ValueError(f"positions must be integers (corpus indices), got dtype {p.dtype}")
    steps = np.diff(p)
    if np.any(steps <= 0):
        bad = int(np.argmax(steps <= 0))
        raise ValueError(
            "positions must be strictly increasing (tokens in corpus order, no repeats); "
            f"got positions[{bad}]={p[bad]} then positions[{bad + 1}]={p[bad + 1]}"
        )
    p = p.astype(np.int64)
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
        or on a bad mask.

    Examples
    --------
    >>> import numpy as np
    >>> from attnlab import gam_position_weights
    >>> p = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> gam_position_weights(p, np.log(3.0) * np.eye(2)).round(3)
    array([[0.75, 0.25],
           [0.25, 0.75]])
    """
    delta = gam_logits(p, b_p, f=f, n1=n1, coeffs=coeffs)  # (N_B, n, n)
    w_s = check_mix(mix_s, delta.shape[0])
    if mask is not None:
        delta = np.where(_check_mask(mask, delta.shape[1:]), delta, -np.inf)
    xi = softmax(delta, axis=-1)
    return np.tensordot(w_s.astype(xi.dtype, copy=False), xi, axes=1)


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
        If ``c1`` is not strictly between 0 and 1, or the shapes differ.

    Examples
    --------
    >>> from attnlab import combine_linear
    >>> combine_linear([2.0, -1.0], [0.0, 1.0], c1=0.25)
    array([0.5, 0.5])
    """
    z, pi = as_float_array(z, "z"), as_float_array(pi, "pi")
    if z.shape != pi.shape:
        raise ValueError(f"z and pi must have the same shape, got {z.shape} and {pi.shape}")
    if not (np.isfinite(c1) and 0.0 < c1 < 1.0):
        raise ValueError(f"c1 must lie strictly between 0 and 1 (eq. 20), got c1={c1}")
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
        If the shapes differ.

    Examples
    --------
    >>> from attnlab import combine_geometric
    >>> combine_geometric([4.0, -4.0, 4.0], [1.0, -1.0, -1.0])
    array([ 2., -2.,  0.])
    """
    z, pi = as_float_array(z, "z"), as_float_array(pi, "pi")
    if z.shape != pi.shape:
        raise ValueError(f"z and pi must have the same shape, got {z.shape} and {pi.shape}")
    product = z * pi
    root = np.sign(z) * np.sqrt(np.maximum(product, 0))
    return np.where(product > 0, root, np.zeros_like(root))  # no -0.0 where a factor is 0


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
    if combine == "linear" and not (np.isfinite(c1) and 0.0 < c1 < 1.0):
        raise ValueError(f"c1 must lie strictly between 0 and 1 (eq. 20), got c1={c1}")
    z, phi = gam_attention(y, b, w_v, f=f, n1=n1, coeffs=coeffs, mix=mix, mask=mask)
    theta = gam_position_weights(p, b_p, f=f, n1=n1, coeffs=coeffs, mix_s=mix_s, mask=mask)
    pi = theta @ (y @ as_float_array(w_v, "w_v"))
    if combine == "linear":
        return combine_linear(z, pi, c1), phi, theta
    return combine_geometric(z, pi), phi, theta


# ---------------------------------------------------------------------------------------------
# Attention that is a convolution (Cordonnier et al. 2020)
# ---------------------------------------------------------------------------------------------


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
    s = _check_size(s, "s", 1)
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
        If the kernel is not 3-D with an odd number of offsets, ``2C+1 > s``, or ``alpha`` is
        not a positive finite number.

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
    s = _check_size(s, "s", 1)
    h, _, d_out = kernel.shape
    if h % 2 == 0:
        raise ValueError(f"kernel must have an odd number 2C+1 of offsets, got {kernel.shape}")
    if h > s:
        raise ValueError(
            f"kernel has {h} offsets but the sequence has only s={s} tokens (offsets would "
            "wrap onto each other)"
        )
    if alpha is not None and not (np.isfinite(alpha) and alpha > 0):
        raise ValueError(f"alpha must be a positive finite number (or None), got {alpha}")
    offsets = np.arange(h) - h // 2  # (h,)
    delta = circular_offsets(s)[None, :, :] - offsets[:, None, None]  # (h, s, s)
    if alpha is None:
        logits = np.where(delta == 0, 0.0, -np.inf)
    else:
        logits = -float(alpha) * delta.astype(np.float64) ** 2
    w_o = np.tile(np.eye(d_out, dtype=kernel.dtype), (h, 1))
    return logits.astype(kernel.dtype), kernel.copy(), w_o


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
        If ``x`` is not 2-D or empty, its width differs from the kernel's, or as in
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
    if kernel.shape[1] != x.shape[1]:
        raise ValueError(
            f"kernel input width {kernel.shape[1]} does not match x: x {x.shape} (s, d_in), "
            f"kernel {kernel.shape} (2C+1, d_in, d_out)"
        )
    logits, w_v, w_o = convolution_attention_params(kernel, x.shape[0], alpha)
    weights = softmax(logits, axis=-1)  # (h, s, s)
    heads = weights @ (x[None, :, :] @ w_v)  # (h, s, d_out)
    concat = np.concatenate(list(heads), axis=-1)  # (s, h * d_out)
    return concat @ w_o, weights
