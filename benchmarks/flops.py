"""Multiply-adds of one forward pass of the attention layers, by formula (``make bench``).

One multiply-add (MAC) is two floating-point operations. ``n`` is the sequence length, ``d`` the
width, ``h`` the heads, ``N_B`` the brains per head and ``L`` the number of feature terms (1 for
the power law, the degree for the polynomial). Element-wise work (softmax, the feature
function, biases) is left out: it is ``O(n²)`` or ``O(n d)`` without a factor ``d``.
``tests/test_nn_gam.py`` checks every formula against ``torch.utils.flop_counter``.
"""

from __future__ import annotations


def mha_macs(n: int, d: int, h: int) -> int:
    """Multi-head attention: four ``d × d`` projections, ``Q Kᵀ`` and ``A V`` over all heads.

    ``4 n d² + 2 n² d`` (independent of ``h``: ``h`` heads of width ``d / h``).
    """
    del h  # the count does not depend on the number of heads
    return 4 * n * d * d + 2 * n * n * d


def gam_macs(n: int, d: int, h: int, n_brains: int, terms: int = 1) -> int:
    """GAM's work as the algorithm states it: per head and brain, features times ``B``
    (``L n d²``), logits (``L n² d``) and weights times the head's values (``n² d / h``); plus
    the value and output projections (``2 n d²``).

    ``h N_B (L n d² + L n² d + n² d / h) + 2 n d²``; with ``L = 1`` the formula of issue 18.
    """
    return (
        h * n_brains * (terms * n * d * d + terms * n * n * d)
        + n_brains * n * n * d
        + 2 * n * d * d
    )


def gam_explicit_macs(n: int, d: int, h: int, n_brains: int, terms: int = 1) -> int:
    """GAM's explicit path (``need_weights=True``), which mixes the brains' weights first.

    ``h N_B L (n d² + n² d) + h N_B n² + n² d + 2 n d²``: the mixing ``Σ_i W^P_i Ψ_i`` costs
    ``h N_B n²``, then one product ``Φ V`` per head (``n² d`` in all) instead of one per brain.
    """
    per_brain = terms * (n * d * d + n * n * d)
    return h * n_brains * per_brain + h * n_brains * n * n + n * n * d + 2 * n * d * d


def gam_fused_cpu_macs(n: int, d: int, h: int, n_brains: int, terms: int = 1) -> int:
    """GAM's fused path as PyTorch's CPU kernel executes it: values padded to ``L d`` columns.

    ``h N_B (L n d² + 2 L n² d) + 2 n d²``: the flash kernel needs values as wide as the
    queries, so each brain multiplies its weights by ``L d`` columns, not ``d / h``; the
    brains' outputs are mixed element-wise (no multiply-adds counted).
    """
    per_brain = terms * n * d * d + 2 * terms * n * n * d
    return h * n_brains * per_brain + 2 * n * d * d


def gam_recompute_macs(n: int, d: int, h: int, n_brains: int, terms: int = 1) -> int:
    """GAM's fused path with ``recompute=True``, forward plus the recomputation in backward.

    ``2 h N_B (L n d² + 2 L n² d) + 2 n d²``: every brain's forward pass runs twice (once
    more when the backward pass reaches it); the two projections run once. The backward pass's
    own work is not included, as in the other counts.
    """
    per_brain = terms * n * d * d + 2 * terms * n * n * d
    return 2 * h * n_brains * per_brain + 2 * n * d * d
