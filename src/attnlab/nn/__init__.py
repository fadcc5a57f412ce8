"""PyTorch modules of attnlab (``import attnlab.nn``; needs torch).

Modules follow torch conventions: ``batch_first`` tensors of shape ``(batch, s, d)``, and
``nn.Linear`` weights stored as ``(out, in)``. Conversions to and from the numpy core's
``(in, out)`` matrices are explicit.

Shapes, dtypes and sizes are always checked; values (NaN or infinite inputs, logits that
overflow the dtype) only while :func:`check_values` is on, because looking at every number
waits for the device (see "Error contract" on the API page).
"""

from attnlab._validate import check_values, values_checked  # noqa: F401 (importable)
from attnlab.nn.attention import (
    ScaledDotProductAttention,
    masked_softmax,
    scaled_dot_product_attention,
)
from attnlab.nn.gam import GeneralizedAttention, gam_logits, signed_power
from attnlab.nn.grouped import grouped_query_attention
from attnlab.nn.luong_attention import LuongAttention
from attnlab.nn.multihead import AttentionHead, MultiHeadAttention, to_torch_attn_mask
from attnlab.nn.positions import GAMRelativeAttention, ShawRelativeAttention
from attnlab.nn.rotary import RotaryEmbedding, apply_rotary
from attnlab.nn.seq2seq import LuongSeq2Seq
from attnlab.nn.tiled import tiled_attention

# Luong's names come from their defining modules, not from the facade attnlab.nn.luong, so
# that ``python -m attnlab.nn.luong`` runs a module this package has not imported yet.

__all__: list[str] = [
    "check_values",  # values_checked is importable too; no tensor in, so not in __all__
    "scaled_dot_product_attention",
    "ScaledDotProductAttention",
    "masked_softmax",
    "tiled_attention",
    "grouped_query_attention",
    "AttentionHead",
    "MultiHeadAttention",
    "to_torch_attn_mask",
    "LuongAttention",
    "LuongSeq2Seq",
    "GeneralizedAttention",
    "gam_logits",
    "signed_power",
    "GAMRelativeAttention",
    "ShawRelativeAttention",
    "apply_rotary",
    "RotaryEmbedding",
]
