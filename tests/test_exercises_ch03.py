"""Chapter 03's checks: honest answers pass, partly right ones fail with the mistake named.

Each wrong answer below is plausible and right on part of the inputs (a square mask, sizes up
to 5, items that are not empty, one head width); before the checks always held the cases
that separate it, some of them passed.
"""

from __future__ import annotations

import numpy as np
from _partly_right import always_fails as _always_fails
from _partly_right import refused_loophole as _refused
from _partly_right import seeds_passed as _seeds_passed
from _partly_right import verdict as _verdict


# ---- 03.2 ------------------------------------------------------------------------------------
def causal_mask(s_q, s_k):
    return np.tri(s_q, s_k, s_k - s_q, dtype=bool)


def test_03_2_an_honest_answer_passes():
    assert _verdict("03.2", causal_mask)[0]
    loops = lambda s_q, s_k: np.array(  # noqa: E731
        [[j <= i + s_k - s_q for j in range(s_k)] for i in range(s_q)], dtype=bool
    ).reshape(s_q, s_k)
    assert _verdict("03.2", loops)[0]


def test_03_2_an_answer_right_only_up_to_size_5_fails():
    table = np.tri(5, 5, dtype=bool)  # a hard-coded mask, cut to size: wrong past 5

    def small(s_q, s_k):
        out = np.ones((s_q, s_k), dtype=bool)
        out[: min(s_q, 5), : min(s_k, 5)] = table[5 - min(s_q, 5):, :min(s_k, 5)]
        return out if max(s_q, s_k) > 5 else causal_mask(s_q, s_k)

    _always_fails("03.2", small)


def test_03_2_the_square_mask_of_the_chapter_fails_and_is_named():
    _always_fails("03.2", lambda s_q, s_k: np.tril(np.ones((s_q, s_k), dtype=bool)), "top-left")


def test_03_2_upper_triangle_and_strict_diagonal_are_named():
    _always_fails("03.2", lambda s_q, s_k: ~np.tri(s_q, s_k, s_k - s_q - 1, dtype=bool),
                  "np.tril, not np.triu")
    _always_fails("03.2", lambda s_q, s_k: np.tri(s_q, s_k, s_k - s_q - 1, dtype=bool),
                  "diagonal must be True")


def test_03_2_an_integer_mask_fails():
    _always_fails("03.2", lambda s_q, s_k: causal_mask(s_q, s_k).astype(int), "boolean")


# ---- 03.3 ------------------------------------------------------------------------------------
def left_padding_mask(lengths, s):
    return (np.arange(s)[None, :] >= s - np.asarray(lengths)[:, None])[:, None, :]


def test_03_3_an_honest_answer_passes():
    assert _verdict("03.3", left_padding_mask)[0]


def test_03_3_negative_slicing_fails_on_an_empty_item():
    def sliced(lengths, s):
        out = np.zeros((len(lengths), 1, s), dtype=bool)
        for b, length in enumerate(lengths):
            out[b, 0, -length:] = True  # -0: is the whole row
        return out

    _always_fails("03.3", sliced, "length 0")


def test_03_3_right_padding_off_by_one_and_inversion_are_named():
    right = lambda lengths, s: (np.arange(s)[None, :] < lengths[:, None])[:, None, :]  # noqa: E731
    _always_fails("03.3", right, "right padding")
    off = lambda lengths, s: (np.arange(s)[None, :] > s - lengths[:, None])[:, None, :]  # noqa: E731
    _always_fails("03.3", off, "off by one")
    _always_fails("03.3", lambda lengths, s: ~left_padding_mask(lengths, s), "may attend")


def test_03_3_a_mask_without_the_query_axis_fails():
    _always_fails("03.3", lambda lengths, s: left_padding_mask(lengths, s)[:, 0], "shape")


# ---- 03.5 ------------------------------------------------------------------------------------
def _softmax_rows(z):
    top = z.max(-1, keepdims=True)
    e = np.exp(z - np.where(np.isneginf(top), 0.0, top))
    total = e.sum(-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def masked_self_attention(x, w_q, w_k, w_v, lengths, *, scale=None, fill=-np.inf, pad="left",
                          causal=True):
    b, s, _ = x.shape
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    scale = 1 / np.sqrt(w_q.shape[1]) if scale is None else scale
    keys = np.arange(s)[None, None, :]
    real = keys >= s - lengths[:, None, None] if pad == "left" else keys < lengths[:, None, None]
    allowed = real & (np.tri(s, dtype=bool) if causal else True)
    z = np.where(allowed, q @ k.transpose(0, 2, 1) * scale, fill)
    return _softmax_rows(z) @ v


def test_03_5_an_honest_answer_passes():
    assert _verdict("03.5", masked_self_attention)[0]


def test_03_5_calling_the_library_fails_and_says_so():
    from attnlab import self_attention

    def library(x, w_q, w_k, w_v, lengths):
        s = x.shape[1]
        mask = np.tri(s, dtype=bool) & left_padding_mask(lengths, s)
        return self_attention(x, w_q, w_k, w_v, mask=mask)[0]

    _always_fails("03.5", library, "attnlab.self_attention")

    def through_torch(x, w_q, w_k, w_v, lengths):
        import torch

        s = x.shape[1]
        mask = torch.from_numpy(np.tri(s, dtype=bool) & left_padding_mask(lengths, s))
        t = [torch.from_numpy(a) for a in (x @ w_q, x @ w_k, x @ w_v)]
        return torch.nn.functional.scaled_dot_product_attention(*t, attn_mask=mask).numpy()

    _always_fails("03.5", through_torch, "scaled_dot_product_attention")


def test_03_5_partly_right_answers_fail_with_the_mistake_named():
    d_scale = lambda x, *a: masked_self_attention(x, *a, scale=1 / np.sqrt(x.shape[-1]))  # noqa: E731
    _always_fails("03.5", d_scale, "not 1/sqrt(d)")
    _always_fails("03.5", lambda *a: masked_self_attention(*a, scale=1.0), "scale")
    _always_fails("03.5", lambda *a: masked_self_attention(*a, fill=-1e9), "uniform")
    _always_fails("03.5", lambda *a: masked_self_attention(*a, pad="right"), "right padding")
    _always_fails("03.5", lambda *a: masked_self_attention(*a, causal=False), "causal")


def test_03_5_every_draw_separates_left_from_right_padding():
    # Draw 1852 once held only full and empty items where right and left padding differ:
    # the right-padded answer passed it (CI, session 7). Every draw now has a partly padded item.
    from attnlab.course.spec import get_spec

    right = lambda *a: masked_self_attention(*a, pad="right")  # noqa: E731
    assert _seeds_passed("03.5", right, [1852, *range(40)]) == []
    for seed in range(40):
        cases = get_spec("03.5").cases(np.random.default_rng(seed))
        assert any(0 < n < case.args[0].shape[1] for case in cases for n in case.args[4])


# ---- 03.4 ------------------------------------------------------------------------------------
def test_03_4_factors_that_divide_by_the_singular_values_fail():
    def divided(w_qk, d_k):  # W_K = V / sigma: right only when the rank is exactly d_k
        u, sv, vt = np.linalg.svd(w_qk)
        with np.errstate(divide="ignore", invalid="ignore"):
            return u[:, :d_k] * sv[:d_k] ** 2, vt[:d_k].T / sv[:d_k]

    _always_fails("03.4", divided, "NaN or inf")


def test_03_4_an_honest_answer_passes():
    def factorise(w_qk, d_k):
        u, sv, vt = np.linalg.svd(w_qk)
        return u[:, :d_k] * sv[:d_k], vt[:d_k].T

    assert _verdict("03.4", factorise)[0]


def test_03_5_every_attention_function_of_the_library_is_unavailable():
    # s6-03: Shaw's attention with zero position tables, and the tiled kernel, passed
    import torch

    import attnlab
    from attnlab.nn.tiled import tiled_attention

    def mask_of(lengths, s):
        return np.tri(s, dtype=bool) & left_padding_mask(lengths, s)

    def shaw(x, w_q, w_k, w_v, lengths):
        m, d_k, d_v = mask_of(lengths, x.shape[1]), w_q.shape[1], w_v.shape[1]
        out = [attnlab.shaw_attention(x[i] @ w_q, x[i] @ w_k, x[i] @ w_v, np.zeros((1, d_k)),
                                      np.zeros((1, d_v)), mask=m[i])[0] for i in range(len(x))]
        return np.stack(out)

    _refused("03.5", shaw, "attnlab.shaw_attention")

    def tiled(x, w_q, w_k, w_v, lengths):
        m = torch.from_numpy(mask_of(lengths, x.shape[1]))
        q, k, v = (torch.from_numpy(x @ w) for w in (w_q, w_k, w_v))
        return tiled_attention(q, k, v, mask=m).numpy()

    _refused("03.5", tiled, "tiled_attention")


def test_03_5_a_nan_row_is_explained():
    # s6-03: a plain numpy softmax failed with "expected 0, got nan" and no hint
    def plain(x, w_q, w_k, w_v, lengths):
        b, s, _ = x.shape
        keys = np.arange(s)[None, None, :]
        allowed = (keys >= s - lengths[:, None, None]) & np.tri(s, dtype=bool)
        z = np.where(allowed, (x @ w_q) @ (x @ w_k).transpose(0, 2, 1) / np.sqrt(w_q.shape[1]),
                     -np.inf)
        e = np.exp(z - z.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True) @ (x @ w_v)

    with np.errstate(invalid="ignore"):
        _always_fails("03.5", plain, "divides 0 by 0")
