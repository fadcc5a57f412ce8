"""Input checks shared by the numpy core and the torch modules (the error contract).

Every public function in :mod:`attnlab` and ``attnlab.nn`` checks its input with these
helpers, so that one rule lives in one place and both halves say the same thing about the same
bad input (see "Error contract" on the API page):

- a wrong *Python type* for a hyperparameter (a bool or a float where an integer belongs, a
  string where a number belongs, a torch tensor given to a numpy function) is a
  :class:`TypeError`;
- everything else (ranks, shapes, sizes, empty sequences, dtypes of arrays, out-of-range
  hyperparameters, non-finite values, logits that overflow the dtype) is a :class:`ValueError`;
- every message starts with, or contains, the name of the offending argument and its shape or
  value.

The helpers only read ``.shape``, ``.ndim`` and ``.dtype``, so they work on numpy arrays and
torch tensors alike; this module imports numpy only. Value checks on torch tensors need a
device synchronisation, so the torch modules run them only when :func:`check_values` is on
(numpy always runs them).
"""

from __future__ import annotations

import contextlib
import numbers
import os
from collections.abc import Iterator
from typing import Any

import numpy as np

#: The empty-sequence rule, shared by every attention in numpy and torch: a sequence axis
#: (queries, keys, tokens) must hold at least one token. Batch axes may be empty.
EMPTY_SEQUENCE_RULE = "every sequence needs at least one token"


def shape_of(x: Any) -> tuple[int, ...]:
    """The shape of an array or tensor as a plain tuple of ints (``torch.Size`` prints long)."""
    return tuple(int(n) for n in x.shape)


def dtype_name(dtype: Any) -> str:
    """``"float16"`` for ``numpy.float16`` and ``torch.float16`` alike."""
    return str(dtype).removeprefix("torch.")


def _is_tensor(x: Any) -> bool:
    """Whether ``x`` is a torch tensor, without importing torch."""
    return type(x).__module__.startswith("torch") and hasattr(x, "detach")


def reject_tensor(x: Any, name: str) -> None:
    """Raise ``TypeError`` if ``x`` is a torch tensor given to a numpy function."""
    if _is_tensor(x):
        raise TypeError(
            f"{name} must be a numpy array, got a torch.Tensor; the numpy core takes "
            f"{name}.detach().cpu().numpy() (attnlab.nn has the torch versions)"
        )


def as_float_array(x: np.typing.ArrayLike, name: str) -> np.ndarray:
    """Return ``x`` as a floating-point array, keeping a float dtype if it already has one.

    Integers and booleans become ``float64``; ``float16``, ``float32`` and ``float64`` are kept.

    Raises
    ------
    TypeError
        If ``x`` is a torch tensor (convert it explicitly with ``.detach().cpu().numpy()``).
    ValueError
        If ``x`` is complex, ragged or cannot be read as numbers.
    """
    reject_tensor(x, name)
    try:
        arr = np.asarray(x)
    except (ValueError, TypeError) as error:
        raise ValueError(f"{name} cannot be read as an array of numbers: {error}") from None
    if np.issubdtype(arr.dtype, np.floating):
        return arr
    if np.issubdtype(arr.dtype, np.integer) or arr.dtype == np.bool_:
        return arr.astype(np.float64)
    raise ValueError(f"{name} must hold real numbers, got dtype {arr.dtype}")


def require_ndim(x: Any, name: str, ndim: int, layout: str) -> None:
    """Raise ``ValueError`` unless ``x`` has exactly ``ndim`` axes (``layout`` names them)."""
    if x.ndim != ndim:
        raise ValueError(f"{name} must have shape {layout}, got shape {shape_of(x)}")


def require_min_ndim(x: Any, name: str, ndim: int, layout: str) -> None:
    """Raise ``ValueError`` unless ``x`` has at least ``ndim`` axes (``layout`` names them)."""
    if x.ndim < ndim:
        raise ValueError(f"{name} must have shape {layout}, got shape {shape_of(x)}")


def require_nonempty(named: dict[str, Any], axis: int = -2) -> None:
    """The empty-sequence rule: raise ``ValueError`` if a sequence axis has no token.

    ``named`` maps argument names to arrays or tensors whose ``axis`` is a sequence axis
    (``-2`` in the row convention, ``-1`` for the columns of the Luong convention). The
    message names every argument and its shape, e.g.
    ``empty sequence: q has shape (0, 4), k has shape (3, 4); every sequence needs ...``.
    """
    if any(x.shape[axis] == 0 for x in named.values()):
        shapes = ", ".join(f"{name} has shape {shape_of(x)}" for name, x in named.items())
        raise ValueError(f"empty sequence: {shapes}; {EMPTY_SEQUENCE_RULE}")


def require_qkv_sizes(q: Any, k: Any, v: Any) -> None:
    """The size rules every attention shares for ``q (..., s_q, d_k)``, ``k``, ``v``.

    Raise ``ValueError`` if a sequence is empty (:func:`require_nonempty` on ``q`` and ``k``),
    if the key size ``d_k`` is 0, or if the leading (batch) axes of the three do not broadcast.
    Works on numpy arrays and torch tensors alike (it reads only ``.shape``).
    """
    require_nonempty({"q": q, "k": k})
    if q.shape[-1] == 0:
        raise ValueError(
            f"empty key size d_k = 0: q has shape {shape_of(q)}, k has shape {shape_of(k)}"
        )
    try:
        np.broadcast_shapes(shape_of(q)[:-2], shape_of(k)[:-2], shape_of(v)[:-2])
    except ValueError:
        raise ValueError(
            f"the leading (batch) axes of q {shape_of(q)}, k {shape_of(k)} and "
            f"v {shape_of(v)} do not broadcast"
        ) from None


#: ``check_int(value, name, minimum=ANY_INT)`` accepts any integer (its range checked elsewhere).
ANY_INT = -(2**62)


def check_int(value: Any, name: str, minimum: int = 1) -> int:
    """Return ``value`` as an ``int`` if it is an integer ``>= minimum``.

    Raises
    ------
    TypeError
        If ``value`` is a bool (``True`` is not the integer 1 here), a float (even ``2.0``),
        or anything else that is not an integer.
    ValueError
        If ``value < minimum``.
    """
    if minimum == 1:
        wanted = "a positive integer"
    elif minimum < -(2**31):
        wanted = "an integer"
    else:
        wanted = f"an integer >= {minimum}"
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be {wanted}, got {value!r} of type {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be {wanted}, got {value!r}")
    return int(value)


def check_bool(value: Any, name: str) -> bool:
    """Return ``value`` if it is ``True`` or ``False``; a flag is never read as truthy.

    Raises
    ------
    TypeError
        If ``value`` is not a Python ``bool`` (``1``, ``0``, ``"yes"``, ``None``, ``np.True_``).
    """
    if not isinstance(value, bool):
        raise TypeError(
            f"{name} must be True or False, got {value!r} of type {type(value).__name__}"
        )
    return value


def check_float(value: Any, name: str, positive: bool = True) -> float:
    """Return ``value`` as a finite ``float`` (and ``> 0`` if ``positive``).

    Raises
    ------
    TypeError
        If ``value`` is a bool or not a real number.
    ValueError
        If ``value`` is NaN, infinite, or (with ``positive``) not above zero.
    """
    wanted = "a positive finite number" if positive else "a finite number"
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be {wanted}, got {value!r} of type {type(value).__name__}")
    number = float(value)
    if not np.isfinite(number) or (positive and number <= 0):
        raise ValueError(f"{name} must be {wanted}, got {value!r}")
    return number


def all_finite(x: Any) -> bool:
    """Whether every entry of the array or tensor ``x`` is finite (a device sync for torch)."""
    if _is_tensor(x):
        return bool(x.detach().isfinite().all())
    return bool(np.all(np.isfinite(x)))


def _nonfinite_detail(x: Any) -> str:
    """How many NaN and infinite entries ``x`` holds, and the first one: for error messages.

    ``inf * 0`` is NaN inside a computation; the message says what the *input* holds.
    """
    if _is_tensor(x):
        a = x.detach()
        nan, inf = int(a.isnan().sum()), int(a.isinf().sum())
        where = tuple(int(i) for i in (~a.isfinite()).nonzero()[0].tolist())
        value = float(a[where]) if where else float(a)
    else:
        a = np.asarray(x)
        nan, inf = int(np.isnan(a).sum()), int(np.isinf(a).sum())
        where = tuple(int(i) for i in np.argwhere(~np.isfinite(a))[0])
        value = float(a[where])
    infinite = "1 infinite entry" if inf == 1 else f"{inf} infinite entries"
    if nan and inf:
        counts = f"{nan} NaN and {infinite}"
    elif nan:
        counts = f"{nan} NaN and no infinite entry"
    else:
        counts = f"{infinite} and no NaN"
    return f"{counts}; the first, {value}, at index {where}"


def require_finite(x: Any, name: str) -> None:
    """Raise ``ValueError`` if ``x`` (array or tensor) holds NaN or an infinity.

    The message says how many of each, and where the first is, e.g.
    ``z contains NaN or infinite values (1 infinite entry and no NaN; the first, inf, at
    index (0,))``.
    """
    if not all_finite(x):
        raise ValueError(f"{name} contains NaN or infinite values ({_nonfinite_detail(x)})")


#: The most entries a table built from sizes alone may hold (2**31: 16 GiB in float64). A
#: positions table that big is a wrong argument far more often than a wish; numpy would
#: otherwise raise ``MemoryError`` or, where the system overcommits memory, start swapping.
MAX_TABLE_ENTRIES = 2**31


@contextlib.contextmanager
def building_table(call: str, sizes: dict[str, int], shape: tuple[int, ...]) -> Iterator[None]:
    """``with building_table(call, sizes, shape):`` guards building a table from sizes alone.

    On entry, raise ``ValueError`` if the table would hold more than
    :data:`MAX_TABLE_ENTRIES`; inside, turn a ``MemoryError`` into a ``ValueError``. Both
    messages name the call and the sizes that set the shape (``sinusoidal_positions(n=...,
    d=4) needs a table of shape (..., 4): 320,000,000,000 bytes ...``).
    """
    entries = int(np.prod(shape, dtype=object))
    args = ", ".join(f"{k}={v}" for k, v in sizes.items())
    what = f"{call}({args}) needs a table of shape {shape}: {8 * entries:,} bytes"
    advice = "ask for fewer positions or a smaller width"
    if entries > MAX_TABLE_ENTRIES:
        raise ValueError(
            f"{what} ({8 * entries / 2**30:.1f} GiB), more than the {MAX_TABLE_ENTRIES:,} "
            f"entries (16 GiB) attnlab builds at once; {advice}"
        )
    try:
        yield
    except MemoryError as error:
        raise ValueError(f"{what}, more than this machine's memory ({error}); {advice}") from None


def require_finite_logits(
    logits: Any,
    what: str = "logits",
    *,
    cause: str | None = None,
    inputs: str = "the inputs",
    inputs_checked: bool = True,
) -> None:
    """Raise ``ValueError`` if ``logits`` are not finite.

    Call it after checking the inputs with :func:`require_finite` (``inputs_checked``): a
    non-finite logit then means the product overflowed the dtype (easy in float16, whose
    largest number is 65504), which a softmax would otherwise read as masking (silent zeros)
    or turn into NaN. The message is ``the {what} overflowed in {dtype} ({cause}); compute in
    float32 or float64, or rescale {inputs}``; ``cause`` defaults to the dtype's largest
    number. With ``inputs_checked=False`` the message names both possible causes.
    """
    if all_finite(logits):
        return
    name = dtype_name(logits.dtype)
    if not inputs_checked:
        raise ValueError(
            f"the {what} contain NaN or infinite values: an input holds NaN or inf, or "
            f"the {what} overflowed in {name}; check the inputs, compute in float32 or "
            f"float64, or rescale {inputs}"
        )
    if cause is None:
        try:
            cause = f"the largest number in {name} is {float(np.finfo(name).max):g}"
        except TypeError:  # bfloat16: numpy does not know it
            cause = f"too big for {name}"
    raise ValueError(
        f"the {what} overflowed in {name} ({cause}); compute in float32 or float64, "
        f"or rescale {inputs}"
    )


#: The cause named when ``q kᵀ`` overflows, in numpy and torch alike.
QK_OVERFLOW = {"cause": "largest |q|·|k| is too big for this dtype", "inputs": "q and k"}


def check_tensor(
    t: Any, name: str, layout: str, min_ndim: int = 1, like: Any = None, like_name: str = ""
) -> None:
    """The always-on checks of a torch input: type, float dtype, rank, dtype/device of ``like``.

    While :func:`check_values` is on, also :func:`require_finite`. ``like`` is a tensor the
    input must agree with in dtype and device (a module's weight, or another input, named by
    ``like_name`` in the message).

    Raises
    ------
    TypeError
        If ``t`` is not a torch tensor (a numpy array: ``torch.from_numpy`` first).
    ValueError
        If ``t`` is not floating point, has fewer than ``min_ndim`` axes, differs from
        ``like`` in dtype or device, or (checks on) holds NaN or inf.
    """
    if not _is_tensor(t):
        raise TypeError(
            f"{name} must be a torch.Tensor of shape {layout}, got {type(t).__name__}"
            + ("; convert with torch.from_numpy" if isinstance(t, np.ndarray) else "")
        )
    if not t.is_floating_point():
        raise ValueError(f"{name} must be a floating-point tensor, got dtype {t.dtype}")
    if t.ndim < min_ndim:
        raise ValueError(f"{name} must have shape {layout}, got shape {shape_of(t)}")
    if like is not None and (t.dtype != like.dtype or t.device != like.device):
        what = like_name or "the module's parameters or the other inputs"
        raise ValueError(
            f"{name} is {t.dtype} on {t.device} but must match {like.dtype} on {like.device} "
            f"({what}); convert with .to(...)"
        )
    if values_checked():
        require_finite(t, name)


_STATE = {"check_values": os.environ.get("ATTNLAB_CHECK_VALUES", "") not in ("", "0")}


def values_checked() -> bool:
    """Whether the torch modules check values (non-finite inputs, overflowing logits) now."""
    return _STATE["check_values"]


class check_values:  # noqa: N801 - used like a function, as torch.set_grad_enabled
    """Turn the value checks of the torch modules on or off (exported as ``attnlab.nn``).

    Shape, dtype and size checks always run in ``attnlab.nn`` (they read only shapes, no
    device synchronisation). Value checks (a NaN or infinite input, logits that overflow the
    dtype) must look at every number, which on a GPU waits for the device; they are off by
    default and on with ``attnlab.nn.check_values(True)``, inside
    ``with attnlab.nn.check_values():``, or with the environment variable
    ``ATTNLAB_CHECK_VALUES=1``. When on, the torch modules raise the same ``ValueError`` as
    the numpy core instead of returning NaN. The numpy core always checks.

    Parameters
    ----------
    enabled : bool, optional
        On (default) or off. As a plain call the setting stays; as a ``with`` block it is
        restored on exit.

    Raises
    ------
    TypeError
        If ``enabled`` is not a bool.

    Examples
    --------
    >>> import torch
    >>> import attnlab.nn as ann
    >>> q = torch.tensor([[float("nan"), 0.0]])
    >>> with ann.check_values():  # doctest: +ELLIPSIS
    ...     ann.scaled_dot_product_attention(q, q, q)
    Traceback (most recent call last):
    ...
    ValueError: q contains NaN or infinite values (1 NaN and no infinite entry; the first, ...)
    >>> ann.values_checked()
    False
    """

    def __init__(self, enabled: bool = True) -> None:
        if not isinstance(enabled, bool):
            raise TypeError(f"enabled must be True or False, got {enabled!r}")
        self._previous = _STATE["check_values"]
        _STATE["check_values"] = enabled

    def __enter__(self) -> check_values:
        return self

    def __exit__(self, *exc: object) -> None:
        _STATE["check_values"] = self._previous


def result_dtype(*arrays: np.ndarray) -> np.dtype:
    """The float dtype a computation on ``arrays`` should return (numpy's promotion rules)."""
    return np.result_type(*arrays)
