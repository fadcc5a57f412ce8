"""Seeded synthetic sequence tasks of chapters 01 and 07 (numpy only; nothing is downloaded).

A task is a :class:`~attnlab.data.SequenceTask`: integer token arrays for the source and
target sequences, padded to a common length with the padding id ``0``, their true lengths,
and one :class:`~attnlab.data.Vocab` for each side. Every generator takes a ``seed`` and
returns the same data for the same seed on every machine.

Tasks so far:

- :func:`~attnlab.data.lookup_task` (chapter 01): find the one token whose key matches token
  0's key and return its value. The partner sits at a different offset in every example, so
  a fixed-offset kernel can only average, while content-dependent weights solve it exactly.
- :func:`~attnlab.data.date_task` (chapter 07): rewrite a date written in one of several
  human formats, such as ``"25 dec 2019"`` or ``"dec 25, 2019"``, as ISO ``"2019-12-25"``.
  The output's characters come from different places in the input depending on the format,
  so a decoder must learn *where* to look: a task that needs alignment.

Helpers: :func:`~attnlab.data.pad_sequences` and :func:`~attnlab.data.batch_indices`. They
and the containers (:class:`~attnlab.data.Vocab`, :class:`~attnlab.data.SequenceTask`, the ids
``PAD_ID`` and ``BOS_ID``) are defined in :mod:`attnlab.data.sequences`; :mod:`attnlab.data`
re-exports them with the generators defined here, so ``from attnlab.data import date_task``
works.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence

import numpy as np

from attnlab._validate import ANY_INT, check_int
from attnlab.data.sequences import (
    BOS_ID,
    PAD_ID,
    SPECIALS,
    SequenceTask,
    Vocab,
    batch_indices,
    pad_sequences,
)

__all__ = [
    "PAD_ID",
    "BOS_ID",
    "SPECIALS",
    "DATE_FORMATS",
    "Vocab",
    "SequenceTask",
    "pad_sequences",
    "batch_indices",
    "format_date",
    "date_task",
    "lookup_task",
]

MONTHS = (
    "january", "february", "march", "april", "may", "june",
    "july", "august", "september", "october", "november", "december",
)  # fmt: skip

#: The source formats of :func:`~attnlab.data.date_task` (English month names, whatever the
#: locale).
DATE_FORMATS = ("d mon yyyy", "d month yyyy", "mon d, yyyy", "dd/mm/yyyy", "yyyy mon dd")


def format_date(date: datetime.date, fmt: str) -> str:
    """Write ``date`` in one of :data:`~attnlab.data.generators.DATE_FORMATS` (English months).

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
        Source formats to draw from, a subset of :data:`~attnlab.data.generators.DATE_FORMATS`.
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
        check_int(value, name, minimum=ANY_INT)  # the ranges are checked below
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
