"""Tests of attnlab.data: the seeded task generators and the padding/batching helpers."""

from __future__ import annotations

import datetime

import numpy as np
import pytest

from attnlab.data import (
    DATE_FORMATS,
    PAD_ID,
    Vocab,
    batch_indices,
    date_task,
    format_date,
    pad_sequences,
)

MONTH_NUMBER = {
    name: i + 1
    for i, name in enumerate(
        "january february march april may june july august september october november "
        "december".split()
    )
}


def parse_source(text: str) -> datetime.date:
    """An independent reader of the five source formats (no strptime: locale-free)."""
    words = text.replace(",", "").split()
    if "/" in text:
        day, month, year = (int(x) for x in text.split("/"))
        return datetime.date(year, month, day)
    if words[0].isdigit() and len(words[0]) == 4:  # yyyy mon dd
        return datetime.date(int(words[0]), MONTH_NUMBER_BY_PREFIX[words[1]], int(words[2]))
    if words[0].isdigit():  # d mon yyyy / d month yyyy
        return datetime.date(int(words[2]), MONTH_NUMBER_BY_PREFIX[words[1][:3]], int(words[0]))
    return datetime.date(int(words[2]), MONTH_NUMBER_BY_PREFIX[words[0]], int(words[1]))


MONTH_NUMBER_BY_PREFIX = {name[:3]: number for name, number in MONTH_NUMBER.items()}


def test_every_target_is_the_iso_form_of_its_source():
    task = date_task(500, seed=3)
    for src, tgt in zip(task.src_text, task.tgt_text, strict=True):
        assert parse_source(src).isoformat() == tgt
        assert 1950 <= int(tgt[:4]) <= 2049


def test_all_formats_appear_and_months_are_english():
    task = date_task(400, seed=0)
    assert any("/" in s for s in task.src_text)
    assert any("," in s for s in task.src_text)
    assert any(s[:4].isdigit() for s in task.src_text)
    assert any(any(m in s for m in ("september", "february", "november")) for s in task.src_text)
    day = datetime.date(2019, 12, 25)
    assert [format_date(day, f) for f in DATE_FORMATS] == [
        "25 dec 2019",
        "25 december 2019",
        "dec 25, 2019",
        "25/12/2019",
        "2019 dec 25",
    ]


def test_arrays_encode_the_texts_with_padding():
    task = date_task(50, seed=1)
    assert task.src.shape == (50, task.src_lengths.max()) and task.tgt.shape == (50, 10)
    assert task.src.dtype == np.int64
    for row in range(50):
        length = task.src_lengths[row]
        assert length == len(task.src_text[row])
        assert task.src_vocab.decode(task.src[row]) == task.src_text[row]
        assert np.all(task.src[row, length:] == PAD_ID) and np.all(task.src[row, :length] > 1)
        assert task.tgt_vocab.decode(task.tgt[row]) == task.tgt_text[row]


def test_seeded_and_vocabularies_shared():
    a, b, c = date_task(30, seed=7), date_task(30, seed=7), date_task(30, seed=8)
    assert a.src_text == b.src_text and np.array_equal(a.src, b.src)
    assert a.src_text != c.src_text
    assert a.src_vocab == c.src_vocab and a.tgt_vocab == date_task(1, seed=99).tgt_vocab


def test_split_and_subset():
    task = date_task(20, seed=2)
    train, test = task.split(5)
    assert len(train) == 15 and len(test) == 5
    assert train.src_text + test.src_text == task.src_text
    assert np.array_equal(test.tgt, task.tgt[15:])
    with pytest.raises(ValueError, match="n_test"):
        task.split(20)


def test_vocab_round_trip_and_unknown_characters():
    vocab = Vocab.from_text(["hello world"])
    assert vocab.tokens[:2] == ("<pad>", "<bos>") and len(vocab) == 2 + len(set("hello world"))
    assert vocab.decode([1, *vocab.encode("low"), 0, 0]) == "low"
    with pytest.raises(ValueError, match=r"\['a', 'y', 'z'\]"):
        vocab.encode("lazy")


def test_pad_sequences_and_batches():
    padded, lengths = pad_sequences([[3, 4], [5], [6, 7, 8]], length=4)
    assert padded.tolist() == [[3, 4, 0, 0], [5, 0, 0, 0], [6, 7, 8, 0]]
    assert lengths.tolist() == [2, 1, 3]
    with pytest.raises(ValueError, match="length 3 > the padded length 2"):
        pad_sequences([[1, 2, 3]], length=2)
    with pytest.raises(ValueError, match="at least one"):
        pad_sequences([])
    batches = list(batch_indices(10, 4, seed=0))
    assert [len(b) for b in batches] == [4, 4, 2]
    assert sorted(np.concatenate(batches).tolist()) == list(range(10))
    assert [b.tolist() for b in batch_indices(10, 4, seed=0)] == [b.tolist() for b in batches]
    with pytest.raises(ValueError, match="batch_size=0"):
        list(batch_indices(3, 0))


def test_bad_task_arguments():
    with pytest.raises(ValueError, match="n must be positive"):
        date_task(0)
    with pytest.raises(ValueError, match="yyyy-mm-dd"):
        date_task(3, formats=["yyyy-mm-dd"])
    with pytest.raises(ValueError, match=r"\(2000, 1990\)"):
        date_task(3, years=(2000, 1990))


def test_lookup_task_has_exactly_one_partner_within_the_window():
    from attnlab.data import lookup_task

    x, y = lookup_task(600, s=8, n_keys=6, window=3, seed=5)
    assert x.shape == (600, 8, 7) and y.shape == (600,)
    keys = x[:, :, :6].argmax(axis=2)
    assert np.all(x[:, :, :6].sum(axis=2) == 1)  # one-hot keys
    seen = set()
    for e in range(600):
        partners = [p for p in range(1, 8) if keys[e, p] == keys[e, 0]]
        assert len(partners) == 1
        offset = partners[0] if partners[0] <= 4 else partners[0] - 8
        assert 1 <= abs(offset) <= 3 and y[e] == x[e, partners[0], -1]
        seen.add(offset)
    assert seen == {-3, -2, -1, 1, 2, 3}  # every candidate offset occurs
    again, _ = lookup_task(600, s=8, n_keys=6, window=3, seed=5)
    assert np.array_equal(again, x)


def test_lookup_task_best_linear_rule_leaves_five_sixths():
    """Chapter 01's closed form: any linear function of the window has error >= 5/6."""
    from attnlab.data import lookup_task

    x, y = lookup_task(6000, seed=1)
    x_test, y_test = lookup_task(6000, seed=2)
    cols = [j % 8 for j in range(-3, 4)]
    coef, *_ = np.linalg.lstsq(x[:, cols].reshape(6000, -1), y, rcond=None)
    error = np.mean((x_test[:, cols].reshape(6000, -1) @ coef - y_test) ** 2) / np.var(y_test)
    assert abs(error - 5 / 6) < 0.04


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"n": 0}, ValueError, "n must be positive"),
        ({"n": 3, "n_keys": 1}, ValueError, "n_keys"),
        ({"n": 3, "window": 0}, ValueError, "window"),
        ({"n": 3, "s": 6, "window": 3}, ValueError, "window"),
        ({"n": True}, TypeError, "n must be an integer"),
        ({"n": 3, "s": 8.0}, TypeError, "s must be an integer"),
    ],
)
def test_lookup_task_rejects_bad_arguments(kwargs, error, match):
    from attnlab.data import lookup_task

    with pytest.raises(error, match=match):
        lookup_task(**kwargs)
