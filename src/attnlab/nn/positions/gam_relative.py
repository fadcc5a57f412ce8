"""GAM's relative-position branch (Pandya 2022, eq. 20–29) as a trainable layer (ch. 09).

:class:`GAMRelativeAttention` mixes content attention
(:class:`attnlab.nn.gam.GeneralizedAttention`) with attention by relative corpus position,
linearly (``c_1``) or by a signed geometric mean (:func:`combine_geometric`);
:func:`gam_relative_vectors` gives the vectors ``r^α``.
Tensors are ``batch_first``; boolean masks say ``True`` where a query may attend.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from attnlab._validate import (
    check_bool,
    check_float,
    check_int,
    check_tensor,
    require_finite_logits,
    shape_of,
    values_checked,
)
from attnlab.gam import gam_init_std
from attnlab.nn.gam import GeneralizedAttention, gam_fused_heads, gam_logits
from attnlab.nn.gam_fused import _checked_mask
from attnlab.nn.multihead import _check_tokens

REL_EMBEDDINGS = ("none", "scaled", "layernorm")
"""The choices of :class:`GAMRelativeAttention`'s ``rel_embedding`` (the paper fixes none)."""


def gam_relative_vectors(positions: Tensor) -> Tensor:
    """GAM's relative position vectors in torch: ``r[..., α, i] = |p_α - p_i| + 1``.

    The torch twin of :func:`attnlab.positions.gam_relative_vectors`, batched.

    Shapes
    ------
    ``positions (n,)`` or ``(batch, n)`` integers, strictly increasing along the last axis →
    ``(n, n)`` or ``(batch, n, n)``, ``int64``.

    Raises
    ------
    ValueError
        If ``positions`` is not an integer tensor of 1 or 2 axes, or is not strictly
        increasing.
    TypeError
        If ``positions`` is not a torch tensor.

    Examples
    --------
    >>> import torch
    >>> from attnlab.nn.positions import gam_relative_vectors
    >>> gam_relative_vectors(torch.tensor([0, 1, 3]))
    tensor([[1, 2, 4],
            [2, 1, 3],
            [4, 3, 1]])
    """
    if not isinstance(positions, Tensor):
        raise TypeError(
            f"positions must be a torch.Tensor of integers, got {type(positions).__name__} "
            "(torch.as_tensor(positions) converts a list or numpy array)"
        )
    if positions.dim() not in (1, 2) or positions.shape[-1] == 0:
        raise ValueError(
            f"positions must have shape (n,) or (batch, n), n >= 1, got {tuple(positions.shape)}"
        )
    if (
        positions.dtype.is_floating_point
        or positions.dtype.is_complex
        or positions.dtype == torch.bool
    ):
        raise ValueError(f"positions must be integers (corpus indices), got {positions.dtype}")
    # In int64, so that an unsigned difference cannot wrap around (uint8: 1 - 3 = 254 > 0).
    positions = positions.to(torch.int64)
    if bool((positions.diff(dim=-1) <= 0).any()):
        raise ValueError(
            "positions must be strictly increasing along the sequence (tokens in corpus order, "
            f"no repeats), got {positions.tolist()}"
        )
    return (positions.unsqueeze(-1) - positions.unsqueeze(-2)).abs() + 1


def combine_geometric(z: Tensor, pi: Tensor) -> Tensor:
    """Signed geometric mean ``sign(z) sqrt(z π)`` where ``z π > 0``, else 0 (eq. 25 + rule).

    The same rule as :func:`attnlab.positions.combine_geometric`, computed as
    ``sqrt|z| · sqrt|π|`` so that it is finite wherever ``z`` and ``π`` are (``z π`` itself
    overflows float16 at 300 · 300); the square roots are taken of a safe value (1) where
    ``z π <= 0`` so that no NaN enters the backward pass there (the gradient is zero in that
    region). Near ``z = 0`` the gradient in ``z`` grows like ``sqrt|π| / (2 sqrt|z|)``.

    Shapes
    ------
    ``z (...)``, ``pi (...)`` → ``(...)``.

    Examples
    --------
    >>> import torch
    >>> from attnlab.nn.positions import combine_geometric
    >>> combine_geometric(torch.tensor([4.0, -4.0, 4.0]), torch.tensor([1.0, -1.0, -1.0]))
    tensor([ 2., -2.,  0.])
    """
    check_tensor(z, "z", "(...)")
    check_tensor(pi, "pi", "(...)", like=z)
    if z.shape != pi.shape:
        raise ValueError(f"z and pi must have the same shape, got {shape_of(z)} and {shape_of(pi)}")
    positive = torch.sign(z) * torch.sign(pi) > 0  # not z * pi > 0: the product may overflow
    one = torch.ones_like(z)
    # sqrt|z| · sqrt|π| (finite wherever z and π are), of safe values (1) off the region
    root = torch.sqrt(torch.where(positive, z.abs(), one)) * torch.sqrt(
        torch.where(positive, pi.abs(), one)
    )
    return torch.where(positive, torch.sign(z) * root, torch.zeros_like(z))


class GAMRelativeAttention(nn.Module):
    """GAM with its relative-position branch (Pandya 2022, eq. 13–29), multi-head.

    Content branch: a :class:`attnlab.nn.gam.GeneralizedAttention` (brains ``B``, mixing ``W^P``,
    value projection ``W^V``, output ``W_O``) gives per head ``z_a = Φ_a (y W^V_a)``.
    Position branch, per head ``a``:

    1. ``r^α = |p_α - p_i| + 1`` from the tokens' corpus positions (eq. 27–29);
    2. ``p^α = r^α W^R + b^R``, a learned linear embedding ``R^n → R^d`` (eq. 26), with the
       normalisation chosen by ``rel_embedding`` (below);
    3. ``δ_{a,i} = Σ_rt f(p^α_r p^β_t) (B^P_{a,i})_rt`` with the same feature function
       (:func:`attnlab.nn.gam.gam_logits`), ``ξ = softmax(δ)``, ``Θ_a = Σ_i W^S_{a,i} ξ_{a,i}``
       with ``W^S = softmax(free parameters)`` (non-negative, sums to one, like ``W^P``);
    4. ``π_a = Θ_a (y W^V_a)``, the same values as the content branch (eq. 21).

    The two are combined per head before ``W_O``: ``c1 z + (1 - c1) π`` (eq. 20, ``c1`` a
    fixed hyperparameter in ``(0, 1)``) or the signed geometric mean (eq. 25 with the rule of
    :func:`combine_geometric`).

    **How r^α is embedded** (``rel_embedding``). The paper does not specify how the integer
    vectors ``r^α`` (entries ``1 … n``, and more when the positions have gaps) become ``p^α``;
    every choice here is the book's, not Pandya's. Three are offered, none with extra
    parameters (so parameter counts do not depend on the choice):

    * ``"none"`` (default): ``p^α = r^α W^R + b^R`` on the raw integers. With PyTorch's
      default initialisation of ``W^R`` the entries of ``p`` have a standard deviation of
      several units, while ``B^P`` is initialised (:func:`attnlab.gam.gam_init_std`) for
      unit-variance inputs.
    * ``"scaled"``: ``p^α = (r^α / n) W^R + b^R``, the integers scaled to about unit range.
    * ``"layernorm"``: ``p^α = LayerNorm(r^α W^R + b^R)`` without learned gain or bias, so
      each row of ``p`` has mean 0 and variance 1 (the scale is left to ``B^P``).

    **How the module fixes n.** ``r^α`` has one entry per token of the sequence, so the
    embedding's input size is the sequence length: the module is built for one length ``n``
    and rejects any other. Shorter inputs must be padded to ``n`` (and the padding masked);
    longer ones cannot be processed without new weights. This is the price of GAM's
    whole-row position vectors; Shaw's clipped tables have no such limit.

    Parameters
    ----------
    d : int
        Width of the elements (``M``) and of the output.
    n : int
        The sequence length the module is built for.
    h : int
        Number of heads, must divide ``d``.
    n_brains : int
        ``N_B`` content brains and as many positional brains per head.
    f, n1, degree
        Feature function, as in :class:`attnlab.nn.gam.GeneralizedAttention`.
    combine : str
        ``"linear"`` (eq. 20) or ``"geometric"`` (eq. 25).
    c1 : float
        Content weight of the linear combination, ``0 < c1 < 1``.
    bias : bool
        Biases of the value and output projections.
    rel_embedding : str
        How ``r^α`` is embedded: ``"none"``, ``"scaled"`` or ``"layernorm"`` (see above).
    recompute : bool
        On the fused path, recompute each content and position brain in the backward pass
        instead of storing it, as in :class:`~attnlab.nn.gam.GeneralizedAttention`.
    tiled : bool
        Without weights, run both branches' brains through :func:`~attnlab.nn.tiled.tiled_attention`
        (the tiled path of :class:`~attnlab.nn.gam.GeneralizedAttention`, with its default
        tiles). Default ``False``.

    Attributes
    ----------
    embed : torch.nn.Linear
        ``W^R`` and ``b^R`` (``n → d``); ``nn.Linear`` stores the weight as ``(d, n)``.
    b_p : torch.nn.Parameter
        The positional brains ``B^P``, ``(h, N_B, d, d)``, initialised like ``content.b``.
    mix_s_logits : torch.nn.Parameter
        ``(h, N_B)``, zeros at first; ``W^S`` is their softmax, ``mix_s_weights``.
    content : attnlab.nn.gam.GeneralizedAttention
        The content branch: brains ``content.b``, mixing ``content.mix_logits``, value and
        output projections ``content.value`` and ``content.out_proj`` (``d → d``).

    Shapes
    ------
    ``y (batch, n, d)``; ``positions (n,)`` or ``(batch, n)`` integers (default
    ``0 … n-1``); ``mask`` broadcastable to ``(batch, n, n)`` → ``out (batch, n, d)``, and
    with ``need_weights=True`` also ``(phi, theta)``, each ``(batch, h, n, n)``.

    Raises
    ------
    ValueError
        At construction on ``n < 1``, ``c1`` outside ``(0, 1)``, an unknown ``combine`` or
        ``rel_embedding`` (or
        as :class:`~attnlab.nn.gam.GeneralizedAttention`); in ``forward`` on an input whose length
        is not ``n`` or positions that are not strictly increasing. While
        :func:`attnlab.nn.check_values` is on, also on position logits that overflow the dtype
        (as :func:`attnlab.positions.gam_position_weights` always does).
    TypeError
        At construction if ``n`` is not an integer or ``c1`` not a real number (a bool is
        neither); in ``forward`` if ``need_weights`` is not a bool (``1`` is not ``True``).

    Examples
    --------
    >>> import torch
    >>> from attnlab.nn import GAMRelativeAttention
    >>> _ = torch.manual_seed(0)
    >>> layer = GAMRelativeAttention(d=8, n=5, h=2, n_brains=2)
    >>> y, positions = torch.randn(3, 5, 8), torch.tensor([0, 1, 4, 5, 9])
    >>> tuple(layer(y, positions).shape)                          # fused path, output only
    (3, 5, 8)
    >>> out, (phi, theta) = layer(y, positions, need_weights=True)   # explicit path
    >>> tuple(out.shape), tuple(theta.shape)
    ((3, 5, 8), (3, 2, 5, 5))
    """

    def __init__(
        self,
        d: int,
        n: int,
        h: int = 1,
        n_brains: int = 1,
        f: str = "power",
        n1: float = 1.0,
        degree: int | None = None,
        combine: str = "linear",
        c1: float = 0.5,
        bias: bool = True,
        rel_embedding: str = "none",
        recompute: bool = False,
        tiled: bool = False,
    ) -> None:
        super().__init__()
        if rel_embedding not in REL_EMBEDDINGS:
            choices = ", ".join(repr(c) for c in REL_EMBEDDINGS)
            raise ValueError(f"rel_embedding must be one of {choices}, got {rel_embedding!r}")
        n = check_int(n, "n (the sequence length)")
        if combine not in ("linear", "geometric"):
            raise ValueError(f'combine must be "linear" or "geometric", got {combine!r}')
        c1 = check_float(c1, "c1", positive=False)
        if combine == "linear" and not 0.0 < c1 < 1.0:
            raise ValueError(f"c1 must lie strictly between 0 and 1 (eq. 20), got c1={c1}")
        self.content = GeneralizedAttention(
            d, h, n_brains, f=f, n1=n1, degree=degree, bias=bias, recompute=recompute, tiled=tiled
        )
        self.d, self.n, self.h, self.combine, self.c1 = d, n, h, combine, float(c1)
        self.rel_embedding = rel_embedding
        self.embed = nn.Linear(n, d)  # p^α = r^α W^R + b^R, input size n
        init_coeffs = None
        if degree is not None:
            init_coeffs = [1.0 / math.factorial(power) for power in range(1, degree + 1)]
        std = gam_init_std(d, f=f, n1=n1, coeffs=init_coeffs)
        self.b_p = nn.Parameter(torch.randn(h, n_brains, d, d) * std)
        self.mix_s_logits = nn.Parameter(torch.zeros(h, n_brains))

    @property
    def mix_s_weights(self) -> Tensor:
        """``W^S`` of every head, shape ``(h, N_B)``: non-negative, rows sum to one."""
        return torch.softmax(self.mix_s_logits, dim=-1)

    def embedded_positions(self, positions: Tensor) -> Tensor:
        """``p^α`` from corpus positions, embedded as ``rel_embedding`` says.

        Shapes
        ------
        ``positions (n,)`` or ``(batch, n)`` → ``(n, d)`` or ``(batch, n, d)``.
        """
        r = gam_relative_vectors(positions)  # checks type, rank and order
        if r.shape[-1] != self.n:
            raise ValueError(
                f"this module was built for sequences of length n={self.n} (the input size of "
                f"the embedding of r^α); got {r.shape[-1]} positions"
            )
        r = r.to(device=self.embed.weight.device, dtype=self.embed.weight.dtype)
        if self.rel_embedding == "scaled":
            r = r / self.n
        p = self.embed(r)
        if self.rel_embedding == "layernorm":
            p = F.layer_norm(p, (self.d,))
        return p

    def position_weights(self, positions: Tensor, mask: Tensor | None = None) -> Tensor:
        """``Θ`` of every head, shape ``(batch or 1, h, n, n)``."""
        p = self.embedded_positions(positions)
        if p.dim() == 2:
            p = p.unsqueeze(0)
        coeffs = self.content.coeffs
        delta = gam_logits(
            p,
            self.b_p,
            f=self.content.f,
            n1=self.content.n1,
            coeffs=coeffs,
            what="position logits δ",
        )
        if values_checked():
            require_finite_logits(delta, what="position logits δ")
        if mask is None:
            xi = torch.softmax(delta, dim=-1)  # (batch, h, N_B, n, n)
        else:
            m = mask.unsqueeze(-3).unsqueeze(-3)
            delta = torch.where(m, delta, torch.finfo(delta.dtype).min)
            xi = torch.softmax(delta, dim=-1) * m
        return torch.einsum("bhinm,hi->bhnm", xi, self.mix_s_weights.to(xi.dtype))

    def forward(
        self,
        y: Tensor,
        positions: Tensor | None = None,
        mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> Tensor | tuple[Tensor, tuple[Tensor, Tensor]]:
        """Attend: the output ``out (batch, n, d)``, and with ``need_weights`` ``(Φ, Θ)``.

        ``need_weights=False`` (the default, as in
        :class:`~attnlab.nn.multihead.MultiHeadAttention`) runs both branches through the
        fused kernel (:func:`attnlab.nn.gam.gam_fused_heads`): eq. 20 and eq. 25 combine the
        head outputs ``z = Φ V`` and ``π = Θ V``, not the weights, so neither ``Φ`` nor ``Θ``
        has to exist as an ``n × n`` matrix. ``True`` takes the explicit path and returns the
        weights too. Both paths give the same ``out`` (to rounding).

        Parameters
        ----------
        y : torch.Tensor
            ``(batch, n, d)``, ``n`` the length the module was built for.
        positions : torch.Tensor, optional
            Corpus positions ``(n,)`` or ``(batch, n)``, strictly increasing integers;
            default ``0 … n-1``.
        mask : torch.Tensor of bool, optional
            ``True`` where a query may attend; broadcastable to ``(batch, n, n)``.
        need_weights : bool, optional
            Also return the content and position weights (explicit path).

        Returns
        -------
        out : torch.Tensor
            ``(batch, n, d)``.
        weights : tuple of torch.Tensor
            Only if ``need_weights``: ``(phi, theta)``, each ``(batch, h, n, n)``.
        """
        check_bool(need_weights, "need_weights")
        _check_tokens(y, "y", self.embed.weight, "(batch, n, d)")  # type, dtype, device, values
        if y.dim() != 3 or y.shape[1] != self.n or y.shape[2] != self.d:
            raise ValueError(
                f"y must have shape (batch, n={self.n}, d={self.d}) (the module is built for "
                f"one sequence length n), got {tuple(y.shape)}"
            )
        if positions is None:
            positions = torch.arange(self.n, device=y.device)
        elif isinstance(positions, Tensor) and positions.dim() == 2:
            if positions.shape[0] not in (1, y.shape[0]):
                raise ValueError(
                    f"positions of shape {shape_of(positions)} (batch, n) do not match the "
                    f"batch of y {shape_of(y)}"
                )
        batch = y.shape[0]
        explicit = need_weights or values_checked()  # the value checks need the logits
        z, phi = self.content.heads(y, mask, need_weights=explicit)  # checks the mask
        if explicit:
            theta = self.position_weights(positions, mask).expand(batch, -1, -1, -1)
            v = self.content.value(y).reshape(batch, self.n, self.h, self.d // self.h)
            pi = theta @ v.transpose(1, 2)  # (batch, h, n, d_v), like z
        else:
            p = self.embedded_positions(positions)
            p = p.unsqueeze(0) if p.dim() == 2 else p  # (batch or 1, n, d)
            pi = gam_fused_heads(
                p,
                self.b_p,
                self.mix_s_weights,
                self.content.value(y),
                _checked_mask(mask, batch, self.n, y.device),
                f=self.content.f,
                n1=self.content.n1,
                coeffs=self.content.coeffs,
                recompute=self.content.recompute,
                tiles=self.content.tiles_for(self.n),
            )
        if self.combine == "linear":
            total = self.c1 * z + (1.0 - self.c1) * pi
        else:
            total = combine_geometric(z, pi)
        out = self.content.out_proj(total.transpose(1, 2).reshape(batch, self.n, self.d))
        return (out, (phi, theta)) if need_weights else out
