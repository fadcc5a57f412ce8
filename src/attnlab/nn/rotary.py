"""Rotary position embeddings, RoPE (Su et al. 2021), in PyTorch (chapters 09 and 11).

The torch twin of :mod:`attnlab.positions`: the pair ``i`` of the query or key at
position ``p`` is turned by the angle ``p θ_i``, ``θ_i = base^(-2i/d)``, so that the score
``q_p · k_r`` depends on the offset ``r - p`` only. Two pair layouts, as in the numpy module:
``"interleaved"`` ``(2i, 2i+1)`` (Su et al., GPT-J, Meta's LLaMA code) and ``"half"``
``(i, i + d/2)`` (GPT-NeoX, Hugging Face's LLaMA).

* :func:`apply_rotary`: rotate one tensor ``x (..., n, d)``.
* :class:`RotaryEmbedding`: a parameter-free module that rotates a pair ``(q, k)`` of shape
  ``(batch, heads, n, d_k)``, caching the cosines and sines of the last length it saw.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnlab._validate import check_tensor, shape_of
from attnlab.positions.rotary import (
    check_positions_shape,
    check_rotary_args,
    require_even_width,
    rotary_frequencies,
)

__all__ = ["apply_rotary", "RotaryEmbedding"]


def _angle_dtype(device: torch.device) -> torch.dtype:
    """``float64`` for the angles where the device has it (not on Apple's MPS)."""
    return torch.float32 if device.type == "mps" else torch.float64


def _positions(positions: object, x: Tensor) -> Tensor:
    """``positions`` as an integer tensor on ``x``'s device; ``None`` → ``0, …, n-1``."""
    n = x.shape[-2]
    if positions is None:
        return torch.arange(n, device=x.device)
    if not isinstance(positions, Tensor):
        try:
            positions = torch.as_tensor(positions, device=x.device)
        except (ValueError, TypeError, RuntimeError) as error:
            raise ValueError(f"positions cannot be read as a tensor of integers: {error}") from None
    if positions.dtype == torch.bool or positions.is_floating_point() or positions.is_complex():
        raise TypeError(
            f"positions must hold integers (token positions), got dtype {positions.dtype}; "
            "booleans and floats are not positions"
        )
    if positions.device != x.device:
        raise ValueError(
            f"positions is on {positions.device} but x is on {x.device}; convert with .to(...)"
        )
    check_positions_shape(shape_of(positions), shape_of(x))
    return positions


def _cos_sin(pos: Tensor, d: int, base: float, like: Tensor) -> tuple[Tensor, Tensor]:
    """``cos`` and ``sin`` of the angles ``pos θ_i``, shape ``pos.shape + (d // 2,)``.

    The angles are computed in ``float64`` (``float32`` on MPS), then cast to ``like``'s dtype.
    """
    wide = _angle_dtype(like.device)
    freqs = torch.as_tensor(rotary_frequencies(d, base), dtype=wide, device=like.device)
    angles = pos.to(wide)[..., None] * freqs
    return angles.cos().to(like.dtype), angles.sin().to(like.dtype)


def _as_complex(x: Tensor) -> Tensor:
    """The interleaved pairs of ``x (..., n, d)`` as complex numbers ``(..., n, d/2)``: a view."""
    pairs = x.unflatten(-1, (x.shape[-1] // 2, 2))
    try:
        return torch.view_as_complex(pairs)
    except RuntimeError:  # a view whose strides or offset are odd: copy it first
        return torch.view_as_complex(pairs.contiguous())


def _rotate(x: Tensor, cos: Tensor, sin: Tensor, layout: str) -> Tensor:
    """Turn the pairs of ``x (..., n, d)`` by the angles whose ``cos``, ``sin`` are given."""
    if layout == "interleaved" and x.dtype in (torch.float32, torch.float64) and (
        x.device.type != "mps"
    ):
        # The pair (a, b) is the complex number a + ib, and turning it by φ multiplies it by
        # e^{iφ} = cos φ + i sin φ (Su et al.'s own statement): one multiplication, forward and
        # backward, instead of the six real operations below (a third of the time on a CPU).
        turned = _as_complex(x) * torch.complex(cos, sin)
        return torch.view_as_real(turned).flatten(-2)
    if layout == "interleaved":  # half precision, or Apple's MPS: the real form
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)


def _check_x(x: Tensor, name: str, base: float, layout: str) -> None:
    """The checks :func:`apply_rotary` runs on one input (named ``name`` in messages)."""
    check_tensor(x, name, "(..., n, d)", min_ndim=2)
    require_even_width(shape_of(x), name)
    check_rotary_args(x.shape[-1], base, layout)


def apply_rotary(
    x: Tensor,
    positions: Tensor | None = None,
    base: float = 10000.0,
    layout: str = "interleaved",
) -> Tensor:
    """Rotate ``x`` by its positions (RoPE); torch twin of :func:`attnlab.positions.apply_rotary`.

    For the token at position ``p`` and each pair ``(a, b)`` of coordinates, with
    ``φ = p θ_i`` and ``θ_i = base^(-2i/d)``: ``a' = a cos φ - b sin φ``,
    ``b' = a sin φ + b cos φ``. Differentiable in ``x``; the result has ``x``'s dtype and
    device (the angles are computed in ``float64``, except on MPS).

    Parameters
    ----------
    x : torch.Tensor
        Queries or keys, floating point; the last axis is rotated in pairs.
    positions : torch.Tensor of int, optional
        Token positions on ``x``'s device (a list of ints is accepted too): shape ``(n,)`` or
        any shape ending in ``n`` that broadcasts against ``x.shape[:-1]``, for example
        ``(batch, 1, n)`` for ``x (batch, h, n, d)``. Default ``0, 1, …, n-1``.
    base : float
        The wavelength base (10000 in the paper), positive.
    layout : str
        ``"interleaved"`` for pairs ``(2i, 2i+1)`` or ``"half"`` for ``(i, i + d/2)``.

    Returns
    -------
    torch.Tensor
        The rotated tensor.

    Shapes
    ------
    ``x (..., n, d)``, ``positions (n,)`` or ``(..., n)`` → ``(..., n, d)``.

    Raises
    ------
    ValueError
        If ``x`` is not floating point, has fewer than 2 axes or an odd last axis; if
        ``positions`` has the wrong shape or device; if ``base`` is not a positive finite
        number or ``layout`` is unknown; with :func:`attnlab.nn.check_values` on, if ``x``
        holds NaN or inf.
    TypeError
        If ``x`` is not a tensor, ``positions`` does not hold integers, ``layout`` is not a
        string or ``base`` is not a real number.

    Examples
    --------
    >>> import torch
    >>> from attnlab.nn import apply_rotary
    >>> x = torch.tensor([[1.0, 0.0], [1.0, 0.0]])   # the same vector at positions 0 and 1
    >>> apply_rotary(x)
    tensor([[1.0000, 0.0000],
            [0.5403, 0.8415]])
    """
    _check_x(x, "x", base, layout)
    pos = _positions(positions, x)
    cos, sin = _cos_sin(pos, x.shape[-1], float(base), x)
    return _rotate(x, cos, sin, layout)


class RotaryEmbedding(nn.Module):
    """Rotary position embeddings for a pair of queries and keys (no parameters).

    ``RotaryEmbedding(d_k)(q, k)`` returns ``(apply_rotary(q), apply_rotary(k))`` with the
    module's ``base`` and ``layout``; apply it to each head's queries and keys after the
    projections and before the scores ``q kᵀ / sqrt(d_k)``, never to the values. The cosines
    and sines of the default positions ``0, …, n-1`` are cached for the last
    ``(n, device, dtype)`` seen (not saved in the ``state_dict``).

    Parameters
    ----------
    d : int
        The per-head width ``d_k`` of ``q`` and ``k``; even, ``>= 2``.
    base : float
        The wavelength base, positive (10000 in the paper).
    layout : str
        ``"interleaved"``: pairs ``(2i, 2i+1)`` (Su et al., GPT-J, Meta's LLaMA code);
        ``"half"``: ``(i, i + d/2)``
        (GPT-NeoX, Hugging Face's LLaMA).

    Shapes
    ------
    ``q (batch, heads, n, d_k)``, ``k (batch, heads_k, n, d_k)`` (any leading axes work),
    ``positions (n,)`` or ``(batch, 1, n)`` → ``(q', k')`` of the same shapes.

    Raises
    ------
    ValueError
        At construction if ``d`` is odd or below 2, ``base`` is not a positive finite number or
        ``layout`` is unknown; in ``forward`` if ``q`` or ``k`` does not end in ``d``, they
        differ in length ``n``, dtype or device, or ``positions`` has the wrong shape.
    TypeError
        At construction if ``d`` is not an integer, ``base`` not a real number or ``layout``
        not a string; in ``forward`` if ``q`` or ``k`` is not a tensor, or ``positions`` does
        not hold integers.

    Examples
    --------
    >>> import torch
    >>> from attnlab.nn import RotaryEmbedding
    >>> rope = RotaryEmbedding(8)
    >>> q, k = torch.randn(2, 4, 5, 8), torch.randn(2, 4, 5, 8)
    >>> q2, k2 = rope(q, k)
    >>> q2.shape, bool(torch.allclose(q2.norm(dim=-1), q.norm(dim=-1), atol=1e-5))
    (torch.Size([2, 4, 5, 8]), True)
    """

    def __init__(self, d: int, base: float = 10000.0, layout: str = "interleaved") -> None:
        super().__init__()
        self.d, self.base, self.layout = check_rotary_args(d, base, layout)
        self._cache: tuple[tuple, Tensor, Tensor] | None = None

    def extra_repr(self) -> str:
        return f"d={self.d}, base={self.base:g}, layout={self.layout!r}"

    def _check(self, t: Tensor, name: str, like: Tensor | None) -> None:
        check_tensor(t, name, "(batch, heads, n, d_k)", min_ndim=2, like=like, like_name="q")
        if t.shape[-1] != self.d:
            raise ValueError(
                f"{name} must end in d_k = {self.d} (this RotaryEmbedding's d), "
                f"got shape {shape_of(t)}"
            )

    def _default_cos_sin(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Cached ``cos``, ``sin`` for the positions ``0, …, n-1`` of ``x``."""
        # Tensors made under inference_mode cannot enter autograd later: cache them apart.
        key = (x.shape[-2], x.device, x.dtype, torch.is_inference_mode_enabled())
        if self._cache is None or self._cache[0] != key:
            pos = torch.arange(x.shape[-2], device=x.device)
            self._cache = (key, *_cos_sin(pos, self.d, self.base, x))
        return self._cache[1], self._cache[2]

    def forward(
        self, q: Tensor, k: Tensor, positions: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """Rotate ``q`` and ``k`` by the same positions; see the class docstring."""
        self._check(q, "q", None)
        self._check(k, "k", q)
        if q.shape[-2] != k.shape[-2]:
            raise ValueError(
                f"q and k must have the same length n to share positions: q has shape "
                f"{shape_of(q)}, k has shape {shape_of(k)}; rotate each with "
                "attnlab.nn.apply_rotary and its own positions"
            )
        if positions is None:
            cos, sin = self._default_cos_sin(q)
        else:
            pos = _positions(positions, q)
            _positions(positions, k)  # the same positions must fit k's leading axes too
            cos, sin = _cos_sin(pos, self.d, self.base, q)
        return _rotate(q, cos, sin, self.layout), _rotate(k, cos, sin, self.layout)
