"""Token sequences for sequence-to-sequence tasks: vocabularies, padding and batches.

A task is a :class:`~attnlab.data.SequenceTask`: integer token arrays for the source and
target sequences, padded to a common length with :data:`PAD_ID`, their true lengths, and one
:class:`~attnlab.data.Vocab` for each side; :func:`~attnlab.data.pad_sequences` pads and
:func:`~attnlab.data.batch_indices` cuts an epoch into (shuffled) mini-batches. The task
generators that fill these containers are in :mod:`attnlab.data`, which re-exports (and
documents) every name here; the constants are documented below.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "PAD_ID",
    "BOS_ID",
    "SPECIALS",
    "Vocab",
    "SequenceTask",
    "pad_sequences",
    "batch_indices",
]

#: Id of the padding token in every vocabulary.
PAD_ID = 0
#: Id of the begin-of-sequence token (fed to a decoder as its first input).
BOS_ID = 1
#: The special tokens at the start of every vocabulary, in id order.
SPECIALS = ("<pad>", "<bos>")


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
