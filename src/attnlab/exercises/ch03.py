"""Checks for the exercises of chapter 03 (self-attention).

Every check includes the cases that separate a partly right answer from a right one (a square
mask from a rectangular one, length 0 and the full length, the smallest and the largest size,
``d_k`` different from ``d``), not only random draws.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from attnlab.course.spec import Case, ExerciseFailure, as_array, exercise, expect_close, mask_equal
from attnlab.exercises.ch02 import SDPA_FORBID, _finite_then_close

#: Sizes every mask check covers: the two smallest, then every size up to the largest drawn.
_SIZES = range(1, 13)


def _causal(s_q: int, s_k: int, offset: int | None = None) -> np.ndarray:
    """Query ``i`` sits at position ``s_k - s_q + i`` and sees keys up to there (loops)."""
    shift = s_k - s_q if offset is None else offset
    out = np.zeros((s_q, s_k), dtype=bool)
    for i in range(s_q):
        for j in range(s_k):
            out[i, j] = j <= i + shift
    return out


@exercise(
    "03.2", answer="causal_mask", forbid=(__name__,),
    passed="correct for every square size 1..12 and for fewer queries than keys (s_k up to 12)",
)
def _causal_mask(rng: np.random.Generator) -> Iterator[Case]:
    """``causal_mask(s_q, s_k)``: the ``s_q`` queries are the last of ``s_k`` positions."""
    pairs = [(s, s) for s in _SIZES]  # square, every size (a size-limited answer fails)
    pairs += [(1, int(s_k)) for s_k in (2, 5, 12)]  # one new token: it sees every key
    pairs += [(int(s_q), 12) for s_q in (2, 7, 11)]  # the largest cache
    for _ in range(6):
        s_k = int(rng.integers(2, 13))
        pairs.append((int(rng.integers(1, s_k)), s_k))
    for s_q, s_k in pairs:
        hints = {
            "your mask puts query i at position i (top-left, like torch's is_causal for "
            "s_q != s_k); the queries are the last s_q positions, so query i sees keys "
            "j <= i + s_k - s_q": _causal(s_q, s_k, 0),
            "True above the diagonal: query i (row) may attend to keys at or before its own "
            "position (np.tril, not np.triu)": ~_causal(s_q, s_k, s_k - s_q - 1),
            "the diagonal must be True: a query may attend to its own token": _causal(
                s_q, s_k, s_k - s_q - 1
            ),
        }
        expected = _causal(s_q, s_k)  # a hint equal to it (square: one alignment) is no hint
        yield Case((s_q, s_k), expected, on=f"s_q={s_q}, s_k={s_k}", judge=mask_equal,
                   hints={k: v for k, v in hints.items() if not np.array_equal(v, expected)})


def _left_padding(lengths: np.ndarray, s: int) -> np.ndarray:
    out = np.zeros((len(lengths), 1, s), dtype=bool)
    for b, length in enumerate(lengths):  # loops: independent of any vectorised answer
        for j in range(s):
            out[b, 0, j] = j >= s - length
    return out


@exercise(
    "03.3", answer="left_padding_mask", forbid=(__name__,),
    passed="correct (shape (b, 1, s); lengths 0 and s in every batch) on 14 batches",
)
def _left_padding_mask(rng: np.random.Generator) -> Iterator[Case]:
    """``left_padding_mask(lengths, s)``: item ``b``'s tokens are its last ``lengths[b]``."""
    # First a batch that tells every mistake below apart, then the smallest and the largest.
    batches = [(np.array([3, 0, 1]), 3), (np.array([0]), 1), (np.array([1]), 1),
               (np.array([12, 0, 5, 11]), 12)]
    for _ in range(10):
        s = int(rng.integers(1, 13))
        lengths = rng.integers(0, s + 1, size=int(rng.integers(1, 5)))
        lengths[0], lengths[-1] = 0, s  # a batch always holds an empty and a full item
        batches.append((lengths, s))
    for lengths, s in batches:
        right = (np.arange(s)[None, :] < lengths[:, None])[:, None, :]
        hints = {  # in order: the first that matches names the mistake
            "True marks the first lengths[b] keys: that is right padding; with left padding "
            "the real tokens are the last lengths[b]": right,
            "off by one: key s - lengths[b] is the first real token, use >=, not >": (
                np.arange(s)[None, :] > (s - lengths)[:, None]
            )[:, None, :],
            "an item of length 0 has no real token, and your mask lets it see every key "
            "(x[-0:] is the whole array)": _left_padding(np.where(lengths == 0, s, lengths), s),
            "True marks the padding here; True must mean 'may attend' (the real tokens)": (
                ~_left_padding(lengths, s)
            ),
        }
        yield Case((lengths, s), _left_padding(lengths, s), on=f"lengths={lengths.tolist()}, s={s}",
                   judge=mask_equal, hints={k: v for k, v in hints.items()
                                            if not np.array_equal(v, _left_padding(lengths, s))})


def _factor_judge(got, case: Case) -> None:
    d, d_k = case.private
    if not isinstance(got, tuple) or len(got) != 2:
        kind = "a tuple of " + str(len(got)) if isinstance(got, tuple) else "an array"
        raise ExerciseFailure(f"on {case.on}: return a pair (W_Q, W_K), got {kind}")
    w_q, w_k = (as_array(m, case.on) for m in got)
    for name, m in [("W_Q", w_q), ("W_K", w_k)]:
        if m.shape != (d, d_k):
            raise ExerciseFailure(f"on {case.on}: {name} must have shape {(d, d_k)}, got {m.shape}")
        if not np.all(np.isfinite(m)):
            raise ExerciseFailure(f"on {case.on}: {name} holds NaN or inf (a division by a "
                                  "singular value that is 0 when the rank is below d_k?)")
    expect_close(w_q @ w_k.T, case.expected, on=f"{case.on}, the product W_Q W_K^T", atol=1e-8)


@exercise(
    "03.4", answer="factorise", forbid=(__name__,),
    passed="W_Q W_K^T reproduces W_QK (ranks 0..d_k, shapes (d, d_k)) on 10 random matrices "
    "and 5 fixed ones (d_k = 1, d_k = d, W_QK = 0)",
)
def _factorise(rng: np.random.Generator) -> Iterator[Case]:
    """``factorise(W_QK, d_k)``: ``(W_Q, W_K)``, each ``(d, d_k)``, with ``W_Q @ W_K.T == W_QK``."""
    # The boundaries first: d_k = 1, d_k = d (full rank), W_QK = 0, rank below d_k.
    fixed = [(2, 1, 1), (5, 5, 5), (4, 2, 0), (6, 3, 1), (8, 8, 3)]  # (d, d_k, rank)
    for case in range(len(fixed) + 10):
        if case < len(fixed):
            d, d_k, rank = fixed[case]
        else:
            d = int(rng.integers(2, 9))
            d_k = int(rng.integers(1, d + 1))
            rank = int(rng.integers(0, d_k + 1))  # rank 0 (W_QK = 0) and rank < d_k included
        a = rng.normal(size=(d, rank)) @ rng.normal(size=(rank, d))
        yield Case(
            (a, d_k),
            a,
            on=f"case {case}: d={d}, d_k={d_k}, rank W_QK={rank}",
            judge=_factor_judge,
            private=(d, d_k),
        )


# ---- 03.5: masked self-attention from raw weights --------------------------------------------
def _attend(x: np.ndarray, w_q, w_k, w_v, allowed: np.ndarray, scale: float) -> np.ndarray:
    """Float64 loops: each query's softmax over its allowed keys only; none allowed: zeros."""
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    out = np.zeros((x.shape[0], x.shape[1], w_v.shape[1]))
    for b in range(x.shape[0]):
        for i in range(x.shape[1]):
            keys = np.flatnonzero(allowed[b, i])
            if keys.size == 0:
                continue
            z = np.array([q[b, i] @ k[b, j] for j in keys]) * scale
            p = np.exp(z - z.max())
            out[b, i] = (p / p.sum()) @ v[b, keys]
    return out


def _filled(x, w_q, w_k, w_v, allowed, scale):
    """What filling masked logits with a large negative number gives (uniform empty rows)."""
    z = np.einsum("bik,bjk->bij", x @ w_q, x @ w_k) * scale
    z = np.where(allowed, z, -1e9)
    p = np.exp(z - z.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ (x @ w_v)


def _masks(lengths: np.ndarray, s: int) -> np.ndarray:
    return _causal(s, s)[None] & _left_padding(lengths, s)


#: Every attnlab function or module that computes (masked) attention, and torch's: 03.5 asks
#: for it, and any of them with zero position tables or default tiles is the answer.
ATTENTION_FORBID = (
    "attnlab.self_attention",
    "attnlab.multi_head_attention",
    "attnlab.gam_attention",
    "attnlab.shaw_attention",
    "attnlab.gam_relative_attention",
    "attnlab.positions.gam_relative.gam_position_weights",
    "attnlab.nn.masked_softmax",
    "attnlab.nn.ScaledDotProductAttention",
    "attnlab.nn.multihead.AttentionHead",
    "attnlab.nn.multihead.MultiHeadAttention",
    "attnlab.nn.grouped.grouped_query_attention",
    "attnlab.nn.tiled.tiled_attention",
    "attnlab.nn.gam_fused.gam_fused_heads",
    "attnlab.nn.gam.GeneralizedAttention",
    "attnlab.nn.luong_attention.LuongAttention",
    "attnlab.nn.positions.shaw.ShawRelativeAttention",
    "attnlab.nn.positions.gam_relative.GAMRelativeAttention",
    "attnlab.study.slots.SelfAttentionSlot",
    "attnlab.study.slots.LuongSelfAttention",
    "attnlab.study.slots.CorpusShawAttention",
    "attnlab.study.lm_slots.LearnedC1GAMRelative",
    "attnlab.study.models.Block",
    "torch.ops.aten._masked_softmax",
    *SDPA_FORBID,
)


@exercise(
    "03.5", answer="masked_self_attention", forbid=(*ATTENTION_FORBID, __name__),
    passed="matches a loop over queries on 12 left-padded causal batches, empty and full "
    "items, d_k = 1 and d_k != d included",
)
def _masked_self_attention(rng: np.random.Generator) -> Iterator[Case]:
    """``masked_self_attention(x, w_q, w_k, w_v, lengths)``: causal, left-padded batch."""
    sizes = [(1, 1, 2, 1, 1), (2, 4, 3, 1, 2), (3, 6, 5, 2, 3)]  # (b, s, d, d_k, d_v)
    for _ in range(9):
        s, d = int(rng.integers(2, 9)), int(rng.integers(2, 7))
        sizes.append((int(rng.integers(2, 5)), s, d, int(rng.integers(1, d)),
                      int(rng.integers(1, 5))))
    for b, s, d, d_k, d_v in sizes:
        x = rng.normal(size=(b, s, d))
        w_q, w_k = rng.normal(size=(d, d_k)), rng.normal(size=(d, d_k))
        w_v = rng.normal(size=(d, d_v))
        lengths = rng.integers(0, s + 1, size=b)
        lengths[0] = s  # one full item, and (when b > 1) one empty one
        if b > 1:
            lengths[-1] = 0
        if b > 2:  # and one partly padded: only there do left and right padding differ
            lengths[1] = rng.integers(1, s)
        allowed, scale = _masks(lengths, s), 1 / np.sqrt(d_k)
        args = (x, w_q, w_k, w_v)
        right_padded = _causal(s, s)[None] & (np.arange(s)[None, None, :] < lengths[:, None, None])
        hints = {
            "scale the logits by 1/sqrt(d_k), the key width, not 1/sqrt(d)": _attend(
                *args, allowed, 1 / np.sqrt(d)),
            "the logits need the scale 1/sqrt(d_k)": _attend(*args, allowed, 1.0),
            "a query that may attend to no key came out as a uniform average: filling masked "
            "logits with a large negative number leaves them all equal; that row must be "
            "zero": _filled(*args, allowed, scale),
            "your mask is right padding (the first lengths[b] tokens are real); here the "
            "batch is padded on the left": _attend(*args, right_padded, scale),
            "the padding mask must hide padded keys (columns), broadcast over the queries; "
            "yours hides queries (rows)": _attend(
                *args, _causal(s, s)[None] & _left_padding(lengths, s).transpose(0, 2, 1),
                scale),
            "the causal mask is missing: query i may see keys j <= i only": _attend(
                *args, np.broadcast_to(_left_padding(lengths, s), (b, s, s)), scale),
        }
        expected = _attend(*args, allowed, scale)
        on = f"b={b}, s={s}, d={d}, d_k={d_k}, d_v={d_v}, lengths={lengths.tolist()}"
        yield Case(
            (x, w_q, w_k, w_v, lengths), expected, on=on,
            hints={k: v for k, v in hints.items() if not np.allclose(v, expected)},
            judge=_finite_then_close,
            private=f"on {on}: your output has NaN. A query with no allowed key (a padding "
            "position) has every logit -inf, and a softmax written as exp(z - max) / sum "
            "divides 0 by 0 there; give that row the zero output it asks for",
        )
