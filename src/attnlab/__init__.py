"""attnlab: the tested helper package of *Attention, from Convolution to GAM*.

The numpy core (this namespace) imports numpy only, so ``import attnlab`` is instant and works
without torch or matplotlib. The torch modules live in :mod:`attnlab.nn`, figures in
:mod:`attnlab.plot`, coursework checks in :mod:`attnlab.exercises`.

Conventions (see the book's *Notation* page): one token per row (``X`` has shape ``(s, d)``),
weights multiply on the right (``X @ W`` with ``W`` of shape ``(d_in, d_out)``), softmax runs
over the last axis (the keys), boolean masks say ``True`` where a query may attend.
"""

from attnlab.attention import scaled_dot_product_attention, self_attention
from attnlab.conv import local_context
from attnlab.gam import gam_attention, gam_init_std, gam_logits, signed_power
from attnlab.images import image_to_patches, patches_to_image
from attnlab.luong import column_to_row, luong_attention, luong_scores, row_to_column
from attnlab.multihead import merge_heads, multi_head_attention, split_heads
from attnlab.positions import (
    apply_rotary,
    combine_geometric,
    combine_linear,
    convolution_as_attention,
    convolution_attention_params,
    gam_position_weights,
    gam_relative_attention,
    gam_relative_vectors,
    relative_position_index,
    rotary_angles,
    shaw_attention,
    sinusoidal_positions,
    sinusoidal_shift_matrix,
)
from attnlab.softmax import softmax

__all__ = [
    "local_context",
    "scaled_dot_product_attention",
    "self_attention",
    "softmax",
    "image_to_patches",
    "merge_heads",
    "multi_head_attention",
    "patches_to_image",
    "split_heads",
    "column_to_row",
    "luong_attention",
    "luong_scores",
    "row_to_column",
    "gam_attention",
    "gam_init_std",
    "gam_logits",
    "signed_power",
    "combine_geometric",
    "combine_linear",
    "convolution_as_attention",
    "convolution_attention_params",
    "gam_position_weights",
    "gam_relative_attention",
    "gam_relative_vectors",
    "relative_position_index",
    "shaw_attention",
    "sinusoidal_positions",
    "sinusoidal_shift_matrix",
    "rotary_angles",
    "apply_rotary",
]

__version__ = "0.1.0"
