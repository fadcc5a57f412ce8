"""The language-model pipeline on a second real corpus: Genesis in the King James Version.

``tests/data/kjv_genesis.txt.xz`` is made by ``scripts/make_kjv_excerpt.py`` from Debian's
``bible-kjv`` 4.38 (verse labels stripped). These tests run the loader, the interleaved split,
the training vocabulary and its rule for unseen characters, the Kneser–Ney baseline and a few
training steps of chapter 11's model on it: nothing in ``attnlab.lm`` may assume Shakespeare.
"""

from __future__ import annotations

import hashlib
import importlib.util
import lzma
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from test_lm_baselines import _naive_kn

from attnlab.lm import corpus as C
from attnlab.lm.baselines import KneserNey, tune_discount

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests/data/kjv_genesis.txt.xz"
BLOCK = 4096  # the excerpt is 3 blocks of 64 KiB; 49 blocks of 4 KiB give the rule room


def _script():
    path = ROOT / "scripts/make_kjv_excerpt.py"
    spec = importlib.util.spec_from_file_location("make_kjv_excerpt", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def text() -> str:
    return C.read_text(DATA)


def test_the_excerpt_has_the_recorded_sha256_and_no_verse_labels(text):
    script = _script()
    data = DATA.read_bytes()
    assert hashlib.sha256(data).hexdigest() == script.FILE_SHA256
    assert hashlib.sha256(text.encode("utf-8")).hexdigest() == script.TEXT_SHA256
    assert lzma.decompress(data).decode("utf-8") == text
    lines = text.split("\n")
    assert lines[-1] == "" and len(lines) - 1 == script.VERSES == 1533
    assert lines[0] == "In the beginning God created the heaven and the earth."
    assert lines[-2].startswith("So Joseph died, being an hundred and ten years old")
    # the labels (Ge1:1 …) would be free bits; Genesis itself prints no digit at all
    assert not re.search(r"[0-9]", text) and 100_000 < len(text) < 300_000


def test_the_label_stripping_rule_refuses_other_output():
    script = _script()
    good = "".join(f"Ge1:{i} verse {i}\n" for i in range(1, 1534))
    assert script.strip_labels(good).startswith("verse 1\nverse 2\n")
    with pytest.raises(ValueError, match="without a verse label"):
        script.strip_labels(good.replace("Ge1:7 ", "Ex1:7 "))
    with pytest.raises(ValueError, match="expected 1533 verses"):
        script.strip_labels("Ge1:1 only one\n")


@pytest.mark.skipif(shutil.which("bible") is None, reason="Debian's bible-kjv is not installed")
def test_the_script_rebuilds_the_same_bytes_from_bible_kjv():
    script = _script()
    assert script.compress(script.strip_labels(script.printed_text())) == DATA.read_bytes()


def test_read_text_unpacks_xz_and_normalises_line_ends(tmp_path, text):
    plain = tmp_path / "genesis.txt"
    plain.write_bytes(text[:500].replace("\n", "\r\n").encode("utf-8"))
    assert C.read_text(plain) == text[:500]
    assert C.read_text(str(DATA)) == text
    (tmp_path / "bad.xz").write_bytes(b"not xz")
    with pytest.raises(ValueError, match="not valid xz"):
        C.read_text(tmp_path / "bad.xz")
    (tmp_path / "latin1.txt").write_bytes("café".encode("latin-1"))
    with pytest.raises(ValueError, match="not UTF-8"):
        C.read_text(tmp_path / "latin1.txt")
    (tmp_path / "empty.txt").write_bytes(b"")
    with pytest.raises(ValueError, match="no text"):
        C.read_text(tmp_path / "empty.txt")
    with pytest.raises(TypeError, match="path"):
        C.read_text(3)
    with pytest.raises(FileNotFoundError):
        C.read_text(tmp_path / "missing.txt")
    with pytest.raises(ValueError, match="is a folder"):
        C.read_text(tmp_path)  # a careless --text pointing at the data folder


def test_the_interleaved_split_on_the_excerpt(text):
    n_blocks = math.ceil(len(text) / BLOCK)
    assert n_blocks == 49  # so blocks 18 and 38 are validation, 19 and 39 test

    def blocks(*indices):
        return "".join(text[i * BLOCK : (i + 1) * BLOCK] for i in indices)

    parts = C.split_blocks(text, block=BLOCK)
    assert parts["valid"] == blocks(18, 38) and parts["test"] == blocks(19, 39)
    train = [i for i in range(n_blocks) if i not in (18, 19, 38, 39)]
    assert parts["train"] == blocks(*train)
    # with the default 64 KiB blocks the excerpt is three blocks, all of them training
    default = C.split_blocks(text)
    assert default == {"train": text, "valid": "", "test": ""}


def test_the_vocabulary_comes_from_the_training_split(text):
    corpus = C.load_corpus(text, block=BLOCK)
    assert corpus.vocab.chars == "".join(sorted(set(corpus.texts["train"])))
    assert corpus.vocab.size == len(set(corpus.texts["train"])) + 1
    for split in ("train", "valid", "test"):
        ids = getattr(corpus, split)
        assert corpus.vocab.decode(ids) == corpus.texts[split]  # nothing unseen here
        assert C.UNK_ID not in ids


def test_a_character_never_seen_in_training_becomes_unk(text):
    # blocks of 2,048 and a period of 5: both "!" and all six parentheses of Genesis fall
    # in held-out blocks
    corpus = C.load_corpus(text, block=2048, period=5)
    unseen = set(corpus.texts["valid"] + corpus.texts["test"]) - set(corpus.texts["train"])
    assert unseen == {"!", "(", ")"}
    for split in ("valid", "test"):
        chars = np.array(list(corpus.texts[split]))
        ids = getattr(corpus, split)
        np.testing.assert_array_equal(ids == C.UNK_ID, np.isin(chars, sorted(unseen)))
        assert corpus.vocab.decode(ids) == "".join(
            C.UNK_CHAR if c in unseen else c for c in corpus.texts[split]
        )
    # and across corpora: Shakespeare's digits and brackets are unknown to Genesis
    verse = "[Enter HAMLET.] 1601"
    ids = corpus.vocab.encode(verse)
    want = [c not in corpus.vocab.chars for c in verse]
    np.testing.assert_array_equal(ids == C.UNK_ID, want)
    assert sum(want) == 6  # [ ] 1 6 0 1


def test_the_kneser_ney_baseline_on_the_excerpt(text):
    corpus = C.load_corpus(text, block=BLOCK)
    V = corpus.vocab.size
    tri = KneserNey(corpus.train, V, 3)
    d, valid_bpc = tune_discount(tri, corpus.valid)
    test_bpc = tri.bits_per_char(corpus.test, d)
    freq = np.bincount(corpus.train, minlength=V) / len(corpus.train)
    unigram = float(-np.log2(freq[corpus.test[1:]]).mean())
    assert test_bpc < unigram - 1.0 < math.log2(V)  # two characters of context help a lot
    p = tri.probabilities(corpus.test[:40].reshape(20, 2), d)
    np.testing.assert_allclose(p.sum(1), 1.0, rtol=1e-12)
    # against the textbook recursion, on a model of the first 20,000 training characters
    small_train = corpus.train[:20_000]
    small = KneserNey(small_train, V, 3)
    bits = small.bits(corpus.test[:13], discount=d)
    for t in range(1, 13, 3):
        ctx = tuple(int(i) for i in corpus.test[max(0, t - 2) : t])
        ctx = (V,) * (2 - len(ctx)) + ctx
        want = -math.log2(_naive_kn(small_train.tolist(), V, 3, d, ctx, int(corpus.test[t])))
        assert bits[t - 1] == pytest.approx(want, rel=1e-12)


def test_a_few_training_steps_of_the_model_on_the_excerpt(text, one_torch_thread):
    import torch

    from attnlab.lm.model import CharTransformer, LMConfig
    from attnlab.lm.training import bits_per_char, train_lm

    corpus = C.load_corpus(text, block=BLOCK)
    V = corpus.vocab.size
    config = LMConfig(V, d=32, layers=2, heads=4, context=64, positions="rotary")
    torch.manual_seed(0)
    model = CharTransformer(config)
    log = train_lm(model, corpus.train, steps=60, batch=16, lr=1e-2, warmup=10, seed=0,
                   valid_ids=corpus.valid, progress=False)  # fmt: skip
    assert log[0]["train_bpc"] == pytest.approx(math.log2(V), abs=0.1)  # starts uniform
    freq = np.bincount(corpus.train, minlength=V) / len(corpus.train)
    unigram = float(-np.log2(freq[corpus.valid[1:]]).mean())
    assert log[-1]["valid_bpc"] == pytest.approx(bits_per_char(model, corpus.valid[:32_768]))
    assert log[-1]["valid_bpc"] < unigram  # it already uses some context
