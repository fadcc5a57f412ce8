"""The Generalized Attention Mechanism (Pandya 2022) as a batched, trainable torch module.

The torch counterpart of ``attnlab.gam`` (chapter 08). Each of the ``h`` heads owns
``N_B`` full ``(d, d)`` matrices ``B`` (its "brains"), mixing weights ``W^P`` on the
probability simplex, and a ``d_v = d / h`` slice of a value projection; the heads' outputs are
concatenated and projected by ``W_O``, as in multi-head attention.

The module is :class:`GeneralizedAttention`. Its parts live one concept per module and are
re-exported here: the logits (:func:`signed_power`, :func:`gam_logits`) in
:mod:`attnlab.nn.gam_functional`, the fused path (:func:`gam_features`,
:func:`gam_fused_heads`) in :mod:`attnlab.nn.gam_fused`.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attnlab._validate import (
    check_bool,
    check_float,
    check_int,
    check_tensor,
    require_nonempty,
    values_checked,
)
from attnlab.gam import gam_init_std
from attnlab.nn.attention import masked_softmax
from attnlab.nn.gam_functional import gam_logits, signed_power
from attnlab.nn.gam_fused import _checked_mask, check_tiles, gam_features, gam_fused_heads

__all__ = [
    "signed_power",
    "gam_logits",
    "gam_features",
    "gam_fused_heads",
    "gam_tiles",
    "GeneralizedAttention",
]

#: The largest tile side of :func:`gam_tiles`: a (512, 512) block of float32 is 1 MiB.
MAX_TILE = 512


def gam_tiles(n: int) -> tuple[int, int]:
    """The default tiles of GAM's tiled path at length ``n``: ``(q_tile, k_tile)``.

    Keys in at least eight tiles (``n // 8`` each, at least 1: a tile as long as the sequence
    would be the explicit computation again), queries in tiles of up to ``MAX_TILE`` (512)
    (fewer, larger blocks: each block costs a dozen PyTorch calls, whatever its size), and keys
    at most ``MAX_TILE`` (512) too, so that the largest temporary, one ``(q_tile, k_tile)``
    block, stays at most 1 MiB in float32 at any ``n``.

    Examples
    --------
    >>> from attnlab.nn.gam import gam_tiles
    >>> gam_tiles(7), gam_tiles(1024), gam_tiles(8192)
    ((7, 1), (512, 128), (512, 512))
    """
    n = check_int(n, "n")
    return min(n, MAX_TILE), min(max(1, n // 8), MAX_TILE)


class GeneralizedAttention(nn.Module):
    """Multi-head GAM: per head ``N_B`` brains ``B (d, d)``, mixed softmaxes, value slices.

    For head ``a`` and brain ``i``: ``ε_{a,i} = Σ_l A_{a,l} Y^{∘l} B_{a,i} (Y^{∘l})ᵀ``,
    ``Ψ_{a,i} = softmax(ε_{a,i})``, ``Φ_a = Σ_i W^P_{a,i} Ψ_{a,i}``, ``z_a = Φ_a (Y W^V_a)``;
    the output is ``concat_a(z_a) W_O``.

    Parameters
    ----------
    d : int
        Width of the elements (``M`` in the paper) and of the output.
    h : int
        Number of heads; must divide ``d`` (each head's values have ``d_v = d / h``).
    n_brains : int
        ``N_B``, brains per head.
    f : str
        Feature function, ``"power"`` or ``"poly"``.
    n1 : float
        Exponent of the power law (a fixed hyperparameter).
    degree : int, optional
        ``L`` for ``f="poly"``; the coefficients ``A_l`` (one set per head, shared by its
        brains) are learned, initialised at ``1 / l!``.
    mix : str
        ``"learned"``: ``W^P = softmax(w)`` of free parameters ``w`` (zero at start, so
        uniform), which keeps ``W^P`` non-negative and summing to one; ``"uniform"``: fixed
        ``1 / N_B``.
    bias : bool
        Biases on the value and output projections.
    recompute : bool
        On the fused path, recompute each brain's attention in the backward pass
        (``torch.utils.checkpoint``) instead of keeping its queries and output: less memory for
        one more forward pass of attention (see :func:`gam_fused_heads`). Default ``False``.
    tiled : bool
        Without weights, take the *tiled* path instead of the fused one: each brain through
        :func:`~attnlab.nn.tiled.tiled_attention` with its own ``d / h`` value columns, keeping only
        its output and log-sum-exp for the backward pass (appendix A1). Default ``False``.
    tiles : tuple of int, optional
        ``(q_tile, k_tile)`` of the tiled path; default :func:`gam_tiles` of each input's
        length.

    Shapes
    ------
    ``y (batch, n, d)``, ``mask`` broadcastable to ``(batch, n, n)`` → ``out (batch, n, d)``,
    and with ``need_weights=True`` also ``weights (batch, h, n, n)``.

    Raises
    ------
    ValueError
        If ``h`` does not divide ``d``, ``n_brains < 1``, ``tiled`` and ``recompute`` are both
        ``True``, ``tiles`` is given without ``tiled``, ``f``/``n1``/``degree`` do not fit
        together, or ``mix`` is not ``"learned"``/``"uniform"``; in ``forward``, on a ``y`` that
        is not ``(batch, n, d)`` or a mask that is not boolean, does not broadcast or lies on
        another device than ``y``.
    TypeError
        If ``recompute`` or ``tiled`` is not a bool, ``tiles`` not a pair of ints or ``degree``
        not an integer (``2.5``, ``True``); in
        ``forward`` (and :meth:`heads`), if ``need_weights``
        is not a bool (``1`` is not ``True``) or the mask is not a tensor.

    Notes
    -----
    The paper writes ``W^P_i`` and ``A_l`` without a head index; here each head has its own
    (``h (N_B + L)`` numbers), so heads may mix their brains differently. ``B`` is initialised
    with independent normal entries of standard deviation :func:`attnlab.gam.gam_init_std`, which
    gives logits of unit variance for inputs with independent standard-normal entries.

    Examples
    --------
    >>> import torch
    >>> from attnlab.nn import GeneralizedAttention
    >>> _ = torch.manual_seed(0)
    >>> gam = GeneralizedAttention(d=8, h=2, n_brains=3, n1=2)
    >>> y = torch.randn(4, 5, 8)
    >>> out, w = gam(y, need_weights=True)              # explicit path, returns Φ
    >>> tuple(out.shape), tuple(w.shape), round(float(w.detach().sum(-1).mean()), 4)
    ((4, 5, 8), (4, 2, 5, 5), 1.0)
    >>> bool(torch.allclose(gam(y), out, atol=1e-5))    # fused path: same output, no Φ
    True
    """

    def __init__(
        self,
        d: int,
        h: int,
        n_brains: int = 1,
        f: str = "power",
        n1: float = 1.0,
        degree: int | None = None,
        mix: str = "learned",
        bias: bool = True,
        recompute: bool = False,
        tiled: bool = False,
        tiles: tuple[int, int] | None = None,
    ) -> None:
        super().__init__()
        d, h, n_brains = check_int(d, "d"), check_int(h, "h"), check_int(n_brains, "n_brains")
        if d % h:
            raise ValueError(f"h must divide d (d={d}, h={h}); both must be positive")
        if mix not in ("learned", "uniform"):
            raise ValueError(f'mix must be "learned" or "uniform", got {mix!r}')
        if f == "power":
            if degree is not None:
                raise ValueError('degree is only used with f="poly"')
            n1 = check_float(n1, "n1")
            init_coeffs = None
            self.coeffs = None
        elif f == "poly":
            if degree is None:
                raise ValueError(f'f="poly" needs an integer degree >= 1, got {degree}')
            degree = check_int(degree, "degree")  # 2.5 or True is a TypeError, 0 a ValueError
            init_coeffs = [1.0 / math.factorial(k) for k in range(1, degree + 1)]
            start = torch.tensor(init_coeffs).reshape(degree, 1, 1).repeat(1, h, 1)
            self.coeffs = nn.Parameter(start)  # (L, h, 1): broadcasts over (h, N_B)
        else:
            raise ValueError(f'f must be "power" or "poly", got {f!r}')
        check_bool(recompute, "recompute")
        check_bool(tiled, "tiled")
        if tiled and recompute:
            raise ValueError("tiled=True and recompute=True are two ways to save memory; pick one")
        if tiles is not None:
            if not tiled:
                raise ValueError("tiles are the tiled path's; pass tiled=True with them")
            tiles = check_tiles(tiles)
        self.tiled, self.tiles = tiled, tiles
        self.d, self.h, self.n_brains, self.f, self.n1 = d, h, n_brains, f, float(n1)
        self.recompute = recompute
        std = gam_init_std(d, f=f, n1=n1, coeffs=init_coeffs)
        self.b = nn.Parameter(torch.randn(h, n_brains, d, d) * std)
        if mix == "learned":
            self.mix_logits = nn.Parameter(torch.zeros(h, n_brains))
        else:
            self.register_buffer("mix_logits", torch.zeros(h, n_brains))
        self.value = nn.Linear(d, d, bias=bias)
        self.out_proj = nn.Linear(d, d, bias=bias)

    @property
    def mix_weights(self) -> Tensor:
        """``W^P`` of every head, shape ``(h, N_B)``: non-negative, rows sum to one."""
        return torch.softmax(self.mix_logits, dim=-1)

    def logits(self, y: Tensor) -> Tensor:
        """The logits ``ε`` of every head and brain, shape ``(batch, h, N_B, n, n)``."""
        return gam_logits(y, self.b, f=self.f, n1=self.n1, coeffs=self.coeffs)

    def forward(
        self, y: Tensor, mask: Tensor | None = None, need_weights: bool = False
    ) -> Tensor | tuple[Tensor, Tensor]:
        """Attend: the output ``(batch, n, d)``, and with ``need_weights`` the weights ``Φ``.

        ``mask`` (bool, ``True`` = may attend) broadcasts to ``(batch, n, n)``; a row whose
        keys are all masked gets zero weights, so its head outputs are zero (before
        ``W_O``'s bias). ``need_weights=False`` (as in ``MultiHeadAttention``) takes the fused
        path of :meth:`heads`, which stores no ``n × n`` matrix but the mask's; ``True`` the
        explicit one, which returns ``Φ (batch, h, n, n)`` too. While
        :func:`attnlab.nn.check_values` is on, the explicit path runs either way (the checks
        look at the logits), and only the output is returned unless ``need_weights``.
        """
        z, phi = self.heads(y, mask, need_weights=need_weights)
        batch, n, _ = y.shape
        out = self.out_proj(z.transpose(1, 2).reshape(batch, n, self.d))
        return (out, phi) if need_weights else out

    def heads(
        self, y: Tensor, mask: Tensor | None = None, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """Every head's output ``z_a = Φ_a (y W^V_a)`` before ``W_O``, and ``Φ`` if asked.

        Explicit path (``need_weights=True``): all logits ``(batch, h, N_B, n, n)``, masked
        softmax, mix, product with the values. Fused path (``False``): by
        :func:`gam_features`, ``z_a = Σ_i W^P_{a,i} SDPA(f(Y) B_{a,i}, f(Y), V_a)`` with scale 1,
        through ``torch.nn.functional.scaled_dot_product_attention``, one brain at a time,
        whose kernels keep ``O(n)`` memory per brain (recomputed in the backward pass if the
        layer was built with ``recompute=True``). Both give the same numbers (to rounding).

        Shapes
        ------
        ``y (batch, n, d)``, ``mask`` broadcastable to ``(batch, n, n)`` →
        ``z (batch, h, n, d / h)``, ``phi (batch, h, n, n)`` or ``None``.
        """
        check_bool(need_weights, "need_weights")
        check_tensor(y, "y", f"(batch, n, {self.d})", min_ndim=3, like=self.b)
        if y.dim() != 3 or y.shape[-1] != self.d:
            raise ValueError(f"y must have shape (batch, n, {self.d}), got {tuple(y.shape)}")
        require_nonempty({"y": y})
        batch, n, _ = y.shape
        mask = _checked_mask(mask, batch, n, y.device)
        need_weights = need_weights or values_checked()  # the value checks need the logits
        values = self.value(y)  # (batch, n, d): head a owns columns a·d_v … (a+1)·d_v - 1
        if not need_weights:
            return self._fused_heads(y, mask, values), None
        eps = self.logits(y)  # (batch, h, N_B, n, n)
        if mask is not None:
            mask = mask.unsqueeze(-3).unsqueeze(-3)  # (batch or 1, 1, 1, n, n), like eps
        psi = masked_softmax(eps, mask)
        phi = torch.einsum("bhinm,hi->bhnm", psi, self.mix_weights.to(psi.dtype))
        v = values.reshape(batch, n, self.h, self.d // self.h).transpose(1, 2)
        return phi @ v, phi

    def _fused_heads(
        self, y: Tensor, mask: Tensor | None, values: Tensor, pad: bool | None = None
    ) -> Tensor:
        """The fused path of :meth:`heads` (:func:`gam_fused_heads` with this layer's brains)."""
        return gam_fused_heads(
            y, self.b, self.mix_weights, values, mask,
            f=self.f, n1=self.n1, coeffs=self.coeffs, pad=pad, recompute=self.recompute,
            tiles=self.tiles_for(y.shape[-2]),
        )  # fmt: skip

    def tiles_for(self, n: int) -> tuple[int, int] | None:
        """The ``(q_tile, k_tile)`` this layer uses at length ``n``, or ``None`` (not tiled)."""
        if not self.tiled:
            return None
        return self.tiles if self.tiles is not None else gam_tiles(n)

    @torch.no_grad()
    def load_multihead_attention(self, mha: nn.MultiheadAttention) -> None:
        """Copy an ``nn.MultiheadAttention`` into this module: ``B_a = W_Q^a (W_K^a)ᵀ / √d_k``.

        Needs one brain, ``f="power"``, ``n1=1``, the same ``d`` and ``h``, and zero query and
        key biases (a bias adds terms linear in ``y`` that ``y B yᵀ`` cannot express). The
        value and output projections are copied (``nn.Linear`` stores ``(out, in)``, as does
        ``in_proj_weight``). Afterwards both modules compute the same function.
        """
        if (self.n_brains, self.f, self.n1) != (1, "power", 1.0):
            raise ValueError("only a one-brain GAM with f = identity (power n1 = 1) is MHA")
        if (mha.embed_dim, mha.num_heads) != (self.d, self.h) or not mha.batch_first:
            raise ValueError(
                f"need batch_first MHA with d={self.d}, h={self.h}; got "
                f"d={mha.embed_dim}, h={mha.num_heads}, batch_first={mha.batch_first}"
            )
        d, d_k = self.d, self.d // self.h
        if mha.in_proj_weight is None:
            raise ValueError("MHA with separate q/k/v sizes (kdim, vdim) is not supported")
        w = mha.in_proj_weight  # (3d, d) in (out, in) layout
        w_q, w_k, w_v = w[:d].T, w[d : 2 * d].T, w[2 * d :]  # w_q, w_k now (in, out)
        if mha.in_proj_bias is not None and bool(mha.in_proj_bias[: 2 * d].abs().max() > 0):
            raise ValueError("query/key biases are not zero: y B yᵀ cannot express them")
        for a in range(self.h):
            cols = slice(a * d_k, (a + 1) * d_k)
            self.b[a, 0] = w_q[:, cols] @ w_k[:, cols].T / math.sqrt(d_k)
        self.value.weight.copy_(w_v)
        self.out_proj.weight.copy_(mha.out_proj.weight)
        for mine, theirs in (
            (self.value.bias, None if mha.in_proj_bias is None else mha.in_proj_bias[2 * d :]),
            (self.out_proj.bias, mha.out_proj.bias),
        ):
            if (mine is None) != (theirs is None):
                raise ValueError("bias settings of the two modules differ")
            if mine is not None:
                mine.copy_(theirs)
