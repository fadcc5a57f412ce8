"""Seeded synthetic token-labelling tasks for the attention study of chapter 10 (numpy only).

Every task is a batch of fixed-length integer sequences with one label slot per position: the
model reads ``inputs (N, n)`` and predicts ``targets (N, n)``, where positions that carry no
label hold :data:`IGNORE` (``-100``, the default ``ignore_index`` of
``torch.nn.functional.cross_entropy``). All examples of a task have the same length ``n``, so
a position module that is built for one length (GAM's relative positions) can be used.

The three tasks stress different abilities of an attention layer:

- :func:`shift_task` (copy with an offset): ``y_i = x_{i-k}``. The right key is always the
  same *distance* behind the query, whatever the tokens are: relative position.
- :func:`recall_task` (associative recall): a small dictionary of key–value tokens, then
  queries naming a key; the answer is that key's value. Where the pair sits does not matter,
  only *which* token matches: content.
- :func:`reverse_task` (reversal): ``y_i = x_{n-1-i}``. The distance to the right key
  changes with the query's place in the sequence: absolute position.
- :func:`gapped_shift_task` (copy at a corpus distance, on gapped windows): the ``n`` tokens
  are read from ``n`` sorted, distinct places of a longer stretch of ``span`` corpus
  positions, so *corpus* distance and *slot* distance differ; the label of a token is the
  token exactly ``distance`` corpus positions earlier, when that one was read. Only a model
  that sees corpus positions (``TokenTask.positions``) can solve it.

Nothing is downloaded; each generator returns the same arrays for the same arguments on every
machine (``numpy.random.default_rng(seed)``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

#: Label of positions that carry no target (skipped by the loss and the accuracy).
IGNORE = -100


@dataclass(frozen=True)
class TokenTask:
    """A batch of a token-labelling task.

    Attributes
    ----------
    name : str
        The task's name (a key of :data:`TASKS`).
    inputs : numpy.ndarray
        Input token ids (int64) in ``[0, vocab_in)``, shape ``(N, n)``.
    targets : numpy.ndarray
        Label ids (int64) in ``[0, vocab_out)`` or :data:`IGNORE`, shape ``(N, n)``.
    vocab_in : int
        Number of input token ids.
    vocab_out : int
        Number of label ids.
    positions : numpy.ndarray, optional
        Corpus positions of the tokens (int64), strictly increasing along each row, shape
        ``(N, n)``; ``None`` (the default) means consecutive windows ``0 … n-1``.
    span : int, optional
        Every corpus position lies in ``[0, span)``; ``None`` means ``n``.

    Shapes
    ------
    ``inputs (N, n)``, ``targets (N, n)``, ``positions (N, n)`` or ``None``.

    Examples
    --------
    >>> from attnlab.data.tasks import shift_task
    >>> task = shift_task(4, n=6, vocab=5, offset=2, seed=0)
    >>> task.inputs.shape, task.n, task.vocab_in, task.vocab_out
    ((4, 6), 6, 5, 5)
    """

    name: str
    inputs: np.ndarray
    targets: np.ndarray
    vocab_in: int
    vocab_out: int
    positions: np.ndarray | None = None
    span: int | None = None

    @property
    def n(self) -> int:
        """The sequence length."""
        return int(self.inputs.shape[1])

    @property
    def corpus_span(self) -> int:
        """Number of corpus positions the tokens may come from (``span``, else ``n``)."""
        return self.n if self.span is None else int(self.span)

    def corpus_positions(self) -> np.ndarray:
        """Corpus positions ``(N, n)``: the stored ones, or ``0 … n-1`` in every row."""
        if self.positions is not None:
            return self.positions
        return np.broadcast_to(np.arange(self.n, dtype=np.int64), self.inputs.shape)

    def __len__(self) -> int:
        return int(self.inputs.shape[0])


def _check_positive(**values: int) -> None:
    for name, value in values.items():
        if int(value) != value or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {name}={value!r}")


def shift_task(num: int, n: int = 16, vocab: int = 10, offset: int = 3, seed: int = 0) -> TokenTask:
    """Copy with an offset: label ``y_i = x_{i - offset}``; the first ``offset`` are unlabelled.

    Parameters
    ----------
    num : int
        Number of examples ``N``.
    n : int
        Sequence length.
    vocab : int
        Tokens are drawn uniformly from ``0 .. vocab-1``; labels use the same ids.
    offset : int
        How far back the answer sits, ``1 <= offset < n``.
    seed : int
        Seed of the generator.

    Returns
    -------
    TokenTask
        ``vocab_in = vocab_out = vocab``.

    Shapes
    ------
    ``→ inputs (num, n)``, ``targets (num, n)``.

    Raises
    ------
    ValueError
        If a size is not positive or ``offset`` is not in ``[1, n)``.

    Examples
    --------
    >>> from attnlab.data.tasks import shift_task
    >>> task = shift_task(1, n=6, vocab=10, offset=2, seed=3)
    >>> task.inputs[0, :4].tolist() == task.targets[0, 2:].tolist()
    True
    >>> task.targets[0, :2].tolist()
    [-100, -100]
    """
    _check_positive(num=num, n=n, vocab=vocab, offset=offset)
    if offset >= n:
        raise ValueError(f"offset must be smaller than the length n={n}, got offset={offset}")
    rng = np.random.default_rng(seed)
    inputs = rng.integers(0, vocab, size=(num, n), dtype=np.int64)
    targets = np.full((num, n), IGNORE, dtype=np.int64)
    targets[:, offset:] = inputs[:, :-offset]
    return TokenTask("shift", inputs, targets, vocab, vocab)


def reverse_task(num: int, n: int = 16, vocab: int = 10, seed: int = 0) -> TokenTask:
    """Reversal: label ``y_i = x_{n-1-i}`` at every position.

    Parameters
    ----------
    num : int
        Number of examples ``N``.
    n : int
        Sequence length.
    vocab : int
        Tokens are drawn uniformly from ``0 .. vocab-1``; labels use the same ids.
    seed : int
        Seed of the generator.

    Returns
    -------
    TokenTask
        ``vocab_in = vocab_out = vocab``.

    Shapes
    ------
    ``→ inputs (num, n)``, ``targets (num, n)``.

    Raises
    ------
    ValueError
        If a size is not positive.

    Examples
    --------
    >>> from attnlab.data.tasks import reverse_task
    >>> task = reverse_task(1, n=5, seed=1)
    >>> task.targets[0].tolist() == task.inputs[0, ::-1].tolist()
    True
    """
    _check_positive(num=num, n=n, vocab=vocab)
    rng = np.random.default_rng(seed)
    inputs = rng.integers(0, vocab, size=(num, n), dtype=np.int64)
    targets = inputs[:, ::-1].copy()
    return TokenTask("reverse", inputs, targets, vocab, vocab)


def recall_task(
    num: int,
    n_pairs: int = 8,
    n_queries: int = 8,
    n_keys: int = 16,
    n_values: int = 8,
    seed: int = 0,
) -> TokenTask:
    """Associative recall: ``n_pairs`` key–value tokens, then ``n_queries`` queries.

    A pair is a single input token ``key * n_values + value`` (ids ``0 .. n_keys*n_values-1``);
    the keys of one sequence are distinct. A query is the token ``n_keys*n_values + key`` for a
    key that occurs in the sequence (drawn with replacement); its label is that key's value.
    The pairs carry no label. The sequence length is ``n = n_pairs + n_queries``.

    Parameters
    ----------
    num : int
        Number of examples ``N``.
    n_pairs : int
        Key–value tokens per sequence, at most ``n_keys``.
    n_queries : int
        Query tokens per sequence.
    n_keys, n_values : int
        Sizes of the key and value alphabets.
    seed : int
        Seed of the generator.

    Returns
    -------
    TokenTask
        ``vocab_in = n_keys * (n_values + 1)``, ``vocab_out = n_values``.

    Shapes
    ------
    ``→ inputs (num, n_pairs + n_queries)``, ``targets`` likewise.

    Raises
    ------
    ValueError
        If a size is not positive or ``n_pairs > n_keys``.

    Examples
    --------
    >>> from attnlab.data.tasks import recall_task
    >>> task = recall_task(1, n_pairs=3, n_queries=2, n_keys=4, n_values=5, seed=0)
    >>> pairs, queries = task.inputs[0, :3], task.inputs[0, 3:]
    >>> table = {int(p) // 5: int(p) % 5 for p in pairs}     # key -> value
    >>> [table[int(q) - 20] for q in queries] == task.targets[0, 3:].tolist()
    True
    """
    _check_positive(num=num, n_pairs=n_pairs, n_queries=n_queries, n_keys=n_keys, n_values=n_values)
    if n_pairs > n_keys:
        raise ValueError(
            f"the keys of a sequence are distinct, so n_pairs={n_pairs} needs "
            f"n_keys >= n_pairs, got n_keys={n_keys}"
        )
    rng = np.random.default_rng(seed)
    keys = np.argsort(rng.random((num, n_keys)), axis=1)[:, :n_pairs]  # distinct per row
    values = rng.integers(0, n_values, size=(num, n_pairs))
    which = rng.integers(0, n_pairs, size=(num, n_queries))  # which pair each query asks for
    rows = np.arange(num)[:, None]
    query_keys, answers = keys[rows, which], values[rows, which]
    inputs = np.concatenate([keys * n_values + values, n_keys * n_values + query_keys], axis=1)
    targets = np.concatenate([np.full((num, n_pairs), IGNORE), answers], axis=1)
    return TokenTask(
        "recall",
        inputs.astype(np.int64),
        targets.astype(np.int64),
        n_keys * (n_values + 1),
        n_values,
    )


def gapped_shift_task(
    num: int, n: int = 16, span: int = 32, vocab: int = 10, distance: int = 3, seed: int = 0
) -> TokenTask:
    """Copy at a corpus distance, on gapped windows of a longer corpus.

    Each example reads ``n`` tokens from ``n`` distinct corpus positions drawn uniformly from
    ``0 … span-1`` and sorted (so the gaps between neighbours vary from example to example);
    tokens are uniform in ``0 … vocab-1``. The label at slot ``i`` is the token of the slot
    ``j`` whose corpus position is ``positions[i] - distance``; when no slot was read there,
    the slot is unlabelled (:data:`IGNORE`). The answer's *slot* distance ``i - j`` varies,
    its *corpus* distance is always ``distance``.

    Parameters
    ----------
    num : int
        Number of examples ``N``.
    n : int
        Tokens per example (slots).
    span : int
        Corpus positions to draw from, ``span >= n`` (``span == n``: consecutive windows,
        the plain :func:`shift_task`).
    vocab : int
        Token alphabet; labels use the same ids.
    distance : int
        Corpus distance of the answer, ``1 <= distance < span``.
    seed : int
        Seed of the generator.

    Returns
    -------
    TokenTask
        Named ``"gapped"``, with ``positions`` and ``span`` set.

    Shapes
    ------
    ``→ inputs (num, n)``, ``targets (num, n)``, ``positions (num, n)``.

    Raises
    ------
    ValueError
        If a size is not positive, ``span < n`` or ``distance`` is not in ``[1, span)``.

    Examples
    --------
    >>> from attnlab.data.tasks import gapped_shift_task
    >>> task = gapped_shift_task(1, n=5, span=9, distance=2, seed=0)
    >>> p, x, y = task.positions[0], task.inputs[0], task.targets[0]
    >>> p.tolist()
    [1, 2, 3, 6, 8]
    >>> [int(x[p.tolist().index(q - 2)]) if q - 2 in p else -100 for q in p] == y.tolist()
    True
    """
    _check_positive(num=num, n=n, span=span, vocab=vocab, distance=distance)
    if span < n:
        raise ValueError(f"span must be at least the length n={n}, got span={span}")
    if distance >= span:
        raise ValueError(f"distance must be smaller than span={span}, got distance={distance}")
    rng = np.random.default_rng(seed)
    positions = np.sort(np.argsort(rng.random((num, span)), axis=1)[:, :n], axis=1)
    inputs = rng.integers(0, vocab, size=(num, n), dtype=np.int64)
    # The slot read at corpus position q, or -1: a lookup table per example.
    slot_of = np.full((num, span), -1, dtype=np.int64)
    rows = np.arange(num)[:, None]
    slot_of[rows, positions] = np.arange(n)
    source = positions - distance
    j = np.where(source >= 0, slot_of[rows, np.maximum(source, 0)], -1)
    targets = np.where(j >= 0, inputs[rows, np.maximum(j, 0)], IGNORE).astype(np.int64)
    return TokenTask("gapped", inputs, targets, vocab, vocab, positions.astype(np.int64), span)


def gapped_far_task(num: int, n: int = 16, span: int = 32, seed: int = 0) -> TokenTask:
    """:func:`gapped_shift_task` with the answer 10 corpus positions back, named ``"gapped-far"``.

    Ten is beyond the clipping distance ``k_max = 8`` of the study's Shaw tables, which then
    see distances 8, 9, 10, … as one; GAM's ``r`` and learned absolute positions do not clip.

    Shapes
    ------
    ``→ inputs (num, n)``, ``targets (num, n)``, ``positions (num, n)``.

    Examples
    --------
    >>> from attnlab.data.tasks import gapped_far_task
    >>> task = gapped_far_task(2, seed=0)
    >>> task.name, task.inputs.shape, task.span
    ('gapped-far', (2, 16), 32)
    """
    task = gapped_shift_task(num, n=n, span=span, distance=10, seed=seed)
    return replace(task, name="gapped-far")


#: The tasks of the study by name; each takes ``(num, seed=...)`` and returns sequences of
#: length 16 with its default arguments.
TASKS = {
    "shift": shift_task,
    "recall": recall_task,
    "reverse": reverse_task,
    "gapped": gapped_shift_task,
    "gapped-far": gapped_far_task,
}


def make_task(name: str, num: int, seed: int = 0, **kwargs: int) -> TokenTask:
    """Generate ``num`` examples of the task ``name`` (a key of :data:`TASKS`).

    Keyword arguments go to the generator (for example ``n=32`` for a longer
    :func:`shift_task`); without them every task has length 16.

    Examples
    --------
    >>> from attnlab.data.tasks import make_task
    >>> make_task("recall", 3, seed=1).inputs.shape
    (3, 16)
    >>> make_task("shift", 2, seed=1, n=32).inputs.shape
    (2, 32)
    """
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; choose one of {', '.join(TASKS)}")
    return TASKS[name](num, seed=seed, **kwargs)
