"""PyTorch modules of attnlab (``import attnlab.nn``; needs torch).

Modules follow torch conventions: ``batch_first`` tensors of shape ``(batch, s, d)``, and
``nn.Linear`` weights stored as ``(out, in)``. Conversions to and from the numpy core's
``(in, out)`` matrices are explicit.
"""

from attnlab.nn.attention import scaled_dot_product_attention

# --- chapters 02-04 (attention): add imports here ---
# --- chapters 05-06 (multihead): add imports here ---
# --- chapter 07 (luong): add imports here ---
# --- chapter 08 (gam): add imports here ---
# --- chapter 09 (positions): add imports here ---

__all__: list[str] = [
    "scaled_dot_product_attention",
    # --- chapters 02-04 names ---
    # --- chapters 05-06 names ---
    # --- chapter 07 names ---
    # --- chapter 08 names ---
    # --- chapter 09 names ---
]
