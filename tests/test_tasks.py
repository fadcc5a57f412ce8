"""Tests of attnlab.data.tasks: every label is recomputed from the inputs by a plain loop."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.data.tasks import (
    IGNORE,
    TASKS,
    TokenTask,
    gapped_far_task,
    gapped_shift_task,
    make_task,
    recall_task,
    reverse_task,
    shift_task,
)


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(2, 12),
    vocab=st.integers(1, 20),
    data=st.data(),
    seed=st.integers(0, 2**16),
)
def test_shift_labels_match_a_loop(n, vocab, data, seed):
    offset = data.draw(st.integers(1, n - 1))
    task = shift_task(5, n=n, vocab=vocab, offset=offset, seed=seed)
    for x, y in zip(task.inputs, task.targets, strict=True):
        for i in range(n):
            expected = x[i - offset] if i >= offset else IGNORE
            assert y[i] == expected
    assert task.inputs.min() >= 0 and task.inputs.max() < vocab


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 12), vocab=st.integers(1, 20), seed=st.integers(0, 2**16))
def test_reverse_labels_match_a_loop(n, vocab, seed):
    task = reverse_task(4, n=n, vocab=vocab, seed=seed)
    for x, y in zip(task.inputs, task.targets, strict=True):
        assert [int(y[i]) for i in range(n)] == [int(x[n - 1 - i]) for i in range(n)]


@settings(max_examples=25, deadline=None)
@given(
    n_pairs=st.integers(1, 6),
    n_queries=st.integers(1, 6),
    extra_keys=st.integers(0, 4),
    n_values=st.integers(1, 6),
    seed=st.integers(0, 2**16),
)
def test_recall_labels_answer_every_query(n_pairs, n_queries, extra_keys, n_values, seed):
    n_keys = n_pairs + extra_keys
    task = recall_task(6, n_pairs, n_queries, n_keys, n_values, seed=seed)
    assert task.vocab_in == n_keys * (n_values + 1) and task.vocab_out == n_values
    for x, y in zip(task.inputs, task.targets, strict=True):
        table = {}
        for token in x[:n_pairs]:
            assert 0 <= token < n_keys * n_values
            key, value = divmod(int(token), n_values)
            assert key not in table, "keys of one sequence must be distinct"
            table[key] = value
        assert (y[:n_pairs] == IGNORE).all()
        for token, label in zip(x[n_pairs:], y[n_pairs:], strict=True):
            key = int(token) - n_keys * n_values
            assert key in table
            assert label == table[key]


@pytest.mark.parametrize("name", list(TASKS))
def test_seeded_and_fixed_length(name):
    a, b, c = make_task(name, 50, seed=7), make_task(name, 50, seed=7), make_task(name, 50, seed=8)
    assert np.array_equal(a.inputs, b.inputs) and np.array_equal(a.targets, b.targets)
    assert not np.array_equal(a.inputs, c.inputs)
    assert a.inputs.shape == a.targets.shape == (50, 16)
    assert a.inputs.dtype == a.targets.dtype == np.int64
    labelled = a.targets[a.targets != IGNORE]
    assert labelled.min() >= 0 and labelled.max() < a.vocab_out
    assert a.inputs.min() >= 0 and a.inputs.max() < a.vocab_in


def test_recall_uses_the_whole_value_alphabet():
    task = recall_task(400, seed=0)
    assert set(task.targets[task.targets != IGNORE].tolist()) == set(range(8))


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: shift_task(3, n=4, offset=4), "offset"),
        (lambda: shift_task(0), "num"),
        (lambda: reverse_task(3, n=0), "n"),
        (lambda: recall_task(3, n_pairs=5, n_keys=4), "n_keys"),
        (lambda: make_task("sort", 3), "unknown task"),
        (lambda: gapped_shift_task(3, n=8, span=7), "span"),
        (lambda: gapped_shift_task(3, n=4, span=6, distance=6), "distance"),
        (lambda: gapped_shift_task(3, distance=0), "distance"),
    ],
)
def test_bad_arguments_raise(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 10),
    extra=st.integers(0, 12),
    vocab=st.integers(1, 12),
    data=st.data(),
    seed=st.integers(0, 2**16),
)
def test_gapped_labels_sit_at_the_stated_corpus_distance(n, extra, vocab, data, seed):
    """Every label is recomputed by a loop over corpus positions, not over slots."""
    span = n + extra
    distance = data.draw(st.integers(1, max(1, span - 1))) if span > 1 else None
    if distance is None:
        return
    task = gapped_shift_task(6, n=n, span=span, vocab=vocab, distance=distance, seed=seed)
    assert task.positions.shape == task.inputs.shape == task.targets.shape == (6, n)
    assert task.span == span == task.corpus_span and task.name == "gapped"
    for p, x, y in zip(task.positions, task.inputs, task.targets, strict=True):
        assert 0 <= p.min() and p.max() < span and (np.diff(p) > 0).all()
        for i in range(n):
            sources = [j for j in range(n) if p[i] - p[j] == distance]  # corpus distance
            assert y[i] == (x[sources[0]] if sources else IGNORE)


def test_gapped_slot_distance_is_not_the_corpus_distance():
    """The answer's slot distance varies (a slot offset cannot solve the task); seeded."""
    task = gapped_shift_task(500, seed=3)
    same = gapped_shift_task(500, seed=3)
    assert np.array_equal(task.positions, same.positions)
    assert np.array_equal(task.targets, same.targets)
    assert not np.array_equal(task.positions, gapped_shift_task(500, seed=4).positions)
    slot_gaps = []
    for p, y in zip(task.positions, task.targets, strict=True):
        for i in np.flatnonzero(y != IGNORE):
            (j,) = np.flatnonzero(p == p[i] - 3)
            slot_gaps.append(i - j)
    counts = np.bincount(slot_gaps)
    assert set(np.flatnonzero(counts)) == {1, 2, 3}  # 1 to 3 slots back, never more
    assert counts.max() < 0.6 * len(slot_gaps)  # no slot offset holds most answers
    assert 0.3 < (task.targets != IGNORE).mean() < 0.6  # about (n-1)/(span-1) labelled


def test_span_equal_to_n_is_the_plain_shift():
    gapped = gapped_shift_task(20, n=8, span=8, distance=2, seed=0)
    assert (gapped.positions == np.arange(8)).all()
    x, y = gapped.inputs, gapped.targets
    assert (y[:, :2] == IGNORE).all() and np.array_equal(y[:, 2:], x[:, :-2])


def test_gapped_far_is_the_gapped_task_at_distance_ten():
    far, plain = gapped_far_task(50, seed=2), gapped_shift_task(50, distance=10, seed=2)
    assert far.name == "gapped-far" and np.array_equal(far.targets, plain.targets)
    assert np.array_equal(far.positions, plain.positions) and make_task("gapped-far", 3).n == 16


def test_token_task_defaults_to_consecutive_positions():
    task = TokenTask("t", np.zeros((2, 4), np.int64), np.zeros((2, 4), np.int64), 1, 1)
    assert task.positions is None and task.corpus_span == 4
    assert task.corpus_positions().tolist() == [[0, 1, 2, 3]] * 2
