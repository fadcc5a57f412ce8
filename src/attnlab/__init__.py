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
from attnlab.softmax import softmax

# --- chapters 05-06 (multihead, images): add imports here ---
# --- chapter 07 (luong): add imports here ---
# --- chapter 08 (gam): add imports here ---
# --- chapter 09 (positions): add imports here ---

__all__ = [
    "local_context",
    "scaled_dot_product_attention",
    "self_attention",
    "softmax",
    # --- chapters 05-06 names ---
    # --- chapter 07 names ---
    # --- chapter 08 names ---
    # --- chapter 09 names ---
]

__version__ = "0.1.0"
