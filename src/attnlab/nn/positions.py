"""Relative positions in PyTorch (chapter 09): Shaw et al. (2018) and GAM (Pandya 2022).

* :class:`ShawRelativeAttention`: multi-head self-attention with two learned tables
  ``a^K``, ``a^V`` of ``2 k_max + 1`` vectors each, indexed by the key's distance ``j - i``
  from the query clipped to ``[-k_max, k_max]`` and shared by all heads.
* :class:`GAMRelativeAttention`: the relative-position branch of the generalized attention
  mechanism (eq. 20–29), mixed with content attention either linearly (``c_1``) or by a
  geometric mean.

Tensors are ``batch_first``; boolean masks say ``True`` where a query may attend.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from attnlab.gam import gam_init_std
from attnlab.nn.attention import masked_softmax
from attnlab.nn.gam import GeneralizedAttention, gam_logits
from attnlab.positions import relative_position_index

REL_EMBEDDINGS = ("none", "scaled", "layernorm")
"""The choices of :class:`GAMRelativeAttention`'s ``rel_embedding`` (the paper fixes none)."""


def _prepare_mask(mask: Tensor, logits_shape: torch.Size) -> Tensor:
    """Return ``mask`` broadcastable to ``(batch, h, s, s)`` (a 3-D mask gains a head axis)."""
    if mask.dtype != torch.bool:
        raise ValueError(f"mask must be boolean (True = may attend), got dtype {mask.dtype}")
    if mask.dim() == 3:
        mask = mask.unsqueeze(1)
    try:
        full = torch.broadcast_shapes(mask.shape, logits_shape)
    except RuntimeError:
        full = None
    if mask.dim() not in (2, 4) or full != logits_shape:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} must be (s, s), (batch, s, s) or "
            f"(batch, h, s, s) broadcastable to the logits {tuple(logits_shape)}"
        )
    return mask


class ShawRelativeAttention(nn.Module):
    """Multi-head self-attention with Shaw et al.'s clipped relative position representations.

    For each head, with ``q = x W^Q``, ``k = x W^K``, ``v = x W^V`` split into ``h`` heads of
    width ``d_k = d / h`` and ``a^K_ij = rel_k[clip(j - i, -k_max, k_max) + k_max]`` (likewise
    ``a^V``),

    ``e_ij = q_i · (k_j + a^K_ij) / sqrt(d_k)``, ``α = softmax_j(e)``,
    ``z_i = Σ_j α_ij (v_j + a^V_ij)``,

    and the heads are concatenated and projected by ``W^O``. The two tables have
    ``2 k_max + 1`` rows of width ``d_k`` and are shared by all heads, as in the paper; a
    sequence of any length works, because every distance beyond ``k_max`` reuses the end rows.

    Parameters
    ----------
    d : int
        Model width.
    h : int
        Number of heads; must divide ``d``.
    k_max : int
        Clipping distance, ``k_max >= 0``.
    bias : bool
        Whether the four projections have biases (``False`` by default, as in the equations).

    Attributes
    ----------
    w_q, w_k, w_v, w_o : torch.nn.Linear
        Projections ``(d → d)``; ``nn.Linear`` stores its weight as ``(out, in)``.
    rel_k, rel_v : torch.nn.Embedding
        The tables ``a^K`` and ``a^V``, weights of shape ``(2 k_max + 1, d_k)``, initialised
        ``N(0, 1/d_k)``.

    Shapes
    ------
    ``x (batch, s, d)``, ``mask`` ``(s, s)``, ``(batch, s, s)`` or ``(batch, h, s, s)`` →
    ``out (batch, s, d)``, ``weights (batch, h, s, s)``.

    Raises
    ------
    ValueError
        At construction if ``d``, ``h`` or ``k_max`` is not an integer, ``h`` does not divide
        ``d`` or ``k_max < 0``; in ``forward`` if ``x`` is not ``(batch, s, d)`` or the mask is not
        boolean or has the wrong shape.

    Examples
    --------
    >>> import torch
    >>> from attnlab.nn import ShawRelativeAttention
    >>> _ = torch.manual_seed(0)
    >>> layer = ShawRelativeAttention(d=8, h=2, k_max=3)
    >>> out, w = layer(torch.randn(4, 10, 8))
    >>> tuple(out.shape), tuple(w.shape), bool(torch.allclose(w.sum(-1), torch.ones(4, 2, 10)))
    ((4, 10, 8), (4, 2, 10, 10), True)
    """

    def __init__(self, d: int, h: int, k_max: int, *, bias: bool = False) -> None:
        super().__init__()
        for name, value in (("d", d), ("h", h), ("k_max", k_max)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name} must be an integer, got {name}={value!r}")
        if d < 1 or h < 1 or d % h:
            raise ValueError(f"h must be a positive divisor of d: got d={d}, h={h}")
        if k_max < 0:
            raise ValueError(f"the clipping distance k_max must be >= 0, got k_max={k_max}")
        self.d, self.h, self.k_max, self.d_k = d, h, k_max, d // h
        self.w_q = nn.Linear(d, d, bias=bias)
        self.w_k = nn.Linear(d, d, bias=bias)
        self.w_v = nn.Linear(d, d, bias=bias)
        self.w_o = nn.Linear(d, d, bias=bias)
        self.rel_k = nn.Embedding(2 * k_max + 1, self.d_k)
        self.rel_v = nn.Embedding(2 * k_max + 1, self.d_k)
        for table in (self.rel_k, self.rel_v):
            nn.init.normal_(table.weight, std=self.d_k**-0.5)

    def relative_tables(self, s: int) -> tuple[Tensor, Tensor]:
        """The per-pair vectors ``a^K_ij`` and ``a^V_ij`` for a sequence of length ``s``.

        Shapes
        ------
        ``→ (s, s, d_k)`` each.
        """
        index = relative_position_index(s, self.k_max)
        index = torch.as_tensor(index, device=self.rel_k.weight.device)
        return self.rel_k(index), self.rel_v(index)

    def _split(self, t: Tensor) -> Tensor:
        """``(batch, s, d) → (batch, h, s, d_k)``."""
        batch, s, _ = t.shape
        return t.view(batch, s, self.h, self.d_k).transpose(1, 2)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Attend; return the output ``(batch, s, d)`` and weights ``(batch, h, s, s)``."""
        if x.dim() != 3 or x.shape[-1] != self.d or x.shape[1] == 0:
            raise ValueError(
                f"x must have shape (batch, s, d) with d={self.d} and s >= 1, got {tuple(x.shape)}"
            )
        batch, s, _ = x.shape
        q, k, v = self._split(self.w_q(x)), self._split(self.w_k(x)), self._split(self.w_v(x))
        a_k, a_v = self.relative_tables(s)
        logits = q @ k.transpose(-2, -1) + torch.einsum("bhid,ijd->bhij", q, a_k)
        if mask is not None:
            mask = _prepare_mask(mask, logits.shape)
        weights = masked_softmax(logits / math.sqrt(self.d_k), mask)
        z = weights @ v + torch.einsum("bhij,ijd->bhid", weights, a_v)
        out = self.w_o(z.transpose(1, 2).reshape(batch, s, self.d))
        return out, weights


def gam_relative_vectors(positions: Tensor) -> Tensor:
    """GAM's relative position vectors in torch: ``r[..., α, i] = |p_α - p_i| + 1``.

    The torch twin of :func:`attnlab.positions.gam_relative_vectors`, batched.

    Shapes
    ------
    ``positions (n,)`` or ``(batch, n)`` integers, strictly increasing along the last axis →
    ``(n, n)`` or ``(batch, n, n)``, same integer dtype.

    Raises
    ------
    ValueError
        If ``positions`` is not an integer tensor of 1 or 2 axes, or is not strictly
        increasing.

    Examples
    --------
    >>> import torch
    >>> from attnlab.nn.positions import gam_relative_vectors
    >>> gam_relative_vectors(torch.tensor([0, 1, 3]))
    tensor([[1, 2, 4],
            [2, 1, 3],
            [4, 3, 1]])
    """
    if positions.dim() not in (1, 2) or positions.shape[-1] == 0:
        raise ValueError(
            f"positions must have shape (n,) or (batch, n), n >= 1, got {tuple(positions.shape)}"
        )
    if positions.dtype.is_floating_point or positions.dtype == torch.bool:
        raise ValueError(f"positions must be integers (corpus indices), got {positions.dtype}")
    if bool((positions.diff(dim=-1) <= 0).any()):
        raise ValueError(
            "positions must be strictly increasing along the sequence (tokens in corpus order, "
            f"no repeats), got {positions.tolist()}"
        )
    return (positions.unsqueeze(-1) - positions.unsqueeze(-2)).abs() + 1


def combine_geometric(z: Tensor, pi: Tensor) -> Tensor:
    """Signed geometric mean ``sign(z) sqrt(z π)`` where ``z π > 0``, else 0 (eq. 25 + rule).

    The same rule as :func:`attnlab.positions.combine_geometric`; the square root is taken of a safe
    value (1) where ``z π <= 0`` so that no NaN enters the backward pass there (the gradient is
    zero in that region). Near ``z π = 0+`` the gradient grows like ``1 / sqrt(z π)``.

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
    product = z * pi
    positive = product > 0
    safe = torch.where(positive, product, torch.ones_like(product))
    return torch.where(positive, torch.sign(z) * torch.sqrt(safe), torch.zeros_like(product))


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

    Shapes
    ------
    ``y (batch, n, d)``; ``positions (n,)`` or ``(batch, n)`` integers (default
    ``0 … n-1``); ``mask`` broadcastable to ``(batch, n, n)`` → ``out (batch, n, d)``,
    ``(phi, theta)`` each ``(batch, h, n, n)``.

    Raises
    ------
    ValueError
        At construction on ``n < 1``, ``c1`` outside ``(0, 1)``, an unknown ``combine`` or
        ``rel_embedding`` (or
        as :class:`~attnlab.nn.gam.GeneralizedAttention`); in ``forward`` on an input whose length
        is not ``n`` or positions that are not strictly increasing.

    Examples
    --------
    >>> import torch
    >>> from attnlab.nn import GAMRelativeAttention
    >>> _ = torch.manual_seed(0)
    >>> layer = GAMRelativeAttention(d=8, n=5, h=2, n_brains=2)
    >>> out, (phi, theta) = layer(torch.randn(3, 5, 8), positions=torch.tensor([0, 1, 4, 5, 9]))
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
    ) -> None:
        super().__init__()
        if rel_embedding not in REL_EMBEDDINGS:
            choices = ", ".join(repr(c) for c in REL_EMBEDDINGS)
            raise ValueError(f"rel_embedding must be one of {choices}, got {rel_embedding!r}")
        if n < 1:
            raise ValueError(f"the sequence length n must be >= 1, got n={n}")
        if combine not in ("linear", "geometric"):
            raise ValueError(f'combine must be "linear" or "geometric", got {combine!r}')
        if combine == "linear" and not (math.isfinite(c1) and 0.0 < c1 < 1.0):
            raise ValueError(f"c1 must lie strictly between 0 and 1 (eq. 20), got c1={c1}")
        self.content = GeneralizedAttention(d, h, n_brains, f=f, n1=n1, degree=degree, bias=bias)
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
        if positions.shape[-1] != self.n:
            raise ValueError(
                f"this module was built for sequences of length n={self.n} (the input size of "
                f"the embedding of r^α); got {positions.shape[-1]} positions"
            )
        r = gam_relative_vectors(positions).to(self.embed.weight.dtype)
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
        delta = gam_logits(p, self.b_p, f=self.content.f, n1=self.content.n1, coeffs=coeffs)
        if mask is None:
            xi = torch.softmax(delta, dim=-1)  # (batch, h, N_B, n, n)
        else:
            m = mask.unsqueeze(-3).unsqueeze(-3)
            delta = torch.where(m, delta, torch.finfo(delta.dtype).min)
            xi = torch.softmax(delta, dim=-1) * m
        return torch.einsum("bhinm,hi->bhnm", xi, self.mix_s_weights.to(xi.dtype))

    def forward(
        self, y: Tensor, positions: Tensor | None = None, mask: Tensor | None = None
    ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """Attend; return ``out (batch, n, d)`` and ``(Φ, Θ)``, each ``(batch, h, n, n)``."""
        if y.dim() != 3 or y.shape[1] != self.n or y.shape[2] != self.d:
            raise ValueError(
                f"y must have shape (batch, n={self.n}, d={self.d}) (the module is built for "
                f"one sequence length n), got {tuple(y.shape)}"
            )
        if positions is None:
            positions = torch.arange(self.n, device=y.device)
        _, phi = self.content(y, mask)  # validates the mask; (batch, h, n, n)
        theta = self.position_weights(positions, mask)
        batch = y.shape[0]
        theta = theta.expand(batch, -1, -1, -1)
        v = self.content.value(y).reshape(batch, self.n, self.h, self.d // self.h).transpose(1, 2)
        z, pi = phi @ v, theta @ v  # (batch, h, n, d_v)
        if self.combine == "linear":
            total = self.c1 * z + (1.0 - self.c1) * pi
        else:
            total = combine_geometric(z, pi)
        out = self.content.out_proj(total.transpose(1, 2).reshape(batch, self.n, self.d))
        return out, (phi, theta)
