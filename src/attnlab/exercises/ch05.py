"""Checks for the exercises of chapter 05 (multi-head attention)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from attnlab.course.spec import Case, ExerciseFailure, as_array, exercise, expect_close, matches
from attnlab.multihead import multi_head_attention


@exercise(
    "05.1",
    answer="concat_heads",
    passed="row t is [head 0 at t, head 1 at t, ...] on 20 random stacks",
)
def _concat_heads(rng: np.random.Generator) -> Iterator[Case]:
    """``concat_heads(heads)``: ``(h, s, d_v)`` → ``(s, h·d_v)``, token by token."""
    stacks = [(np.arange(12.0).reshape(2, 3, 2), "heads = arange(12).reshape(2, 3, 2)")]
    for case in range(20):
        h, s, d_v = (int(n) for n in rng.integers(2, 7, size=3))
        stacks.append((rng.normal(size=(h, s, d_v)), f"case {case}: heads of shape {(h, s, d_v)}"))
    for heads, on in stacks:
        h, s, d_v = heads.shape
        # The reference, written out: row t is head 0's row t, then head 1's, and so on.
        expected = np.stack([np.concatenate([heads[i, t] for i in range(h)]) for t in range(s)])
        hints = {
            "you reshaped (h, s, d_v) straight to (s, h·d_v): that mixes tokens. Move the head "
            "axis first (transpose to (s, h, d_v)), then reshape": heads.reshape(s, h * d_v),
            "your rows interleave the heads feature by feature; each head's d_v features must "
            "stay together (transpose(1, 0, 2), not (1, 2, 0))": heads.transpose(1, 2, 0).reshape(
                s, h * d_v
            ),
        }
        yield Case((heads,), expected, on=on, hints=hints)


def _split(w: np.ndarray, h: int) -> np.ndarray:
    """torch's ``(d_out, d_in)`` block → ``(h, d, d_k)``: transpose, then split the columns."""
    d = w.shape[1]
    return w.T.reshape(d, h, d // h).transpose(1, 0, 2)


def _weights_judge(got, case: Case) -> None:
    x, in_proj, out_proj, h = case.private
    d = out_proj.shape[0]
    d_k = d // h
    label = f"case {case.on}"
    if not isinstance(got, tuple) or len(got) != 4:
        count = len(got) if isinstance(got, tuple) else 1
        raise ExerciseFailure(f"expected four arrays (w_q, w_k, w_v, w_o), got {count}")
    arrays = [as_array(w, label) for w in got]
    names, shapes = ("w_q", "w_k", "w_v", "w_o"), [(h, d, d_k)] * 3 + [(d, d)]
    for name, w, shape in zip(names, arrays, shapes, strict=True):
        if w.shape != shape:
            raise ExerciseFailure(f"{label}: {name} should have shape {shape}, got {w.shape}")
    try:
        expect_close(
            multi_head_attention(x, *arrays)[0],
            case.expected,
            on=f"{label} (output of multi_head_attention)",
        )
    except ExerciseFailure:
        blocks = np.split(in_proj, 3)
        for name, w, block in zip(names[:3], arrays[:3], blocks, strict=True):
            if not matches(w, _split(block, h)) and matches(w, block.reshape(h, d, d_k)):
                raise ExerciseFailure(
                    f"{label}: {name} reshapes torch's (d_out, d_in) weight without "
                    "transposing it; torch computes x W^T, so take the transpose, then split "
                    "its columns by head"
                ) from None
        if not matches(arrays[3], out_proj.T) and matches(arrays[3], out_proj):
            raise ExerciseFailure(
                f"{label}: w_o is out_proj.weight untransposed; torch computes x W^T, so "
                "w_o = out_proj.weight.T"
            ) from None
        raise


@exercise(
    "05.2", answer="stacked_from_torch",
    passed="multi_head_attention with your weights reproduces nn.MultiheadAttention on 6 layers",
    adapter="torch_mha",
)
def _stacked_from_torch(rng: np.random.Generator) -> Iterator[Case]:
    """``stacked_from_torch(mha)``: numpy ``(w_q, w_k, w_v, w_o)`` from an MHA module."""
    import torch

    from attnlab.course.adapters import build_mha

    for case in range(6):
        h = int(rng.integers(1, 5))
        d_k = int(rng.integers(1, 5))
        d, s = h * d_k, int(rng.integers(1, 7))
        in_proj = rng.normal(size=(3 * d, d)) / np.sqrt(d)
        out_proj = rng.normal(size=(d, d)) / np.sqrt(d)
        x = rng.normal(size=(s, d))
        xt = torch.tensor(x).unsqueeze(0)
        with torch.no_grad():
            expected = build_mha(in_proj, out_proj, h)(xt, xt, xt, need_weights=False)[0][0]
        yield Case(
            (in_proj, out_proj, h),
            expected.numpy().copy(),
            on=f"{case}: d={d}, h={h}, s={s}",
            judge=_weights_judge,
            private=(x, in_proj, out_proj, h),
        )
