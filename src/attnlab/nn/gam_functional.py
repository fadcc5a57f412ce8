"""GAM's logits in torch: the signed power and ``ε = Σ_l A_l f(Y) B f(Y)ᵀ`` (chapter 08).

The functional half of :mod:`attnlab.nn.gam` (Pandya 2022): :func:`~attnlab.nn.gam.signed_power`
and :func:`~attnlab.nn.gam.gam_logits`, the torch twins of the numpy ones in :mod:`attnlab.gam`,
batched over sequences and over any leading axes of the brains ``B``. The fused path that
never forms the ``n × n`` logits is in :mod:`attnlab.nn.gam_fused`; the trainable module in
:mod:`attnlab.nn.gam`, which re-exports every name here (and documents it).
"""

from __future__ import annotations

import torch
from torch import Tensor

from attnlab._validate import (
    check_float,
    check_tensor,
    require_finite_logits,
    require_nonempty,
    shape_of,
    values_checked,
)
from attnlab.gam_power import _check_power, _is_integer

__all__ = ["signed_power", "gam_logits"]


def signed_power(x: Tensor, n1: float) -> Tensor:
    """``x**n1`` for integer ``n1``, else ``sign(x) * |x|**n1``; torch twin of the numpy one.

    The rule and its reasons are in :func:`attnlab.gam.signed_power`.

    The gradient at ``x = 0`` is set to zero for non-integer powers (for ``0 < n1 < 1`` the
    true derivative is infinite there, and autograd would return NaN).

    Parameters
    ----------
    x : torch.Tensor
        Real numbers.
    n1 : float
        Positive exponent.

    Returns
    -------
    torch.Tensor
        Same shape as ``x``.

    Shapes
    ------
    ``x (...)`` → ``(...)``.

    Raises
    ------
    ValueError
        If ``n1`` is not a positive finite number.
    TypeError
        If ``n1`` is not one real number (a tensor, an array, a complex number, a bool).

    Examples
    --------
    >>> import torch
    >>> from attnlab.nn.gam import signed_power
    >>> signed_power(torch.tensor([-4.0, 0.0, 9.0]), 0.5)
    tensor([-2.,  0.,  3.])
    """
    n1 = _check_power(n1)
    if _is_integer(n1):
        return x ** int(n1)
    size = x.abs()
    nonzero = size > 0
    # Raise a safe base (1 where x = 0) so that no inf/NaN enters the backward pass.
    safe = torch.where(nonzero, size, torch.ones_like(size))
    return torch.where(nonzero, torch.sign(x) * safe**n1, torch.zeros_like(x))


def _terms(f: str, n1: float, coeffs: Tensor | None) -> list[tuple[Tensor | None, float]]:
    """The terms ``(A_l or None, power)`` of the feature function; checks ``f`` and ``coeffs``."""
    if f == "power":
        if coeffs is not None:
            raise ValueError('coeffs is only used with f="poly"; for f="power" give n1')
        return [(None, check_float(n1, "n1"))]
    if f == "poly":
        if coeffs is None:
            raise ValueError('f="poly" needs coeffs of shape (L,) or (L, ...), L >= 1')
        check_tensor(coeffs, "coeffs", "(L,) or (L, ...)", min_ndim=1)
        if coeffs.shape[0] == 0:
            raise ValueError('f="poly" needs coeffs of shape (L,) or (L, ...), L >= 1')
        return [(coeffs[i], float(i + 1)) for i in range(coeffs.shape[0])]
    raise ValueError(f'f must be "power" or "poly", got {f!r}')


def _check_y_b(y: Tensor, b: Tensor) -> None:
    """Raise ``ValueError`` unless ``y`` is ``(batch, n, M)`` and ``b`` is ``(..., M, M)``."""
    check_tensor(y, "y", "(batch, n, M)", min_ndim=3)
    check_tensor(b, "b", "(..., M, M)", min_ndim=2, like=y)
    if y.dim() != 3:
        raise ValueError(f"y must have shape (batch, n, M), got shape {tuple(y.shape)}")
    require_nonempty({"y": y})
    m = y.shape[-1]
    if m == 0:  # as the numpy twin says it
        raise ValueError(f"y must be a non-empty sequence (batch, n, M), got shape {shape_of(y)}")
    if b.dim() < 2 or b.shape[-2:] != (m, m):
        raise ValueError(
            f"b must have shape (..., M, M) with M={m} (the width of y {tuple(y.shape)}), "
            f"got shape {tuple(b.shape)}"
        )


def gam_logits(
    y: Tensor,
    b: Tensor,
    *,
    f: str = "power",
    n1: float = 1.0,
    coeffs: Tensor | None = None,
    what: str = "logits",
) -> Tensor:
    """Batched GAM logits ``ε = Σ_l A_l Y^{∘l} B (Y^{∘l})ᵀ`` (eq. 16–18 of Pandya 2022).

    Parameters
    ----------
    y : torch.Tensor
        A batch of sequences, one element per row.
    b : torch.Tensor
        The brains' matrices; any leading axes (for example ``(h, N_B)``) are kept.
    f : str
        ``"power"`` (power law ``(y_r y_t)^{n1}``) or ``"poly"`` (``Σ_l A_l (y_r y_t)^l``).
    n1 : float
        Exponent of the power law.
    coeffs : torch.Tensor, optional
        ``(A_1, ..., A_L)`` for ``f="poly"``: shape ``(L,)``, or ``(L, *c)`` with ``c``
        broadcastable to ``b``'s leading axes (per-head coefficients); a tensor of ``y``'s
        dtype and device (a list is a ``TypeError``: ``torch.tensor(coeffs)`` first).

    Returns
    -------
    torch.Tensor
        The logits; rows are the elements that attend.

    Shapes
    ------
    ``y (batch, n, M)``, ``b (N_B, M, M)`` → ``(batch, N_B, n, n)``; in general
    ``b (*lead, M, M)`` → ``(batch, *lead, n, n)``.

    Raises
    ------
    ValueError
        On mismatched ``M``, a ``y`` that is not 3-D, an unknown ``f`` or bad ``coeffs``
        (empty, 0-D, not floating point, or another dtype or device than ``y``).
    TypeError
        If ``coeffs`` is not a tensor, or ``n1`` is not one real number.

    Examples
    --------
    >>> import torch
    >>> from attnlab.nn import gam_logits
    >>> y = torch.tensor([[[1.0, -1.0], [2.0, 0.0]]])          # batch 1, n = 2, M = 2
    >>> gam_logits(y, torch.eye(2).unsqueeze(0), n1=2)[0, 0]
    tensor([[ 2.,  4.],
            [ 4., 16.]])
    """
    _check_y_b(y, b)
    if coeffs is not None and isinstance(coeffs, Tensor):
        check_tensor(coeffs, "coeffs", "(L,) or (L, ...)", min_ndim=1, like=y, like_name="y")
    m = y.shape[-1]
    terms = _terms(f, n1, coeffs)
    lead = b.shape[:-2]
    batch, n = y.shape[0], y.shape[1]
    eps = None
    for a_l, p in terms:
        g = signed_power(y, p).reshape(batch, *([1] * len(lead)), n, m)  # (batch, 1.., n, M)
        term = (g @ b) @ g.transpose(-1, -2)  # (batch, *lead, n, n)
        if a_l is not None:
            term = a_l[..., None, None] * term
        eps = term if eps is None else eps + term
    if values_checked():  # the inputs were checked: a non-finite logit is an overflow
        require_finite_logits(eps, what=what)
    return eps
