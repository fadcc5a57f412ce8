"""Positions in attention: absolute, relative, and attention that reproduces convolution (ch. 09).

Self-attention treats its input as a set: permuting the tokens permutes the output the same
way. Order has to be put in from outside. This package holds the three ways the book studies,
plus the construction that closes the loop with chapter 01, one module per concept:
``sinusoidal``, ``relative`` (Shaw), ``rotary`` (RoPE), ``gam_relative`` and
``conv_as_attention``.
Every public name is re-exported here and from ``attnlab``.

* **Sinusoidal absolute positions** (Vaswani et al. 2017): a fixed ``(n, d)`` table added to
  the token vectors, :func:`sinusoidal_positions`, with :func:`sinusoidal_shift_matrix`, the
  rotation that moves every row ``k`` places along.
* **Clipped relative positions** (Shaw et al. 2018): two learned tables of ``2 k_max + 1``
  vectors indexed by the signed distance ``j - i`` clipped to ``[-k_max, k_max]``,
  :func:`relative_position_index` and :func:`shaw_attention`.
* **Rotary positions, RoPE** (Su et al. 2021): queries and keys turned pair by pair by an
  angle ``p θ_i``, so that ``q_p · k_r`` depends on ``r - p`` only: :func:`rotary_angles`
  and :func:`apply_rotary`, in the interleaved and the half-split pair layout.
* **GAM relative positions** (Pandya 2022, eq. 20–29): per token a vector ``r^α`` of corpus
  distances, :func:`gam_relative_vectors`, from which a learned embedding ``p^α`` feeds a
  second set of GAM brains ``B^P``: :func:`gam_position_weights`,
  :func:`gam_relative_attention`, and the two ways of mixing it with content attention,
  :func:`combine_linear` (eq. 20) and :func:`combine_geometric` (eq. 25).
* **Attention that is a convolution** (Cordonnier et al. 2020): ``2C+1`` heads whose logits
  depend on the relative position only, :func:`convolution_attention_params` and
  :func:`convolution_as_attention`, equal to :func:`attnlab.conv.local_context`.

Row convention throughout: one token per row, weights multiply on the right.
"""

from attnlab.positions.conv_as_attention import (
    circular_offsets,
    convolution_as_attention,
    convolution_attention_params,
)
from attnlab.positions.gam_relative import (
    combine_geometric,
    combine_linear,
    gam_position_weights,
    gam_relative_attention,
    gam_relative_vectors,
)
from attnlab.positions.relative import relative_position_index, shaw_attention
from attnlab.positions.rotary import apply_rotary, rotary_angles
from attnlab.positions.sinusoidal import sinusoidal_positions, sinusoidal_shift_matrix

__all__ = [
    "sinusoidal_positions",
    "sinusoidal_shift_matrix",
    "rotary_angles",
    "apply_rotary",
    "relative_position_index",
    "shaw_attention",
    "gam_relative_vectors",
    "gam_position_weights",
    "combine_linear",
    "combine_geometric",
    "gam_relative_attention",
    "circular_offsets",
    "convolution_attention_params",
    "convolution_as_attention",
]
