"""Relative positions in PyTorch (chapter 09): Shaw et al. (2018) and GAM (Pandya 2022).

* :class:`ShawRelativeAttention`: multi-head self-attention with two learned tables
  ``a^K``, ``a^V`` of ``2 k_max + 1`` vectors each, indexed by the key's distance ``j - i``
  from the query clipped to ``[-k_max, k_max]`` and shared by all heads.
* :class:`GAMRelativeAttention`: the relative-position branch of the generalized attention
  mechanism (eq. 20–29), mixed with content attention either linearly (``c_1``) or by a
  geometric mean.

One module per concept, ``attnlab.nn.positions.shaw`` and
``attnlab.nn.positions.gam_relative``; every public name is re-exported here.
Tensors are ``batch_first``; boolean masks say ``True`` where a query may attend.
"""

from attnlab.nn.positions.gam_relative import (
    GAMRelativeAttention,
    combine_geometric,
    gam_relative_vectors,
)
from attnlab.nn.positions.shaw import ShawRelativeAttention

__all__ = [
    "ShawRelativeAttention",
    "GAMRelativeAttention",
    "combine_geometric",
    "gam_relative_vectors",
]
