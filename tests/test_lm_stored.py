"""The stored run of chapter 11 (package data) and its recorded baselines."""

from __future__ import annotations

import math

import pytest
import torch

from attnlab.lm.baselines import KneserNey, xz_bits_per_char
from attnlab.lm.corpus import load_corpus
from attnlab.lm.stored import load_stored, stored_log, stored_record
from attnlab.lm.training import bits_per_char

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def corpus():
    return load_corpus()


def test_the_record_matches_the_log_and_the_weights():
    record, log = stored_record(), stored_log()
    model = load_stored()
    assert model.num_parameters() == record["results"]["parameters"]
    assert len(log) == record["training"]["steps"]
    assert log[-1]["chars"] == record["results"]["chars_seen"]
    assert record["command"].startswith("python -m attnlab.lm train ")
    cfg = record["model"]
    for option, key in (("--width", "d"), ("--depth", "layers"), ("--context", "context"),
                        ("--positions", "positions"), ("--steps", None)):
        assert option in record["command"]
        if key:
            assert f"{option} {cfg[key]}" in record["command"]
    assert cfg["positions"] == "rotary"  # the language model uses RoPE (issue 23)


def test_the_stored_test_score_is_reproduced(corpus):
    got = bits_per_char(load_stored(), corpus.test)
    assert got == pytest.approx(stored_record()["results"]["test_bpc"], abs=2e-3)


def test_book_and_sdpa_paths_agree_on_the_stored_weights(corpus):
    ids = torch.from_numpy(corpus.test[:128])[None]
    with torch.no_grad():
        a = load_stored(attention="book")(ids)
        b = load_stored(attention="sdpa")(ids)
    torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def test_the_recorded_baselines_are_recomputed(corpus):
    base = stored_record()["baselines"]
    for order in (3, 5):
        lm = KneserNey(corpus.train, corpus.vocab.size, order)
        got = lm.bits_per_char(corpus.test, base[f"kn{order}"]["discount"])
        assert got == pytest.approx(base[f"kn{order}"]["test_bpc"], rel=1e-12)
    assert math.isfinite(base["xz"]["test_bpc"]) and base["xz"]["preset"] == 9


def test_the_recorded_xz_number_is_recomputed(corpus):
    """About 20 s: xz at preset 9 over 4.9 MB, twice."""
    got = xz_bits_per_char(corpus.texts["train"], corpus.texts["test"], preset=9)
    assert got == stored_record()["baselines"]["xz"]["test_bpc"]
