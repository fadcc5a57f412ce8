"""The size check shared by the position modules (integers such as ``n``, ``d``, ``k_max``)."""

from __future__ import annotations

import numpy as np


def _check_size(value: int, name: str, minimum: int) -> int:
    """Return ``value`` as an ``int`` if it is an integer ``>= minimum`` (or raise)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {name}={value}")
    return int(value)
