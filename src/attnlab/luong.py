"""Luong attention in the column convention (chapter 07).

The Luong source writes one token per *column*: queries ``Q (d_q, n)``, keys ``K (d_k, m)``,
values ``V (d_v, m)``, and

.. math:: \\operatorname{Attention}(Q, K, V) = V \\operatorname{Softmax}(f(Q, K)),

where ``f(Q, K)`` is an ``(m, n)`` matrix of scores (row ``i`` = key ``i``, column ``j`` =
query ``j``) and the softmax normalises each *column*. The result ``(d_v, n)`` has one output
per column. The rest of the book uses rows; :func:`column_to_row` and :func:`row_to_column`
convert, and the column result is exactly the transpose of the row result.

Scores (``q_j`` column ``j`` of ``Q``, ``k_i`` column ``i`` of ``K``):

- ``"dot"``: ``k_iᵀ q_j`` (needs ``d_q = d_k``);
- ``"scaled"``: ``k_iᵀ q_j / sqrt(d_k)`` (needs ``d_q = d_k``);
- ``"general"``: ``k_iᵀ W q_j`` with ``w = W`` of shape ``(d_k, d_q)``;
- ``"concat"``: ``v_aᵀ tanh(W_a [q_j; k_i])`` with ``w = W_a`` of shape ``(d_a, d_q + d_k)``
  and ``v_a`` of shape ``(d_a,)``; splitting ``W_a = [W_q, W_k]`` gives Bahdanau's
  ``v_aᵀ tanh(W_q q_j + W_k k_i)``.

Luong et al. write the general score as ``h_tᵀ W_a h̄_s`` with the target (query) state on the
left, so their ``W_a (d_q, d_k)`` is the *transpose* of the column convention's ``W``.
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
from attnlab.attention import scaled_dot_product_attention
from attnlab.softmax import softmax

#: The score names :func:`luong_attention` accepts.
SCORES = ("dot", "scaled", "general", "concat")


def column_to_row(*matrices: np.typing.ArrayLike) -> tuple[np.ndarray, ...]:
    """Turn column-convention matrices (one token per column) into row convention.

    The conversion is a transpose of each matrix: ``Q (d_k, n) -> (n, d_k)``. Use it on the
    inputs ``q, k, v`` of :func:`luong_attention` before calling a row-convention function
    such as :func:`attnlab.attention.scaled_dot_product_attention`.

    Parameters
    ----------
    *matrices : array_like
        Two-dimensional arrays, one token per column.

    Returns
    -------
    tuple of numpy.ndarray
        The transposes, one token per row, in the same order.

    Shapes
    ------
    ``(d, n) -> (n, d)`` for each matrix.

    Raises
    ------
    ValueError
        If a matrix is not two-dimensional.

    Examples
    --------
    >>> import numpy as np
    >>> from attnlab import column_to_row
    >>> (q_rows,) = column_to_row(np.zeros((4, 3)))   # d_k = 4, n = 3 queries
    >>> q_rows.shape
    (3, 4)
    """
    out = []
    for index, matrix in enumerate(matrices):
        arr = as_float_array(matrix, f"matrix {index}")
        require_ndim(arr, f"matrix {index}", 2, "(d, tokens)")
        out.append(arr.T)
    return tuple(out)


def row_to_column(out: np.typing.ArrayLike, weights: np.typing.ArrayLike) -> tuple[np.ndarray, ...]:
    """Turn the result of a row-convention attention into the column convention.

    Parameters
    ----------
    out : array_like
        Row-convention output, one query per row.
    weights : array_like
        Row-convention weights, one query per row (each row sums to one).

    Returns
    -------
    out : numpy.ndarray
        One output per column.
    weights : numpy.ndarray
        One query per column (each column sums to one).

    Shapes
    ------
    ``out (n, d_v) -> (d_v, n)``, ``weights (n, m) -> (m, n)``.

    Raises
    ------
    ValueError
        If an input is not two-dimensional or the two disagree on the number of queries.

    Examples
    --------
    >>> import numpy as np
    >>> from attnlab import row_to_column
    >>> out, w = row_to_column(np.zeros((3, 5)), np.full((3, 2), 0.5))
    >>> out.shape, w.shape
    ((5, 3), (2, 3))
    """
    out = as_float_array(out, "out")
    weights = as_float_array(weights, "weights")
    require_ndim(out, "out", 2, "(n, d_v)")
    require_ndim(weights, "weights", 2, "(n, m)")
    if out.shape[0] != weights.shape[0]:
        raise ValueError(
            f"out {out.shape} and weights {weights.shape} must have the same number of "
            "queries (rows)"
        )
    return out.T, weights.T


def _check_inputs(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> None:
    """Shape and finiteness checks shared by every score."""
    require_ndim(q, "q", 2, "(d_q, n)")
    require_ndim(k, "k", 2, "(d_k, m)")
    require_ndim(v, "v", 2, "(d_v, m)")
    for name, arr in (("q", q), ("k", k), ("v", v)):
        require_finite(arr, name)
    if k.shape[1] != v.shape[1]:
        raise ValueError(
            f"keys and values must have the same number of columns m: k has shape {k.shape}, "
            f"v has shape {v.shape}"
        )
    require_nonempty({"q": q, "k": k}, axis=-1)


def _check_params(
    score: str,
    q: np.ndarray,
    k: np.ndarray,
    w: np.typing.ArrayLike | None,
    v_a: np.typing.ArrayLike | None,
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Check ``w`` and ``v_a`` against the score and the sizes of ``q (d_q, n)``, ``k (d_k, m)``.

    Returns ``(w, v_a)`` as float arrays (``None`` where the score takes no such parameter).
    """
    if not isinstance(score, str) or score not in SCORES:
        raise ValueError(f"unknown score {score!r}; choose one of {', '.join(SCORES)}")
    d_q, d_k = q.shape[0], k.shape[0]
    if score in ("dot", "scaled"):
        if w is not None or v_a is not None:
            raise ValueError(f"score {score!r} has no parameters; pass w=None and v_a=None")
        if d_q != d_k:
            raise ValueError(
                f"score {score!r} needs queries and keys of the same size: q has shape "
                f"{q.shape}, k has shape {k.shape}; use score='general' with w (d_k, d_q)"
            )
        if d_k == 0:
            raise ValueError(f"empty key size d_k = 0: q has shape {q.shape}, k {k.shape}")
        return None, None
    if w is None:
        raise ValueError(f"score {score!r} needs the weight matrix w")
    w = as_float_array(w, "w")
    require_finite(w, "w")
    if score == "general":
        if v_a is not None:
            raise ValueError("score 'general' takes no v_a; pass v_a=None")
        if w.shape != (d_k, d_q):
            raise ValueError(
                f"score 'general' needs w of shape (d_k, d_q) = ({d_k}, {d_q}) for k_iᵀ W q_j "
                f"with q {q.shape} and k {k.shape}, got w of shape {w.shape}"
            )
        return w, None
    # concat
    if v_a is None:
        raise ValueError("score 'concat' needs the vector v_a of shape (d_a,)")
    v_a = as_float_array(v_a, "v_a")
    require_finite(v_a, "v_a")
    require_ndim(w, "w", 2, "(d_a, d_q + d_k)")
    if w.shape[1] != d_q + d_k:
        raise ValueError(
            f"score 'concat' needs w of shape (d_a, d_q + d_k) = (d_a, {d_q + d_k}) for "
            f"q {q.shape} and k {k.shape}, got w of shape {w.shape}"
        )
    if v_a.shape != (w.shape[0],):
        raise ValueError(
            f"v_a must have shape (d_a,) = ({w.shape[0]},) to match w {w.shape}, "
            f"got shape {v_a.shape}"
        )
    return w, v_a


def luong_scores(
    q: np.typing.ArrayLike,
    k: np.typing.ArrayLike,
    score: str = "dot",
    w: np.typing.ArrayLike | None = None,
    v_a: np.typing.ArrayLike | None = None,
) -> np.ndarray:
    """The score matrix ``f(Q, K)`` of Luong attention, before the column softmax.

    Parameters
    ----------
    q : array_like
        Queries, one per column.
    k : array_like
        Keys, one per column.
    score : str
        Which score: ``"dot"``, ``"scaled"``, ``"general"`` or ``"concat"`` (see the module
        docstring for the formulas).
    w : array_like, optional
        ``"general"``: ``W (d_k, d_q)`` in ``k_iᵀ W q_j``. ``"concat"``: ``W_a (d_a, d_q + d_k)``
        applied to the stacked column ``[q_j; k_i]``. Must be ``None`` for the other scores.
    v_a : array_like, optional
        ``"concat"`` only: the vector ``(d_a,)`` that turns ``tanh(W_a [q_j; k_i])`` into a
        number.

    Returns
    -------
    numpy.ndarray
        ``scores[i, j]`` = score of key ``i`` for query ``j``.

    Shapes
    ------
    ``q (d_q, n)``, ``k (d_k, m)`` → ``(m, n)``.

    Raises
    ------
    ValueError
        On an unknown ``score``, a missing or superfluous ``w``/``v_a``, sizes that do not
        fit together (each message names the shapes), an empty sequence, non-finite inputs,
        or scores that overflow the dtype.

    Examples
    --------
    >>> import numpy as np
    >>> from attnlab import luong_scores
    >>> q = np.array([[1.0], [2.0]])                 # one query, d_q = 2
    >>> k = np.array([[1.0, 0.0], [0.0, 1.0]])       # two keys, d_k = 2
    >>> luong_scores(q, k, "dot")
    array([[1.],
           [2.]])
    >>> luong_scores(q, k, "general", w=np.array([[0.0, 1.0], [1.0, 0.0]]))
    array([[2.],
           [1.]])
    """
    q = as_float_array(q, "q")
    k = as_float_array(k, "k")
    require_ndim(q, "q", 2, "(d_q, n)")
    require_ndim(k, "k", 2, "(d_k, m)")
    require_finite(q, "q")
    require_finite(k, "k")
    require_nonempty({"q": q, "k": k}, axis=-1)
    w, v_a = _check_params(score, q, k, w, v_a)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is reported below
        scores = _raw_scores(score, q, k, w, v_a)
    require_finite_logits(scores, what="scores")
    return scores


def _raw_scores(
    score: str, q: np.ndarray, k: np.ndarray, w: np.ndarray | None, v_a: np.ndarray | None
) -> np.ndarray:
    """The scores of :func:`luong_scores` for checked inputs (may overflow: caller checks)."""
    if score in ("dot", "scaled"):
        # Row convention: scores (n, m) = Q_rows K_rowsᵀ; the column convention is KᵀQ (m, n).
        scale = 1.0 if score == "dot" else 1.0 / np.sqrt(k.shape[0])
        return (k.T @ q) * np.asarray(scale, dtype=np.result_type(q, k))
    if score == "general":
        return k.T @ (w @ q)
    d_q = q.shape[0]
    # W_a [q_j; k_i] = W_q q_j + W_k k_i with the two column blocks of W_a (Bahdanau's form):
    # compute each block once instead of stacking all m * n pairs.
    from_q = w[:, :d_q] @ q  # (d_a, n)
    from_k = w[:, d_q:] @ k  # (d_a, m)
    hidden = np.tanh(from_k[:, :, None] + from_q[:, None, :])  # (d_a, m, n)
    return np.einsum("a,amn->mn", v_a, hidden)


def luong_attention(
    q: np.typing.ArrayLike,
    k: np.typing.ArrayLike,
    v: np.typing.ArrayLike,
    score: str = "dot",
    w: np.typing.ArrayLike | None = None,
    v_a: np.typing.ArrayLike | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Luong attention ``V Softmax(f(Q, K))`` in the column convention (one token per column).

    ``"dot"``, ``"scaled"`` and ``"general"`` are computed by
    :func:`attnlab.attention.scaled_dot_product_attention` on the transposed (row-convention)
    inputs, ``"concat"`` by :func:`luong_scores` and a column-wise :func:`attnlab.softmax`.

    Parameters
    ----------
    q : array_like
        Queries, one per column.
    k : array_like
        Keys, one per column.
    v : array_like
        Values, one per column (one per key).
    score : str
        The score function: ``"dot"``, ``"scaled"``, ``"general"`` or ``"concat"`` (see
        :func:`luong_scores`).
    w : array_like, optional
        ``W (d_k, d_q)`` for ``"general"``, ``W_a (d_a, d_q + d_k)`` for ``"concat"``.
    v_a : array_like, optional
        ``(d_a,)``, for ``"concat"`` only.

    Returns
    -------
    out : numpy.ndarray
        ``V @ weights``: column ``j`` is the weighted average of the value columns for query
        ``j``.
    weights : numpy.ndarray
        ``weights[i, j]`` = weight of key ``i`` for query ``j``; each column sums to one.

    Shapes
    ------
    ``q (d_q, n)``, ``k (d_k, m)``, ``v (d_v, m)`` → ``out (d_v, n)``, ``weights (m, n)``.
    ``d_q = d_k`` for ``"dot"`` and ``"scaled"``.

    Raises
    ------
    ValueError
        On an unknown ``score``; inputs that are not 2-D or not finite; keys and values with
        different numbers of columns; an empty sequence; missing, superfluous or misshapen
        ``w``/``v_a``; scores that overflow the dtype.

    Examples
    --------
    >>> import numpy as np
    >>> from attnlab import luong_attention
    >>> q = np.array([[np.log(3.0)], [0.0]])        # one query (d_k = 2, n = 1)
    >>> k = np.eye(2)                               # two keys (m = 2)
    >>> v = np.array([[10.0, 20.0]])                # their values (d_v = 1)
    >>> out, w = luong_attention(q, k, v, "dot")
    >>> w.round(3), out.round(3)
    (array([[0.75],
           [0.25]]), array([[12.5]]))
    """
    q = as_float_array(q, "q")
    k = as_float_array(k, "k")
    v = as_float_array(v, "v")
    _check_inputs(q, k, v)
    w, v_a = _check_params(score, q, k, w, v_a)
    if score == "concat":
        scores = luong_scores(q, k, "concat", w=w, v_a=v_a)
        weights = softmax(scores, axis=0)  # each column (one query) sums to one
        return v @ weights, weights
    if score == "general":
        # k_iᵀ W q_j is a plain dot product of k_i with the transformed query W q_j.
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is reported below
            q_for_dot, scale = w @ q, 1.0
        require_finite_logits(q_for_dot, what="scores (W q)")
    else:
        q_for_dot, scale = q, (1.0 if score == "dot" else None)
    q_rows, k_rows, v_rows = column_to_row(q_for_dot, k, v)
    out_rows, weights_rows = scaled_dot_product_attention(q_rows, k_rows, v_rows, scale=scale)
    return row_to_column(out_rows, weights_rows)
