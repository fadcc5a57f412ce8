"""Chapter 11's character-level language model: corpus, baselines, model, training, command.

``attnlab.lm`` itself imports numpy only (the corpus and the n-gram and xz baselines); the
torch parts live in :mod:`attnlab.lm.model` (the transformer), :mod:`attnlab.lm.blocks`
(norms, MLPs, causal attention) and :mod:`attnlab.lm.training`.
"""

from attnlab.lm.corpus import (
    BLOCK,
    PERIOD,
    UNK_ID,
    CharVocab,
    Corpus,
    load_corpus,
    load_text,
    read_text,
    split_blocks,
)

__all__ = [
    "BLOCK",
    "PERIOD",
    "UNK_ID",
    "CharVocab",
    "Corpus",
    "load_corpus",
    "load_text",
    "read_text",
    "split_blocks",
]
