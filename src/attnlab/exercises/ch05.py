"""Checks for the exercises of chapter 05 (multi-head attention).

The cases always include the ones that separate a partly right answer: more than one head and
more than one token (where a reshape without a transpose shows), ``d_k`` different from ``d``
(the scale), non-symmetric weights (a missing transpose), a query that may attend to no key.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from attnlab.course.spec import Case, ExerciseFailure, as_array, close, exercise
from attnlab.exercises.ch03 import ATTENTION_FORBID

#: What hands over the concatenation of 05.1 (and the head split of 05.4).
HEADS_FORBID = ("attnlab.merge_heads", "attnlab.split_heads")


@exercise(
    "05.1",
    answer="concat_heads",
    passed="entry [t, n] is [head 0 at (n, t), head 1 at (n, t), ...] on 20 random batches "
    "(b = 1, h = 1, s = 1 and b, h, s all different included)",
    forbid=(*HEADS_FORBID, __name__),
)
def _concat_heads(rng: np.random.Generator) -> Iterator[Case]:
    """``concat_heads(stack)``: batch-first heads ``(b, h, s, d_v)`` → sequence-first
    ``(s, b, h·d_v)``, PyTorch's layout without ``batch_first``."""
    stacks = [(np.arange(24.0).reshape(2, 2, 3, 2), "stack = arange(24).reshape(2, 2, 3, 2)"),
              (rng.normal(size=(1, 1, 1, 1)), "one item, one head, one token, d_v = 1"),
              (rng.normal(size=(1, 3, 4, 2)), "one item (b = 1): (1, 3, 4, 2)"),
              (rng.normal(size=(3, 1, 2, 2)), "one head (h = 1): (3, 1, 2, 2)")]
    for case in range(20):
        b, h, s, d_v = (int(n) for n in rng.integers(2, 6, size=4))
        stacks.append((rng.normal(size=(b, h, s, d_v)), f"case {case}: stack of shape "
                       f"{(b, h, s, d_v)}"))
    for stack, on in stacks:
        b, h, s, d_v = stack.shape
        # The reference, written out: entry [t, n] is item n's head 0 at token t, then head 1's.
        expected = np.array([[np.concatenate([stack[n, i, t] for i in range(h)])
                              for n in range(b)] for t in range(s)])
        hints = {
            "you reshaped straight to (s, b, h·d_v): that mixes items, heads and tokens. Move "
            "the token axis first and the head axis next to the features (transpose to "
            "(s, b, h, d_v)), then reshape": stack.reshape(s, b, h * d_v),
            "your result is batch-first, (b, s, h·d_v) read as (s, b, ...): the layout asked "
            "for puts the token axis first, then the batch": stack.transpose(0, 2, 1, 3).reshape(
                s, b, h * d_v),
            "your rows interleave the heads feature by feature; each head's d_v features must "
            "stay together (transpose(2, 0, 1, 3), not (2, 0, 3, 1))": stack.transpose(
                2, 0, 3, 1).reshape(s, b, h * d_v),
        }
        yield Case((stack,), expected, on=on,
                   hints={k: v for k, v in hints.items()
                          if v.shape == expected.shape and not np.allclose(v, expected)})


# ---- 05.4: multi-head attention's forward from PyTorch's packed weights ----------------------
def _torch_reference(x, in_proj, out_proj, h, mask) -> np.ndarray:
    """``torch.nn.MultiheadAttention`` itself (float64, no bias); rows with no key: zeros."""
    import torch

    from attnlab.course.adapters import build_mha

    xt = torch.from_numpy(x)[None]
    with torch.no_grad():
        out = build_mha(in_proj, out_proj, h)(
            xt, xt, xt, attn_mask=torch.from_numpy(~mask), need_weights=False
        )[0][0].numpy().copy()
    out[~mask.any(-1)] = 0.0  # torch gives NaN there; the book's convention is a zero output
    return out


def _by_heads(x, in_proj, out_proj, h, mask, *, scale=None, split="blocks", concat="transpose",
              transpose_in=True, transpose_out=True, project=True) -> np.ndarray:
    """Numpy loops over heads, with switches that reproduce the common mistakes."""
    d = x.shape[1]
    d_k = d // h
    w = [b.T if transpose_in else b for b in np.split(in_proj, 3)]  # each (d, d)
    if split == "blocks":
        cols = [np.arange(i * d_k, (i + 1) * d_k) for i in range(h)]
    else:  # every h-th column
        cols = [np.arange(i, d, h) for i in range(h)]
    scale = 1 / np.sqrt(d_k) if scale is None else scale
    heads = np.zeros((h, x.shape[0], d_k))
    for i, c in enumerate(cols):
        q, k, v = (x @ m[:, c] for m in w)
        for t in range(x.shape[0]):
            keys = np.flatnonzero(mask[t])
            if keys.size:
                z = (k[keys] @ q[t]) * scale
                p = np.exp(z - z.max())
                heads[i, t] = (p / p.sum()) @ v[keys]
    if concat == "transpose":
        cat = heads.transpose(1, 0, 2).reshape(x.shape[0], d)
    else:
        cat = heads.reshape(x.shape[0], d)
    if not project:
        return cat
    return cat @ (out_proj.T if transpose_out else out_proj)


def _finite_then_close(got, case: Case) -> None:
    if not np.all(np.isfinite(as_array(got, case.on))):
        raise ExerciseFailure(f"on {case.on}: got NaN or inf (a query that may attend to no "
                              "key must give a zero output)")
    close(got, case)


def _mask(kind: str, s: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "all":
        return np.ones((s, s), dtype=bool)
    causal = np.tri(s, dtype=bool)
    if kind == "causal":
        return causal
    mask = causal & (rng.random((s, s)) < 0.7)
    mask[int(rng.integers(0, s))] = False  # one query that may attend nowhere
    return mask


@exercise(
    "05.4", answer="mha_forward",
    forbid=(*ATTENTION_FORBID, *HEADS_FORBID, "attnlab.nn.MultiHeadAttention",
            "attnlab.nn.grouped_query_attention", __name__),
    passed="equals torch.nn.MultiheadAttention on 14 layers (h = 1 to 6, d_k = 1 to 4, "
    "masked and fully masked queries)",
)
def _mha_forward(rng: np.random.Generator) -> Iterator[Case]:
    """``mha_forward(x, in_proj_weight, out_proj_weight, h, mask)``: the layer's output."""
    # Separating cases first: h > 1 and s > 1 (the concatenation), d_k != d (the scale), a
    # fully masked query; then the extremes h = 1, d_k = 1, s = 1.
    sizes = [(2, 3, 4, "some"), (1, 4, 3, "causal"), (4, 1, 5, "some"), (1, 1, 1, "all"),
             (6, 1, 2, "causal"), (3, 2, 1, "all")]  # (h, d_k, s, mask)
    for _ in range(8):
        sizes.append((int(rng.integers(2, 5)), int(rng.integers(1, 5)), int(rng.integers(2, 8)),
                      str(rng.choice(["all", "causal", "some"]))))
    for h, d_k, s, kind in sizes:
        d = h * d_k
        x = rng.normal(size=(s, d))
        in_proj = rng.normal(size=(3 * d, d)) / np.sqrt(d)
        out_proj = rng.normal(size=(d, d)) / np.sqrt(d)
        mask = _mask(kind, s, rng)
        args = (x, in_proj, out_proj, h, mask)
        expected = _torch_reference(*args)
        hints = {
            "scale each head's logits by 1/sqrt(d_k), d_k = d/h, not 1/sqrt(d)": _by_heads(
                *args, scale=1 / np.sqrt(d)),
            "in_proj_weight is stored (out, in): the projections are x @ W.T, transpose each "
            "(d, d) block before splitting its columns by head": _by_heads(
                *args, transpose_in=False),
            "out_proj.weight is stored (out, in): the output is concat @ out_proj_weight.T": (
                _by_heads(*args, transpose_out=False)),
            "you reshaped the (h, s, d_k) heads straight to (s, d): that mixes tokens; move the "
            "head axis next to the features first": _by_heads(*args, concat="reshape"),
            "head i owns the columns i*d_k ... (i+1)*d_k - 1 of each projection, a block, not "
            "every h-th column": _by_heads(*args, split="strided"),
            "the output projection is missing: multiply the concatenated heads by "
            "out_proj_weight.T": _by_heads(*args, project=False),
            "the mask is inverted: True means 'may attend' (torch's attn_mask means the "
            "opposite)": _by_heads(x, in_proj, out_proj, h, ~mask),
        }
        yield Case(
            args, expected, on=f"h={h}, d_k={d_k}, s={s}, mask {kind}",
            judge=_finite_then_close,
            hints={k: v for k, v in hints.items() if not np.allclose(v, expected)},
        )
