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

Nothing is downloaded; each generator returns the same arrays for the same arguments on every
machine (``numpy.random.default_rng(seed)``).
"""

from __future__ import annotations

from dataclasses import dataclass

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

    Shapes
    ------
    ``inputs (N, n)``, ``targets (N, n)``.

    Examples
    --------
    >>> from attnlab.tasks import shift_task
    >>> task = shift_task(4, n=6, vocab=5, offset=2, seed=0)
    >>> task.inputs.shape, task.n, task.vocab_in, task.vocab_out
    ((4, 6), 6, 5, 5)
    """

    name: str
    inputs: np.ndarray
    targets: np.ndarray
    vocab_in: int
    vocab_out: int

    @property
    def n(self) -> int:
        """The sequence length."""
        return int(self.inputs.shape[1])

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
    >>> from attnlab.tasks import shift_task
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
    >>> from attnlab.tasks import reverse_task
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
    >>> from attnlab.tasks import recall_task
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


#: The tasks of the study by name; each takes ``(num, seed=...)`` and returns sequences of
#: length 16 with its default arguments.
TASKS = {"shift": shift_task, "recall": recall_task, "reverse": reverse_task}


def make_task(name: str, num: int, seed: int = 0) -> TokenTask:
    """Generate ``num`` examples of the task ``name`` (a key of :data:`TASKS`) with defaults.

    Examples
    --------
    >>> from attnlab.tasks import make_task
    >>> make_task("recall", 3, seed=1).inputs.shape
    (3, 16)
    """
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; choose one of {', '.join(TASKS)}")
    return TASKS[name](num, seed=seed)
