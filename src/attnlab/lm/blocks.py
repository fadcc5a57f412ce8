"""The parts of a decoder block: RMSNorm, two MLPs and causal multi-head self-attention.

Pre-norm decoder blocks (GPT-2, Radford et al. 2019; Xiong et al. 2020) apply
``x + attention(norm(x))`` then ``x + mlp(norm(x))``. Today's small models make three choices
in them that this module offers beside the 2017 ones:

* :class:`RMSNorm` (Zhang and Sennrich 2019) beside ``nn.LayerNorm``: divide by the root mean
  square of the features, no mean subtraction, no bias.
* :class:`SwiGLU` (Shazeer 2020) beside the GELU MLP (:class:`GELUMLP`): a gated
  MLP, ``(silu(x W_1) ⊙ x W_3) W_2``.
* bias-free projections everywhere.

:class:`CausalSelfAttention` computes its heads either with the book's
:func:`attnlab.nn.attention.scaled_dot_product_attention` and an explicit boolean lower-triangular
mask (``attention="book"``: the weights can be returned and plotted), or with PyTorch's
``F.scaled_dot_product_attention(..., is_causal=True)`` (``attention="sdpa"``), which knows
the mask is causal without reading one and may therefore use its fused kernels.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab._validate import check_float, check_int, shape_of
from attnlab.nn.attention import scaled_dot_product_attention

__all__ = ["RMSNorm", "GELUMLP", "SwiGLU", "CausalSelfAttention", "causal_mask", "ATTENTIONS"]

#: How :class:`CausalSelfAttention` computes its heads.
ATTENTIONS = ("book", "sdpa")


def causal_mask(n: int, device: torch.device | str | None = None) -> Tensor:
    """The causal mask: ``mask[i, j] = j <= i`` (query ``i`` may attend to keys up to itself).

    Shapes
    ------
    ``→ (n, n)`` bool.

    Examples
    --------
    >>> from attnlab.lm.blocks import causal_mask
    >>> causal_mask(3).int()
    tensor([[1, 0, 0],
            [1, 1, 0],
            [1, 1, 1]], dtype=torch.int32)
    """
    n = check_int(n, "n")
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


class RMSNorm(nn.Module):
    """Root-mean-square norm: ``x / sqrt(mean(x²) + eps) · g`` over the last axis.

    Parameters
    ----------
    d : int
        Features.
    eps : float
        Added to the mean square.

    Shapes
    ------
    ``x (..., d)`` → ``(..., d)``.

    Examples
    --------
    >>> import torch
    >>> from attnlab.lm.blocks import RMSNorm
    >>> RMSNorm(2, eps=0.0)(torch.tensor([[3.0, 4.0]]))    # rms = sqrt(12.5)
    tensor([[0.8485, 1.1314]], grad_fn=<MulBackward0>)
    """

    def __init__(self, d: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.d = check_int(d, "d")
        self.eps = check_float(eps, "eps", positive=False)
        if self.eps < 0:
            raise ValueError(f"eps must not be negative, got {eps}")
        self.weight = nn.Parameter(torch.ones(self.d))

    def forward(self, x: Tensor) -> Tensor:
        rms = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return x * rms * self.weight

    def extra_repr(self) -> str:
        return f"d={self.d}, eps={self.eps}"


class GELUMLP(nn.Module):
    """The 2017-style MLP: ``gelu(x W_1) W_2``, hidden width ``hidden``, no biases.

    Shapes
    ------
    ``x (..., d)`` → ``(..., d)``; ``W_1 (d, hidden)``, ``W_2 (hidden, d)``.
    """

    def __init__(self, d: int, hidden: int) -> None:
        super().__init__()
        self.up = nn.Linear(check_int(d, "d"), check_int(hidden, "hidden"), bias=False)
        self.down = nn.Linear(hidden, d, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.down(F.gelu(self.up(x)))


class SwiGLU(nn.Module):
    """The gated MLP of today's models: ``(silu(x W_1) ⊙ x W_3) W_2``, no biases.

    With ``hidden = 8d/3`` it has the parameters of a GELU MLP of hidden width ``4d``.

    Shapes
    ------
    ``x (..., d)`` → ``(..., d)``; ``W_1, W_3 (d, hidden)``, ``W_2 (hidden, d)``.
    """

    def __init__(self, d: int, hidden: int) -> None:
        super().__init__()
        self.gate = nn.Linear(check_int(d, "d"), check_int(hidden, "hidden"), bias=False)
        self.up = nn.Linear(d, hidden, bias=False)
        self.down = nn.Linear(hidden, d, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.down(F.silu(self.gate(x)) * self.up(x))


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention in which token ``i`` sees tokens ``0 … i`` only.

    Parameters
    ----------
    d : int
        Model width.
    h : int
        Heads; must divide ``d`` (``d_k = d / h``).
    attention : str
        ``"book"``: :func:`attnlab.nn.attention.scaled_dot_product_attention` with the boolean
        :func:`causal_mask`; ``"sdpa"``: ``F.scaled_dot_product_attention(is_causal=True)``.
    rotary : torch.nn.Module, optional
        A rotary embedding ``rotary(q, k) -> (q, k)`` on ``(b, h, n, d_k)`` applied to the
        queries and keys before the scores (``attnlab.nn.rotary.RotaryEmbedding(d_k)``).

    Shapes
    ------
    ``x (b, n, d)`` → ``(b, n, d)``; with ``need_weights`` also ``weights (b, h, n, n)``.
    Inside: ``W_qkv (d, 3d)`` → ``q, k, v (b, h, n, d_k)``, ``W_o (d, d)``.

    Raises
    ------
    TypeError
        If a size is not an integer.
    ValueError
        If ``h`` does not divide ``d`` or ``attention`` is unknown; in ``forward``, if ``x``
        is not ``(b, n, d)`` or ``need_weights`` is asked of the ``"sdpa"`` path.

    Examples
    --------
    >>> import torch
    >>> from attnlab.lm.blocks import CausalSelfAttention
    >>> _ = torch.manual_seed(0)
    >>> attn = CausalSelfAttention(d=16, h=4)
    >>> out, w = attn(torch.randn(2, 5, 16), need_weights=True)
    >>> tuple(out.shape), tuple(w.shape), bool((w[0, 0].triu(1) == 0).all())
    ((2, 5, 16), (2, 4, 5, 5), True)
    """

    def __init__(
        self, d: int, h: int, attention: str = "book", rotary: nn.Module | None = None
    ) -> None:
        super().__init__()
        d, h = check_int(d, "d"), check_int(h, "h")
        if d % h:
            raise ValueError(f"h={h} heads must divide the model width d={d}")
        if attention not in ATTENTIONS:
            raise ValueError(f"attention must be one of {ATTENTIONS}, got {attention!r}")
        self.d, self.h, self.d_k = d, h, d // h
        self.attention = attention
        self.qkv = nn.Linear(d, 3 * d, bias=False)  # [W_q | W_k | W_v], no biases
        self.out = nn.Linear(d, d, bias=False)
        self.rotary = rotary
        self._mask = torch.zeros(0, 0, dtype=torch.bool)

    def _causal(self, n: int, device: torch.device) -> Tensor:
        """The ``(n, n)`` causal mask, cached (made once per length and device)."""
        if self._mask.shape[0] < n or self._mask.device != device:
            self._mask = causal_mask(n, device=device)
        return self._mask[:n, :n]

    def forward(self, x: Tensor, need_weights: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        if not isinstance(x, Tensor):
            raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
        if x.dim() != 3 or x.shape[-1] != self.d or x.shape[1] == 0:
            raise ValueError(f"x must have shape (b, n >= 1, d={self.d}), got {shape_of(x)}")
        b, n, _ = x.shape
        q, k, v = (
            self.qkv(x).reshape(b, n, 3, self.h, self.d_k).permute(2, 0, 3, 1, 4).unbind(0)
        )  # three (b, h, n, d_k)
        if self.rotary is not None:
            q, k = self.rotary(q, k)
        if self.attention == "book":
            heads, weights = scaled_dot_product_attention(q, k, v, mask=self._causal(n, x.device))
        else:
            if need_weights:
                raise ValueError("need_weights needs attention='book' (sdpa keeps no weights)")
            heads = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out = self.out(heads.transpose(1, 2).reshape(b, n, self.d))  # (b, n, d)
        return (out, weights) if need_weights else out

    def extra_repr(self) -> str:
        return f"d={self.d}, h={self.h}, d_k={self.d_k}, attention={self.attention!r}"
