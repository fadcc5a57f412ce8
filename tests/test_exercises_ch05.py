"""Chapter 05's checks: honest answers pass; the library's own functions and partly right
answers (one head only, one token only, a scale that is right only when d_k = d) fail."""

from __future__ import annotations

import numpy as np
from _partly_right import always_fails as _always_fails
from _partly_right import refused_loophole as _refused
from _partly_right import verdict as _verdict


# ---- 05.1 ------------------------------------------------------------------------------------
def test_05_1_merge_heads_is_unavailable():
    from attnlab import merge_heads

    _always_fails("05.1", lambda st: merge_heads(st).transpose(1, 0, 2), "attnlab.merge_heads")
    _always_fails("05.1", lambda st: merge_heads(st).transpose(1, 0, 2) + 0.0, "unavailable")


def test_05_1_honest_answers_pass():
    assert _verdict("05.1", lambda st: st.transpose(2, 0, 1, 3).reshape(
        st.shape[2], st.shape[0], -1))[0]
    assert _verdict("05.1", lambda st: np.concatenate(list(st.transpose(1, 2, 0, 3)), axis=-1))[0]


def test_05_1_the_chapters_own_line_does_not_answer_it():
    # s6-05: cell 8's einsum line passed 05.1; the batched, sequence-first layout needs more
    def pasted(stack):
        h, s, d_v = stack.shape
        return np.einsum("hsv->shv", stack).reshape(s, h * d_v)

    _always_fails("05.1", pasted)


def test_05_1_partly_right_answers_fail_with_the_mistake_named():
    def shape_of(st):
        return st.shape[2], st.shape[0], st.shape[1] * st.shape[3]

    _always_fails("05.1", lambda st: st.reshape(shape_of(st)), "mixes items")
    _always_fails("05.1", lambda st: st.transpose(0, 2, 1, 3).reshape(shape_of(st)),
                  "batch-first")
    _always_fails("05.1", lambda st: st.transpose(2, 0, 3, 1).reshape(shape_of(st)),
                  "interleave")
    # right for one item only: the batch axis dropped and put back
    _always_fails("05.1", lambda st: st[0].transpose(1, 0, 2).reshape(
        st.shape[2], 1, -1).repeat(st.shape[0], axis=1))


# ---- 05.4 ------------------------------------------------------------------------------------
def _softmax_rows(z):
    top = z.max(-1, keepdims=True)
    e = np.exp(z - np.where(np.isneginf(top), 0.0, top))
    total = e.sum(-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def mha_forward(x, in_proj_weight, out_proj_weight, h, mask, *, scale=None, fill=-np.inf,
                concat="transpose", t_in=True, t_out=True):
    s, d = x.shape
    d_k = d // h
    w = [b.T if t_in else b for b in np.split(in_proj_weight, 3)]
    q, k, v = ((x @ m).reshape(s, h, d_k).transpose(1, 0, 2) for m in w)  # (h, s, d_k)
    scale = 1 / np.sqrt(d_k) if scale is None else scale
    z = np.where(mask, q @ k.transpose(0, 2, 1) * scale, fill)
    heads = _softmax_rows(z) @ v  # (h, s, d_k)
    cat = heads.transpose(1, 0, 2).reshape(s, d) if concat == "transpose" else heads.reshape(s, d)
    return cat @ (out_proj_weight.T if t_out else out_proj_weight)


def test_05_4_an_honest_answer_passes():
    assert _verdict("05.4", mha_forward)[0]


def test_05_4_the_library_and_torch_are_unavailable():
    import torch

    from attnlab import multi_head_attention, split_heads

    def torch_module(x, w_in, w_out, h, mask):
        d = x.shape[1]
        m = torch.nn.MultiheadAttention(d, h, bias=False, batch_first=True, dtype=torch.float64)
        with torch.no_grad():
            m.in_proj_weight.copy_(torch.from_numpy(w_in))
            m.out_proj.weight.copy_(torch.from_numpy(w_out))
            xt = torch.from_numpy(x)[None]
            out = m(xt, xt, xt, attn_mask=torch.from_numpy(~mask))[0][0].numpy()
        return np.nan_to_num(out)

    _always_fails("05.4", torch_module, "torch.nn.MultiheadAttention")

    def library(x, w_in, w_out, h, mask):
        w_q, w_k, w_v = (split_heads(b.T, h) for b in np.split(w_in, 3))
        return multi_head_attention(x, w_q, w_k, w_v, w_out.T, mask=mask)[0]

    _always_fails("05.4", library, "unavailable")


def test_05_4_partly_right_answers_fail_with_the_mistake_named():
    _always_fails("05.4", lambda x, *a: mha_forward(x, *a, scale=1 / np.sqrt(x.shape[1])),
                  "not 1/sqrt(d)")
    _always_fails("05.4", lambda *a: mha_forward(*a, concat="reshape"), "mixes tokens")
    _always_fails("05.4", lambda *a: mha_forward(*a, t_in=False), "transpose each")
    _always_fails("05.4", lambda *a: mha_forward(*a, t_out=False), "out_proj_weight.T")
    _always_fails("05.4", lambda *a: mha_forward(*a, fill=-1e9), "")
    with np.errstate(invalid="ignore"):
        def nan_rows(x, w_in, w_out, h, mask):  # a plain softmax: 0/0 where no key is allowed
            s, d = x.shape
            d_k = d // h
            q, k, v = ((x @ b.T).reshape(s, h, d_k).transpose(1, 0, 2) for b in np.split(w_in, 3))
            z = np.where(mask, q @ k.transpose(0, 2, 1) / np.sqrt(d_k), -np.inf)
            e = np.exp(z - z.max(-1, keepdims=True))
            return (e / e.sum(-1, keepdims=True) @ v).transpose(1, 0, 2).reshape(s, d) @ w_out.T

        _always_fails("05.4", nan_rows, "NaN")


def test_05_4_the_tiled_kernel_is_unavailable():
    # s6-05: unpacking the weights and calling attnlab's tiled attention passed
    import torch

    from attnlab.nn.tiled import tiled_attention

    def tiled(x, w_in, w_out, h, mask):
        s, d = x.shape
        q, k, v = (torch.from_numpy((x @ b.T).reshape(s, h, d // h).transpose(1, 0, 2))
                   for b in np.split(w_in, 3))
        heads = tiled_attention(q, k, v, mask=torch.from_numpy(mask)).numpy()
        return heads.transpose(1, 0, 2).reshape(s, d) @ w_out.T

    _refused("05.4", tiled, "tiled_attention")
