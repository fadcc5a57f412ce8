"""The checks of chapter 11's exercises pass honest answers and name the usual mistakes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attnlab.course.check import run_spec
from attnlab.course.spec import get_spec
from attnlab.exercises import check, exercise_ids


def _verdict(exercise_id, answer):
    exercise_ids()
    return run_spec(get_spec(exercise_id), answer)


def _mask(lengths, n):
    out = np.zeros((len(lengths), n, n), dtype=bool)
    for b, length in enumerate(lengths):  # loops: an independent answer
        for i in range(n):
            for j in range(n):
                out[b, i, j] = j <= i and j < length
    return out


def test_causal_padding_mask():
    assert _verdict("11.1", _mask)[0]
    only_causal = lambda lengths, n: np.broadcast_to(  # noqa: E731
        np.tril(np.ones((n, n), bool)), (len(lengths), n, n)
    ).copy()
    ok, message = _verdict("11.1", only_causal)
    assert not ok and "padded keys" in message
    ok, message = _verdict("11.1", lambda lengths, n: ~_mask(lengths, n))
    # The cases are drawn afresh: where a row has no key left (lengths 0) the inverted mask is
    # the causal mask alone, and the check names that mistake instead; both are right.
    assert not ok and ("may attend" in message or "causal mask alone" in message)
    ok, message = _verdict("11.1", lambda lengths, n: _mask(lengths, n).transpose(0, 2, 1))
    assert not ok


def test_perplexity():
    assert _verdict("11.3", lambda bpc: 2.0**bpc)[0]
    ok, message = _verdict("11.3", math.exp)
    assert not ok and "nats" in message


def test_a_model_that_reads_the_future_fails_11_2(one_torch_thread, capsys):
    import torch

    from attnlab.lm.model import CharTransformer, LMConfig

    class Peeking(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = CharTransformer(LMConfig(vocab_size=85, d=16, layers=1, heads=2,
                                                  context=16))
            self.config = self.inner.config

        def forward(self, ids):
            out = self.inner(ids)
            return out + out.flip(1)  # position t now depends on n - 1 - t

    assert check("11.2", Peeking()) is False
    assert "reads the future" in capsys.readouterr().out
    untrained = CharTransformer(LMConfig(vocab_size=85, d=16, layers=1, heads=2, context=16))
    assert check("11.2", untrained) is False
    assert "frequencies alone" in capsys.readouterr().out


@pytest.mark.parametrize("bad", [None, 3])
def test_11_2_refuses_what_is_not_a_model(bad, capsys):
    assert check("11.2", bad) is False
    assert "CharTransformer" in capsys.readouterr().out
