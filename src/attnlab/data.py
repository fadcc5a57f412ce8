"""Seeded synthetic sequence tasks (numpy only; nothing is downloaded).

A task is a :class:`SequenceTask`: integer token arrays for the source and target sequences,
padded to a common length with the padding id ``0``, their true lengths, and one
:class:`Vocab` for each side. Every generator takes a ``seed`` and returns the same data for
the same seed on every machine.

Tasks so far:

- :func:`lookup_task` (chapter 01): find the one token whose key matches token 0's key and
  return its value. The partner sits at a different offset in every example, so a
  fixed-offset kernel can only average, while content-dependent weights solve it exactly.
- :func:`date_task` (chapter 07): rewrite a date written in one of several human formats,
  such as ``"25 dec 2019"`` or ``"dec 25, 2019"``, as ISO ``"2019-12-25"``. The output's
  characters come from different places in the input depending on the format, so a decoder
  must learn *where* to look: a task that needs alignment.

Helpers: :func:`pad_sequences` and :func:`batch_indices`.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

#: Id of the padding token in every vocabulary.
PAD_ID = 0
#: Id of the begin-of-sequence token (fed to a decoder as its first input).
BOS_ID = 1
#: The special tokens at the start of every vocabulary, in id order.
SPECIALS = ("<pad>", "<bos>")

MONTHS = (
    "january", "february", "march", "april", "may", "june",
    "july", "august", "september", "october", "november", "december",
)  # fmt: skip

#: The source formats of :func:`date_task` (English month names, independent of the locale).
DATE_FORMATS = ("d mon yyyy", "d month yyyy", "mon d, yyyy", "dd/mm/yyyy", "yyyy mon dd")


@dataclass(frozen=True)
class Vocab:
    """A token vocabulary: ids ``0`` and ``1`` are ``<pad>`` and ``<bos>``, then the tokens.

    Parameters
    ----------
    tokens : tuple of str
        Every token, specials first; the id of a token is its position.

    Examples
    --------
    >>> from attnlab.data import Vocab
    >>> vocab = Vocab.from_text(["ab", "ba c"])
    >>> vocab.tokens
    ('<pad>', '<bos>', ' ', 'a', 'b', 'c')
    >>> vocab.encode("cab")
    [5, 3, 4]
    >>> vocab.decode([5, 3, 4, 0, 0])
    'cab'
    """

    tokens: tuple[str, ...]

    @classmethod
    def from_text(cls, texts: Sequence[str]) -> Vocab:
        """A character vocabulary: the specials, then every character of ``texts``, sorted."""
        chars = sorted(set("".join(texts)))
        return cls(SPECIALS + tuple(chars))

    def __len__(self) -> int:
        return len(self.tokens)

    def encode(self, text: str) -> list[int]:
        """Token ids of the characters of ``text``; raises ``ValueError`` on an unknown one."""
        index = {token: i for i, token in enumerate(self.tokens)}
        unknown = sorted({ch for ch in text if ch not in index})
        if unknown:
            raise ValueError(f"characters {unknown} of {text!r} are not in the vocabulary")
        return [index[ch] for ch in text]

    def decode(self, ids: Sequence[int] | np.ndarray) -> str:
        """The text of ``ids``, skipping ``<pad>`` and ``<bos>``."""
        return "".join(self.tokens[int(i)] for i in ids if int(i) >= len(SPECIALS))


@dataclass(frozen=True)
class SequenceTask:
    """Source and target token sequences of a sequence-to-sequence task.

    Attributes
    ----------
    src : numpy.ndarray
        Source ids ``(N, s_src)``, padded with ``PAD_ID`` after each sequence.
    src_lengths : numpy.ndarray
        True source lengths ``(N,)``.
    tgt : numpy.ndarray
        Target ids ``(N, s_tgt)``, padded with ``PAD_ID`` (no ``<bos>``; a decoder adds it).
    tgt_lengths : numpy.ndarray
        True target lengths ``(N,)``.
    src_vocab, tgt_vocab : Vocab
        The vocabularies of the two sides.
    src_text, tgt_text : tuple of str
        The sequences as text, for printing.
    """

    src: np.ndarray
    src_lengths: np.ndarray
    tgt: np.ndarray
    tgt_lengths: np.ndarray
    src_vocab: Vocab
    tgt_vocab: Vocab
    src_text: tuple[str, ...]
    tgt_text: tuple[str, ...]

    def __len__(self) -> int:
        return int(self.src.shape[0])

    def subset(self, index: np.typing.ArrayLike) -> SequenceTask:
        """The examples at ``index`` (an integer array or a slice), same vocabularies."""
        idx = np.arange(len(self))[index]
        return SequenceTask(
            src=self.src[idx],
            src_lengths=self.src_lengths[idx],
            tgt=self.tgt[idx],
            tgt_lengths=self.tgt_lengths[idx],
            src_vocab=self.src_vocab,
            tgt_vocab=self.tgt_vocab,
            src_text=tuple(self.src_text[i] for i in idx),
            tgt_text=tuple(self.tgt_text[i] for i in idx),
        )

    def split(self, n_test: int) -> tuple[SequenceTask, SequenceTask]:
        """The first ``len - n_test`` examples for training, the last ``n_test`` for testing."""
        if not 0 < n_test < len(self):
            raise ValueError(f"n_test must be between 1 and {len(self) - 1}, got {n_test}")
        return self.subset(slice(0, len(self) - n_test)), self.subset(
            slice(len(self) - n_test, None)
        )


def pad_sequences(
    sequences: Sequence[Sequence[int]], pad_id: int = PAD_ID, length: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Stack integer sequences of different lengths into one array, padding on the right.

    Parameters
    ----------
    sequences : list of list of int
        The token ids.
    pad_id : int
        The id written after each sequence.
    length : int, optional
        The padded length (default: the longest sequence).

    Returns
    -------
    padded : numpy.ndarray of int64
        One sequence per row.
    lengths : numpy.ndarray of int64
        The true length of each sequence.

    Shapes
    ------
    ``N`` sequences → ``padded (N, length)``, ``lengths (N,)``.

    Raises
    ------
    ValueError
        If there are no sequences, or a sequence is longer than ``length``.

    Examples
    --------
    >>> from attnlab.data import pad_sequences
    >>> padded, lengths = pad_sequences([[5, 6, 7], [8]])
    >>> padded
    array([[5, 6, 7],
           [8, 0, 0]])
    >>> lengths
    array([3, 1])
    """
    if len(sequences) == 0:
        raise ValueError("pad_sequences needs at least one sequence")
    lengths = np.array([len(s) for s in sequences], dtype=np.int64)
    width = int(lengths.max()) if length is None else length
    if lengths.max() > width:
        raise ValueError(f"a sequence has length {lengths.max()} > the padded length {width}")
    padded = np.full((len(sequences), width), pad_id, dtype=np.int64)
    for row, seq in enumerate(sequences):
        padded[row, : len(seq)] = seq
    return padded, lengths


def batch_indices(n: int, batch_size: int, seed: int | None = None) -> Iterator[np.ndarray]:
    """Split ``range(n)`` into batches of at most ``batch_size`` indices.

    Parameters
    ----------
    n : int
        Number of examples.
    batch_size : int
        Examples per batch (the last batch may be smaller).
    seed : int, optional
        Shuffle with ``np.random.default_rng(seed)`` first; ``None`` keeps the order.

    Yields
    ------
    numpy.ndarray of int
        The indices of one batch.

    Raises
    ------
    ValueError
        If ``n`` or ``batch_size`` is not positive.

    Examples
    --------
    >>> from attnlab.data import batch_indices
    >>> [b.tolist() for b in batch_indices(5, 2)]
    [[0, 1], [2, 3], [4]]
    """
    if n <= 0 or batch_size <= 0:
        raise ValueError(f"n and batch_size must be positive, got n={n}, batch_size={batch_size}")
    order = np.arange(n) if seed is None else np.random.default_rng(seed).permutation(n)
    for start in range(0, n, batch_size):
        yield order[start : start + batch_size]


def format_date(date: datetime.date, fmt: str) -> str:
    """Write ``date`` in one of :data:`DATE_FORMATS`, with English month names.

    Examples
    --------
    >>> import datetime
    >>> from attnlab.data import format_date
    >>> day = datetime.date(2019, 12, 5)
    >>> [format_date(day, f) for f in ("d mon yyyy", "mon d, yyyy", "dd/mm/yyyy")]
    ['5 dec 2019', 'dec 5, 2019', '05/12/2019']
    """
    month = MONTHS[date.month - 1]
    if fmt == "d mon yyyy":
        return f"{date.day} {month[:3]} {date.year}"
    if fmt == "d month yyyy":
        return f"{date.day} {month} {date.year}"
    if fmt == "mon d, yyyy":
        return f"{month[:3]} {date.day}, {date.year}"
    if fmt == "dd/mm/yyyy":
        return f"{date.day:02d}/{date.month:02d}/{date.year}"
    if fmt == "yyyy mon dd":
        return f"{date.year} {month[:3]} {date.day:02d}"
    raise ValueError(f"unknown date format {fmt!r}; choose one of {', '.join(DATE_FORMATS)}")


def date_task(
    n: int,
    seed: int = 0,
    formats: Sequence[str] = DATE_FORMATS,
    years: tuple[int, int] = (1950, 2049),
) -> SequenceTask:
    """Date normalisation: ``"25 dec 2019"`` (and other formats) → ``"2019-12-25"``.

    Each example draws a uniformly random day between 1 January of ``years[0]`` and
    31 December of ``years[1]`` and a uniformly random format from ``formats``. Both
    vocabularies are fixed (all digits, the letters of the month names, space, comma, slash
    and hyphen), so tasks with different seeds or sizes share them.

    Parameters
    ----------
    n : int
        Number of examples.
    seed : int
        Seed of ``np.random.default_rng``; the same seed gives the same examples.
    formats : tuple of str
        Source formats to draw from, a subset of :data:`DATE_FORMATS`.
    years : (int, int)
        First and last year (inclusive).

    Returns
    -------
    SequenceTask
        Source ids padded to the longest source, targets of length 10 (``YYYY-MM-DD``).

    Shapes
    ------
    ``src (n, s_src)``, ``src_lengths (n,)``, ``tgt (n, 10)``, ``tgt_lengths (n,)``.

    Raises
    ------
    ValueError
        If ``n`` is not positive, a format is unknown, or the years are out of order.

    Examples
    --------
    >>> from attnlab.data import date_task
    >>> task = date_task(3, seed=1)
    >>> task.tgt.shape
    (3, 10)
    >>> task.tgt_vocab.decode(task.tgt[0]) == task.tgt_text[0]
    True
    """
    if n <= 0:
        raise ValueError(f"n must be positive, got {n}")
    unknown = [f for f in formats if f not in DATE_FORMATS]
    if unknown or len(formats) == 0:
        raise ValueError(f"unknown date formats {unknown}; choose from {', '.join(DATE_FORMATS)}")
    first, last = datetime.date(years[0], 1, 1), datetime.date(years[1], 12, 31)
    if first > last:
        raise ValueError(f"years must be (first, last) with first <= last, got {years}")
    rng = np.random.default_rng(seed)
    offsets = rng.integers(0, (last - first).days + 1, size=n)
    which = rng.integers(0, len(formats), size=n)
    dates = [first + datetime.timedelta(days=int(o)) for o in offsets]
    src_text = tuple(format_date(d, formats[int(f)]) for d, f in zip(dates, which, strict=True))
    tgt_text = tuple(d.isoformat() for d in dates)
    src_vocab = Vocab.from_text(["0123456789 ,/-", *MONTHS])
    tgt_vocab = Vocab.from_text(["0123456789-"])
    src, src_lengths = pad_sequences([src_vocab.encode(t) for t in src_text])
    tgt, tgt_lengths = pad_sequences([tgt_vocab.encode(t) for t in tgt_text])
    return SequenceTask(
        src, src_lengths, tgt, tgt_lengths, src_vocab, tgt_vocab, src_text, tgt_text
    )


def lookup_task(
    n: int, s: int = 8, n_keys: int = 6, window: int = 3, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Chapter 01's look-up task: return the value of the token whose key matches token 0's.

    Every token carries a one-hot *key* (one of ``n_keys``) and a *value* (a standard normal
    number, independent of everything else). Token 0 is the query. Exactly one other token,
    at a uniformly random non-zero offset in ``-window..window`` (taken modulo ``s``), shares
    its key; every other token gets a different key. The target is that partner's value.

    Parameters
    ----------
    n : int
        Number of examples.
    s : int
        Tokens per example.
    n_keys : int
        Number of distinct keys (at least 2, so that the other tokens can differ from token 0).
    window : int
        Largest distance of the partner from token 0; ``1 <= window`` and ``2 * window < s``,
        so that the ``2 * window`` candidate offsets are distinct tokens.
    seed : int
        Seed of ``np.random.default_rng``; the same seed gives the same examples.

    Returns
    -------
    x : numpy.ndarray of float64
        The tokens: columns ``0..n_keys-1`` hold the one-hot key, the last column the value.
    target : numpy.ndarray of float64
        The partner's value.

    Shapes
    ------
    ``x (n, s, n_keys + 1)``, ``target (n,)``.

    Raises
    ------
    ValueError
        If ``n``, ``s``, ``n_keys`` or ``window`` is out of range (each named in the message).
    TypeError
        If one of them is not an integer (booleans included).

    Examples
    --------
    >>> from attnlab.data import lookup_task
    >>> x, y = lookup_task(2, seed=1)
    >>> x.shape, y.shape
    ((2, 8, 7), (2,))
    >>> keys = x[0, :, :-1].argmax(axis=1)
    >>> partners = [p for p in range(1, 8) if keys[p] == keys[0]]
    >>> len(partners) == 1 and bool(y[0] == x[0, partners[0], -1])
    True
    """
    for name, value in (("n", n), ("s", s), ("n_keys", n_keys), ("window", window)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise TypeError(f"{name} must be an integer, got {value!r}")
    if n <= 0:
        raise ValueError(f"n must be positive, got {n}")
    if n_keys < 2:
        raise ValueError(f"n_keys must be at least 2, got {n_keys}")
    if window < 1 or 2 * window >= s:
        raise ValueError(
            f"window must satisfy 1 <= window and 2 * window < s, got window={window}, s={s}"
        )
    rng = np.random.default_rng(seed)
    x = np.zeros((n, s, n_keys + 1))
    target = np.zeros(n)
    offsets = [j for j in range(-window, window + 1) if j != 0]
    for e in range(n):
        query_key = rng.integers(n_keys)
        others = rng.choice([k for k in range(n_keys) if k != query_key], size=s)
        keys = np.append(query_key, others[1:])  # every other token: another key
        partner = offsets[rng.integers(len(offsets))] % s
        keys[partner] = query_key
        x[e, np.arange(s), keys] = 1.0
        x[e, :, -1] = rng.normal(size=s)
        target[e] = x[e, partner, -1]
    return x, target
