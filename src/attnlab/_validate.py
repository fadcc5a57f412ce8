"""Small input checks shared by the numpy core.

Every public function in :mod:`attnlab` checks its input with these helpers so that bad input
fails early with a :class:`ValueError` that names the offending shapes or values, instead of a
silent broadcast or a NaN further down.
"""

from __future__ import annotations

import numpy as np


def as_float_array(x: np.typing.ArrayLike, name: str) -> np.ndarray:
    """Return ``x`` as a floating-point array, keeping a float dtype if it already has one.

    Integers and booleans become ``float64``; ``float16``, ``float32`` and ``float64`` are kept.

    Raises
    ------
    ValueError
        If ``x`` is complex or cannot be read as numbers.
    """
    arr = np.asarray(x)
    if np.issubdtype(arr.dtype, np.floating):
        return arr
    if np.issubdtype(arr.dtype, np.integer) or arr.dtype == np.bool_:
        return arr.astype(np.float64)
    raise ValueError(f"{name} must hold real numbers, got dtype {arr.dtype}")


def require_ndim(x: np.ndarray, name: str, ndim: int, layout: str) -> None:
    """Raise ``ValueError`` unless ``x`` has exactly ``ndim`` axes (``layout`` names them)."""
    if x.ndim != ndim:
        raise ValueError(f"{name} must have shape {layout}, got shape {x.shape}")


def require_finite(x: np.ndarray, name: str) -> None:
    """Raise ``ValueError`` if ``x`` holds NaN or an infinity."""
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name} contains NaN or infinite values")


def result_dtype(*arrays: np.ndarray) -> np.dtype:
    """The float dtype a computation on ``arrays`` should return (numpy's promotion rules)."""
    return np.result_type(*arrays)
