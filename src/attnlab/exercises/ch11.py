"""Checks for the exercises of chapter 11 (a small language model)."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

from attnlab.course.spec import Case, ExerciseFailure, exercise, mask_equal
from attnlab.exercises._registry import register


@exercise(
    "11.1",
    passed="causal and key-padding masks combined, shape (b, n, n), on 12 random batches",
)
def _causal_padding_mask(rng: np.random.Generator) -> Iterator[Case]:
    """``causal_padding_mask(lengths, n)``: query ``i`` of item ``b`` may attend to key ``j``
    iff ``j <= i`` and ``j < lengths[b]``."""
    for case in range(12):
        n = int(rng.integers(1, 9))
        lengths = rng.integers(0, n + 1, size=int(rng.integers(1, 5)))
        i, j = np.arange(n)[:, None], np.arange(n)[None, :]
        causal = j <= i  # (n, n)
        padding = np.arange(n)[None, :] < lengths[:, None]  # (b, n) over the keys
        expected = causal[None] & padding[:, None, :]  # (b, n, n), written out
        b = len(lengths)
        hints = {
            "this is the causal mask alone: the padded keys (j >= lengths[b]) must be "
            "masked too": np.broadcast_to(causal, (b, n, n)),
            "this is the padding mask alone: query i must not see keys j > i": np.broadcast_to(
                padding[:, None, :], (b, n, n)
            ),
            "True must mean 'may attend' (the book's and F.scaled_dot_product_attention's "
            "convention), not 'masked'": ~expected,
            "the mask is transposed: rows are queries, columns keys (j <= i, not i <= j)": (
                expected.transpose(0, 2, 1)
            ),
            "key lengths[b] is already padding: use j < lengths[b], not <=": causal[None]
            & (np.arange(n)[None, :] <= lengths[:, None])[:, None, :],
        }
        yield Case(
            (lengths, n),
            expected,
            on=f"case {case}: lengths={lengths.tolist()}, n={n}",
            judge=mask_equal,
            hints=hints,
        )


@exercise("11.3", passed="perplexity = 2 ** bits per character, on 20 random values")
def _perplexity(rng: np.random.Generator) -> Iterator[Case]:
    """``perplexity(bpc)``: the perplexity per character of a model with ``bpc`` bits/char."""
    for case in range(20):
        bpc = float(rng.uniform(0.5, 7.0))
        expected = 2.0**bpc  # the geometric mean of 1/p over the characters
        hints = {
            "exp(bpc) is the perplexity of a loss in nats; bits need base 2": math.exp(bpc),
            "that is 2 ** (bpc · ln 2): bits are already base-2 logarithms": 2.0
            ** (bpc * math.log(2)),
        }
        yield Case((bpc,), expected, on=f"case {case}: bpc={bpc:.3f}", hints=hints)


def _unigram_bpc(train: np.ndarray, valid: np.ndarray, vocab_size: int) -> float:
    """Bits per character of add-one character frequencies: a model that ignores context."""
    counts = np.bincount(train, minlength=vocab_size) + 1.0
    p = counts / counts.sum()
    return float(-np.log2(p[valid[1:]]).mean())


@register("11.2")
def _trained_block(model) -> str:
    """A trained causal model: causal on random ids, and better than context-free frequencies
    on the first 8,192 validation characters of the packaged corpus."""
    import torch

    from attnlab.lm.corpus import load_corpus
    from attnlab.lm.training import bits_per_char

    config = getattr(model, "config", None)
    if config is None or not hasattr(config, "context") or not callable(model):
        raise ExerciseFailure("pass the trained CharTransformer (a model with .config.context)")
    corpus = load_corpus()
    n, v = config.context, corpus.vocab.size
    g = torch.Generator().manual_seed(11)
    ids = torch.randint(0, v, (2, n), generator=g)
    later = ids.clone()
    later[:, n // 2 :] = torch.randint(0, v, (2, n - n // 2), generator=g)
    model.eval()
    with torch.no_grad():
        a, b = model(ids), model(later)
    if tuple(a.shape) != (2, n, v):
        raise ExerciseFailure(f"logits must have shape (b, n, V) = {(2, n, v)}, got {a.shape}")
    if not torch.allclose(a[:, : n // 2], b[:, : n // 2], atol=1e-5):
        raise ExerciseFailure(
            "changing characters n//2 … n-1 changed the logits before them: the model reads "
            "the future (is the causal mask missing, or the wrong way round?)"
        )
    valid = corpus.valid[:8_192]
    ours = bits_per_char(model, valid)
    floor = _unigram_bpc(corpus.train, valid, v)
    if not ours < floor - 0.3:
        raise ExerciseFailure(
            f"{ours:.3f} bits per character on validation; character frequencies alone give "
            f"{floor:.3f}. Train longer (a few hundred steps) or check the learning rate"
        )
    return (
        f"causal, and {ours:.2f} bits per character on validation, below the "
        f"{floor:.2f} of context-free character frequencies"
    )
