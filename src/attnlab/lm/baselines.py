"""What a language model must beat: interpolated Kneser–Ney n-grams and xz (numpy only).

:class:`KneserNey` is the interpolated Kneser–Ney character model of order ``n``
(Kneser and Ney 1995; Chen and Goodman 1999): the highest order uses discounted counts,
every lower order uses *continuation* counts (in how many distinct contexts a string was
seen), and the unigram is interpolated with the uniform distribution over the vocabulary,
so every id (``<unk>`` included) has a non-zero probability. One absolute discount ``D``
serves every order; :func:`tune_discount` picks it on the validation split.

:func:`xz_bits_per_char` is the conditional compressed size of a test text given the
training text, ``8 · (|xz(train + test)| − |xz(train)|) / |test|`` bits per character, with
Python's ``lzma`` at preset 9 (its 64 MiB dictionary holds the whole training text).
"""

from __future__ import annotations

import lzma

import numpy as np

from attnlab._validate import check_float, check_int

__all__ = ["KneserNey", "tune_discount", "xz_bits_per_char", "DISCOUNTS"]

#: The discounts :func:`tune_discount` tries.
DISCOUNTS = tuple(round(0.05 * i, 2) for i in range(1, 20))  # 0.05 … 0.95


def _grams(ids: np.ndarray, k: int, base: int) -> np.ndarray:
    """Codes of the k-grams ending at each position of the padded ``ids``: ``(N - k + 1,)``."""
    code = np.zeros(len(ids) - k + 1, dtype=np.int64)
    for j in range(k):
        code = code * base + ids[j : len(ids) - k + 1 + j]
    return code


def _table(codes: np.ndarray, counts: np.ndarray, base: int) -> dict[str, np.ndarray]:
    """Sorted gram codes and counts, and per context (code // base) its total and its types."""
    ctx, start = np.unique(codes // base, return_index=True)
    total = np.add.reduceat(counts, start) if len(codes) else np.zeros(0, np.int64)
    types = np.diff(np.append(start, len(codes)))
    return {"codes": codes, "counts": counts, "ctx": ctx, "total": total, "types": types}


def _lookup(keys: np.ndarray, values: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``values`` at the positions of ``query`` in the sorted ``keys``; 0 where absent."""
    if len(keys) == 0:
        return np.zeros(len(query), dtype=values.dtype)
    at = np.clip(np.searchsorted(keys, query), 0, len(keys) - 1)
    return np.where(keys[at] == query, values[at], 0)


class KneserNey:
    """Interpolated Kneser–Ney model of characters (or any ids) of order ``n``.

    Parameters
    ----------
    ids : numpy.ndarray of int
        The training ids, ``(N,)``, each in ``0 … vocab_size - 1``.
    vocab_size : int
        ``V``, the number of ids (the ``<unk>`` id included).
    order : int
        ``n``: the model conditions on the ``n - 1`` previous ids (3: a trigram).

    Notes
    -----
    With ``c`` the training counts, ``N₁₊(•w)`` the number of distinct ids seen before ``w``
    and ``D`` the discount, order ``k`` gives

    .. math::

        p_k(w \\mid h) = \\frac{\\max(c_k(hw) - D, 0) + D T_k(h) p_{k-1}(w \\mid h')}{c_k(h)}

    where ``h'`` drops the oldest id of ``h``, ``c_n`` are raw counts and ``c_k`` for
    ``k < n`` continuation counts, ``c_k(h) = Σ_w c_k(hw)``, ``T_k(h)`` the number of ``w``
    with ``c_k(hw) > 0``, and ``p_0 = 1/V``. A context never seen (``c_k(h) = 0``) falls back
    to ``p_{k-1}``. Positions before the start of a text see a padding id ``V``.

    Shapes
    ------
    ``ids (N,)`` → :meth:`bits` ``(N - 1,)``.

    Raises
    ------
    TypeError
        If a size is not an integer.
    ValueError
        If ``order`` is below 1 or ``V**order`` overflows int64, ``ids`` is empty or not 1-D
        or holds an id outside ``0 … V - 1``, or (in :meth:`bits`) the discount is not in
        ``(0, 1)``.

    Examples
    --------
    >>> import numpy as np
    >>> from attnlab.lm.baselines import KneserNey
    >>> lm = KneserNey(np.array([1, 2, 1, 2, 1, 2, 1, 2]), vocab_size=3, order=2)
    >>> p = lm.probabilities(np.array([1]), discount=0.5)   # after a 1, by hand:
    >>> p.round(4)           # (max(c - D, 0) + D·T·p_1) / 4 with p_1 = (1/9, 11/18, 5/18)
    array([[0.0139, 0.0764, 0.9097]])
    """

    def __init__(self, ids: np.ndarray, vocab_size: int, order: int) -> None:
        self.vocab_size = check_int(vocab_size, "vocab_size")
        self.order = check_int(order, "order")
        self.base = self.vocab_size + 1  # ids and the padding id V
        if self.base**self.order >= 2**62:
            raise ValueError(
                f"order={order} with vocab_size={vocab_size} does not fit an int64 code"
            )
        ids = self._check_ids(ids, "ids")
        padded = np.concatenate([np.full(self.order - 1, self.vocab_size), ids])
        self.tables = []
        codes, counts = np.unique(_grams(padded, self.order, self.base), return_counts=True)
        top = _table(codes, counts, self.base)
        lower = [top]
        for k in range(self.order - 1, 0, -1):  # continuation counts from the order above
            dropped = lower[-1]["codes"] % self.base**k  # drop the oldest id
            codes, counts = np.unique(dropped, return_counts=True)
            lower.append(_table(codes, counts, self.base))
        self.tables = lower[::-1]  # tables[k - 1] is order k

    def _check_ids(self, ids, name: str) -> np.ndarray:
        ids = np.asarray(ids)
        if ids.ndim != 1 or ids.size == 0 or not np.issubdtype(ids.dtype, np.integer):
            raise ValueError(f"{name} must be a non-empty 1-D integer array, got {ids.shape}")
        if ids.min() < 0 or ids.max() >= self.vocab_size:
            raise ValueError(
                f"{name} must lie in 0 … {self.vocab_size - 1}, got values from "
                f"{int(ids.min())} to {int(ids.max())}"
            )
        return ids.astype(np.int64)

    def _counts(self, context: np.ndarray, w: np.ndarray) -> list[tuple[np.ndarray, ...]]:
        """Per order ``k = 1 … n``: ``c_k(h)``, ``T_k(h)`` and ``c_k(hw)`` of each row.

        These look-ups do not depend on the discount, so :func:`tune_discount` makes them once
        and tries every discount on them.
        """
        out = []
        for k in range(1, self.order + 1):
            t = self.tables[k - 1]
            h = np.zeros(len(w), dtype=np.int64)
            for j in range(self.order - k, self.order - 1):  # the k - 1 most recent ids
                h = h * self.base + context[:, j]
            total = _lookup(t["ctx"], t["total"], h).astype(np.float64)
            types = _lookup(t["ctx"], t["types"], h)
            count = _lookup(t["codes"], t["counts"], h * self.base + w)
            out.append((total, types, count))
        return out

    def _mix(self, counts: list[tuple[np.ndarray, ...]], discount: float) -> np.ndarray:
        """The interpolation of the class docstring on the look-ups of :meth:`_counts`."""
        p = np.full(len(counts[0][0]), 1.0 / self.vocab_size)
        for total, types, count in counts:
            seen = total > 0
            mixed = (np.maximum(count - discount, 0) + discount * types * p) / np.where(
                seen, total, 1.0
            )
            p = np.where(seen, mixed, p)
        return p

    def _prob(self, context: np.ndarray, w: np.ndarray, discount: float) -> np.ndarray:
        """``p(w | context)`` for rows of ``context (M, n - 1)`` and ids ``w (M,)``."""
        return self._mix(self._counts(context, w), discount)

    def _contexts(self, ids: np.ndarray) -> np.ndarray:
        """``(N, n - 1)``: row ``t`` holds the ``n - 1`` ids before ``ids[t]`` (padded)."""
        padded = np.concatenate([np.full(self.order - 1, self.vocab_size), ids])
        n = len(ids)
        columns = [padded[j : j + n] for j in range(self.order - 1)]
        return np.stack(columns, axis=1) if columns else np.zeros((n, 0), dtype=np.int64)

    def probabilities(self, context: np.ndarray, discount: float = 0.75) -> np.ndarray:
        """The distribution over the next id after each row of ``context``.

        Parameters
        ----------
        context : numpy.ndarray of int
            ``(M, c)`` previous ids, oldest first; only the last ``n - 1`` are used, and a
            row shorter than ``n - 1`` is padded on the left.
        discount : float
            ``D`` in ``(0, 1)``.

        Returns
        -------
        numpy.ndarray
            ``(M, V)``, rows summing to one.
        """
        discount = self._check_discount(discount)
        context = np.atleast_2d(np.asarray(context, dtype=np.int64))
        m, c = context.shape
        need = self.order - 1
        if c < need:
            context = np.concatenate([np.full((m, need - c), self.vocab_size), context], axis=1)
        context = context[:, context.shape[1] - need :]
        rows = np.repeat(context, self.vocab_size, axis=0)
        w = np.tile(np.arange(self.vocab_size), m)
        return self._prob(rows, w, discount).reshape(m, self.vocab_size)

    def _check_discount(self, discount: float) -> float:
        discount = check_float(discount, "discount")
        if not 0.0 < discount < 1.0:
            raise ValueError(f"discount must lie in (0, 1), got {discount}")
        return discount

    def bits(self, ids: np.ndarray, discount: float = 0.75) -> np.ndarray:
        """``-log2 p(ids[t] | ids[:t])`` for ``t = 1 … N-1`` (the first id is not scored)."""
        discount = self._check_discount(discount)
        ids = self._check_ids(ids, "ids")
        contexts = self._contexts(ids)[1:]
        return -np.log2(self._prob(contexts, ids[1:], discount))

    def bits_per_char(self, ids: np.ndarray, discount: float = 0.75) -> float:
        """Mean of :meth:`bits`: the cross-entropy in bits per character."""
        return float(self.bits(ids, discount).mean())


def tune_discount(model: KneserNey, valid: np.ndarray, discounts=DISCOUNTS) -> tuple[float, float]:
    """The discount of ``discounts`` with the lowest validation bits per character.

    Returns
    -------
    (discount, bits_per_char) : tuple of float
    """
    valid = model._check_ids(valid, "valid")
    counts = model._counts(model._contexts(valid)[1:], valid[1:])  # once for all discounts
    scores = []
    for d in discounts:
        d = model._check_discount(d)
        scores.append((float(-np.log2(model._mix(counts, d)).mean()), d))
    best, d = min(scores)
    return d, best


def xz_bits_per_char(train: str, test: str, preset: int = 9) -> float:
    """``8 · (|xz(train + test)| − |xz(train)|) / |test|``: xz's bits per test character.

    Parameters
    ----------
    train, test : str
        Texts, compressed as UTF-8 (for ASCII text one byte per character).
    preset : int
        ``lzma`` preset, 0 … 9 (default 9, a 64 MiB dictionary).

    Raises
    ------
    TypeError
        If a text is not a str or ``preset`` not an integer.
    ValueError
        If ``test`` is empty or ``preset`` is outside 0 … 9.

    Examples
    --------
    >>> from attnlab.lm.baselines import xz_bits_per_char
    >>> train = "to be or not to be, that is the question. " * 200
    >>> xz_bits_per_char(train, train[:2000]) < 0.5     # seen before: almost free
    True
    """
    for name, t in (("train", train), ("test", test)):
        if not isinstance(t, str):
            raise TypeError(f"{name} must be a str, got {type(t).__name__}")
    if not test:
        raise ValueError("test is empty: bits per character of nothing")
    preset = check_int(preset, "preset", minimum=0)
    if not 0 <= preset <= 9:
        raise ValueError(f"preset must lie in 0 … 9, got {preset}")
    a = len(lzma.compress(train.encode("utf-8"), preset=preset))
    b = len(lzma.compress((train + test).encode("utf-8"), preset=preset))
    return 8.0 * (b - a) / len(test)

