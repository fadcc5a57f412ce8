"""Checks for the exercises of chapter 05 (multi-head attention)."""

from __future__ import annotations

import numpy as np

from attnlab.exercises._registry import ExerciseFailure, expect_close, register
from attnlab.multihead import multi_head_attention


@register("05.1")
def _concat_heads(answer) -> str:
    """``concat_heads(heads)``: ``(h, s, d_v)`` → ``(s, h·d_v)``, token by token."""
    rng = np.random.default_rng()
    for case in range(20):
        h, s, d_v = (int(n) for n in rng.integers(2, 7, size=3))
        heads = rng.normal(size=(h, s, d_v))
        # The reference, written out: row t is head 0's row t, then head 1's, and so on.
        expected = np.stack([np.concatenate([heads[i, t] for i in range(h)]) for t in range(s)])
        expect_close(answer(heads), expected, on=f"case {case}: heads of shape {(h, s, d_v)}")
    return "row t is [head 0 at t, head 1 at t, ...] on 20 random stacks"


@register("05.2")
def _stacked_from_torch(answer) -> str:
    """``stacked_from_torch(mha)``: numpy ``(w_q, w_k, w_v, w_o)`` from an MHA module."""
    import torch

    rng = np.random.default_rng()
    for case in range(6):
        h = int(rng.integers(1, 5))
        d_k = int(rng.integers(1, 5))
        d, s = h * d_k, int(rng.integers(1, 7))
        torch.manual_seed(int(rng.integers(2**31)))
        mha = torch.nn.MultiheadAttention(d, h, bias=False, batch_first=True, dtype=torch.float64)
        got = answer(mha)
        if len(got) != 4:
            raise ExerciseFailure(f"expected four arrays (w_q, w_k, w_v, w_o), got {len(got)}")
        w_q, w_k, w_v, w_o = (np.asarray(w) for w in got)
        for name, w, shape in (
            ("w_q", w_q, (h, d, d_k)),
            ("w_k", w_k, (h, d, d_k)),
            ("w_v", w_v, (h, d, d_k)),
            ("w_o", w_o, (d, d)),
        ):
            if w.shape != shape:
                raise ExerciseFailure(
                    f"case {case} (d={d}, h={h}): {name} should have shape {shape}, got {w.shape}"
                )
        x = rng.normal(size=(s, d))
        xt = torch.tensor(x).unsqueeze(0)
        expected = mha(xt, xt, xt, need_weights=False)[0][0].detach().numpy()
        expect_close(
            multi_head_attention(x, w_q, w_k, w_v, w_o)[0],
            expected,
            on=f"case {case}: d={d}, h={h}, s={s} (output of multi_head_attention)",
        )
    return "multi_head_attention with your weights reproduces nn.MultiheadAttention on 6 layers"
