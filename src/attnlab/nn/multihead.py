"""One attention head and multi-head self-attention in PyTorch (chapters 05–06).

:class:`AttentionHead` is a single head with its own query, key and value projections.
:class:`MultiHeadAttention` runs ``h`` such heads at once from three ``(d, d)`` projections,
split into ``h`` blocks of ``d_k = d / h`` columns, and mixes the heads with an output
projection. Its weights convert exactly, both ways, to and from
``torch.nn.MultiheadAttention(batch_first=True)``.

Masks follow the book (``True`` = may attend; a query with no allowed key gets zero weights
and a zero head output). ``torch.nn.MultiheadAttention`` uses the opposite boolean convention
(``True`` = masked out) and returns NaN for such a query; :func:`to_torch_attn_mask` inverts
a mask explicitly.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab._validate import (
    check_bool,
    check_int,
    check_tensor,
    require_nonempty,
    shape_of,
    values_checked,
)
from attnlab.nn.attention import _check_mask, _require_bool_mask, scaled_dot_product_attention


def _check_tokens(t: Tensor, name: str, weight: Tensor, layout: str) -> None:
    """Type, dtype and device of a token tensor against the module's ``weight``."""
    check_tensor(t, name, layout, min_ndim=2, like=weight)


def to_torch_attn_mask(mask: Tensor) -> Tensor:
    """Turn a book mask (``True`` = may attend) into an ``attn_mask`` for ``nn.MultiheadAttention``.

    ``torch.nn.MultiheadAttention`` reads a boolean ``attn_mask`` the other way round: ``True``
    means *not allowed*. Passing a book mask unchanged silently attends to exactly the wrong
    keys, so the conversion is a visible logical not.

    Parameters
    ----------
    mask : torch.Tensor of bool
        ``True`` where a query may attend.

    Returns
    -------
    torch.Tensor of bool
        ``True`` where a query may *not* attend.

    Shapes
    ------
    ``(s_q, s_k)`` → ``(s_q, s_k)`` (any shape is kept).

    Raises
    ------
    TypeError
        If ``mask`` is not a torch tensor (a numpy mask: ``torch.from_numpy(mask)`` first).
    ValueError
        If ``mask`` is not boolean.

    Examples
    --------
    >>> import torch
    >>> from attnlab.nn import to_torch_attn_mask
    >>> causal = torch.tril(torch.ones(2, 2, dtype=torch.bool))   # may attend to the past
    >>> to_torch_attn_mask(causal)                                # torch: True = blocked
    tensor([[False,  True],
            [False, False]])
    """
    _require_bool_mask(mask)
    return ~mask


class AttentionHead(nn.Module):
    """One self-attention head: project, score, scale by ``1/sqrt(head_size)``, softmax, mix.

    Parameters
    ----------
    hidden_size : int
        Width ``d`` of the input tokens.
    head_size : int
        Width ``d_k = d_v`` of this head's queries, keys and values.
    bias : bool, optional
        Give the three projections a bias (default ``True``).

    Shapes
    ------
    ``x (..., s, hidden_size)``, ``mask`` broadcastable to ``(..., s, s)`` →
    ``output (..., s, head_size)``, ``probabilities (..., s, s)``.

    Raises
    ------
    TypeError
        If a size is not an integer (a bool is not), or ``x`` is not a tensor.
    ValueError
        If a size is not positive, or (in ``forward``) if ``x`` has the wrong width, dtype or
        device, is an empty sequence, or (with :func:`attnlab.nn.check_values`) is not finite.

    Examples
    --------
    >>> import torch
    >>> from attnlab.nn import AttentionHead
    >>> _ = torch.manual_seed(0)
    >>> head = AttentionHead(hidden_size=48, head_size=12)
    >>> out, p = head(torch.randn(2, 16, 48))          # 2 images of 16 patch tokens
    >>> out.shape, p.shape, bool(torch.allclose(p.sum(-1), torch.ones(2, 16)))
    (torch.Size([2, 16, 12]), torch.Size([2, 16, 16]), True)
    """

    def __init__(self, hidden_size: int, head_size: int, bias: bool = True) -> None:
        super().__init__()
        hidden_size = check_int(hidden_size, "hidden_size")
        head_size = check_int(head_size, "head_size")
        self.hidden_size = hidden_size
        self.head_size = head_size
        self.query = nn.Linear(hidden_size, head_size, bias=bias)
        self.key = nn.Linear(hidden_size, head_size, bias=bias)
        self.value = nn.Linear(hidden_size, head_size, bias=bias)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Attend over ``x``; return ``(output, probabilities)`` (see the class docstring)."""
        _check_tokens(x, "x", self.query.weight, "(..., s, hidden_size)")
        if x.shape[-1] != self.hidden_size:
            raise ValueError(
                f"x must have last size hidden_size={self.hidden_size}, got shape {shape_of(x)}"
            )
        require_nonempty({"x": x})
        return scaled_dot_product_attention(self.query(x), self.key(x), self.value(x), mask=mask)


class MultiHeadAttention(nn.Module):
    """Multi-head self-attention, batch first, with the book's mask convention.

    The query, key and value projections are ``nn.Linear(d, d)`` layers whose ``d`` output
    features are cut into ``h`` blocks of ``d_k = d / h``: block ``i`` is head ``i``. The heads
    attend independently, are concatenated token by token and mixed by ``out_proj``. When the
    weights are not asked for, the heads come from PyTorch's fused
    ``torch.nn.functional.scaled_dot_product_attention`` (same results, no stored weights),
    as in ``nn.MultiheadAttention``.

    Parameters
    ----------
    d : int
        Model width (token size).
    h : int
        Number of heads; must divide ``d``.
    bias : bool, optional
        Biases in the four projections (default ``True``), like ``nn.MultiheadAttention``.

    Shapes
    ------
    ``x (b, s, d)`` (or ``(s, d)``), ``context (b, s_k, d)``, ``mask`` ``(s, s_k)``,
    ``(b, s, s_k)`` or ``(b, h, s, s_k)`` → ``out (b, s, d)``, ``weights (b, h, s, s_k)``.

    Raises
    ------
    TypeError
        If ``d`` or ``h`` is not an integer (a bool is not), or an input is not a tensor;
        in ``forward``, if ``need_weights`` is not a bool (``1`` is not ``True``).
    ValueError
        If ``h`` does not divide ``d`` or a size is not positive; in ``forward``, if an input
        has the wrong rank, width, dtype or device, ``x`` and ``context`` have different
        batch sizes, a sequence is empty, or the mask is not 2-, 3- or 4-D, not boolean or
        does not broadcast. With :func:`attnlab.nn.check_values` on, also non-finite inputs
        and overflowing logits (the weights are then computed explicitly).

    Examples
    --------
    >>> import torch
    >>> from attnlab.nn import MultiHeadAttention
    >>> _ = torch.manual_seed(0)
    >>> mha = MultiHeadAttention(d=48, h=4)
    >>> out, w = mha(torch.randn(2, 16, 48), need_weights=True)
    >>> out.shape, w.shape                              # 4 heads of 12
    (torch.Size([2, 16, 48]), torch.Size([2, 4, 16, 16]))
    >>> theirs = mha.to_torch()                         # the same layer in torch.nn
    >>> x = torch.randn(1, 5, 48)
    >>> bool(torch.allclose(mha(x), theirs(x, x, x, need_weights=False)[0], atol=1e-6))
    True
    """

    def __init__(self, d: int, h: int, bias: bool = True) -> None:
        super().__init__()
        d, h = check_int(d, "d"), check_int(h, "h")
        if d % h != 0:
            raise ValueError(
                f"h={h} heads must divide the model width d={d} (d_k = d/h = {d / h:g} is not "
                "a whole number)"
            )
        self.d = d
        self.h = h
        self.d_k = d // h
        self.bias = bias
        self.q_proj = nn.Linear(d, d, bias=bias)
        self.k_proj = nn.Linear(d, d, bias=bias)
        self.v_proj = nn.Linear(d, d, bias=bias)
        self.out_proj = nn.Linear(d, d, bias=bias)

    def _split(self, t: Tensor) -> Tensor:
        """``(b, s, h·d_k)`` → ``(b, h, s, d_k)``: reshape the features, *then* move heads."""
        b, s, _ = t.shape
        return t.reshape(b, s, self.h, self.d_k).transpose(1, 2)

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        need_weights: bool = False,
        context: Tensor | None = None,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """Attend from every token of ``x`` to every token of ``context`` (default: ``x``).

        Parameters
        ----------
        x : torch.Tensor
            Queries' tokens, ``(b, s, d)`` or unbatched ``(s, d)``.
        mask : torch.Tensor of bool, optional
            ``True`` where a query may attend; ``(s, s_k)``, ``(b, s, s_k)`` or
            ``(b, h, s, s_k)``.
        need_weights : bool, optional
            Also return every head's attention weights.
        context : torch.Tensor, optional
            Tokens that give keys and values (cross-attention); defaults to ``x``.

        Returns
        -------
        out : torch.Tensor
            ``(b, s, d)`` (``(s, d)`` for unbatched input).
        weights : torch.Tensor
            Only if ``need_weights``: ``(b, h, s, s_k)`` (``(h, s, s_k)`` unbatched).
        """
        check_bool(need_weights, "need_weights")
        weight = self.q_proj.weight
        _check_tokens(x, "x", weight, "(b, s, d) or (s, d)")
        if context is not None:
            _check_tokens(context, "context", weight, "(b, s_k, d) or (s_k, d)")
        unbatched = x.dim() == 2
        if context is None:
            context = x
        if unbatched:
            x, context = x.unsqueeze(0), context.unsqueeze(0)
        for name, t in (("x", x), ("context", context)):
            if t.dim() != 3 or t.shape[-1] != self.d:
                raise ValueError(
                    f"{name} must have shape (b, s, d={self.d}), got shape {shape_of(t)}"
                )
        if x.shape[0] != context.shape[0]:
            raise ValueError(
                f"x and context must have the same batch size: x has shape {shape_of(x)}, "
                f"context has shape {shape_of(context)}"
            )
        require_nonempty({"x": x, "context": context})
        if mask is not None:
            if not isinstance(mask, Tensor):
                raise TypeError(f"mask must be a torch.Tensor of bool, got {type(mask).__name__}")
            if mask.dim() not in (2, 3, 4):
                raise ValueError(
                    f"mask must have shape (s, s_k), (b, s, s_k) or (b, h, s, s_k), "
                    f"got shape {shape_of(mask)}"
                )
            if mask.dim() == 3:
                mask = mask.unsqueeze(1)  # (b, s, s_k) -> (b, 1, s, s_k): same for every head
            _check_mask(mask, torch.Size((x.shape[0], self.h, x.shape[1], context.shape[1])))
        explicit = need_weights or values_checked()  # the value checks need the logits
        q = self._split(self.q_proj(x))
        k = self._split(self.k_proj(context))
        v = self._split(self.v_proj(context))
        if explicit:
            heads, weights = scaled_dot_product_attention(q, k, v, mask=mask)  # (b, h, s, d_k)
        else:
            # Same heads from PyTorch's fused kernel, which never stores the (b, h, s, s_k)
            # weights: it shares the book's mask convention and, in torch 2.13, also gives a
            # zero output for a query with no allowed key (tests/test_nn_multihead.py checks).
            heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        b, _, s, _ = heads.shape
        out = self.out_proj(heads.transpose(1, 2).reshape(b, s, self.d))  # transpose, then flatten
        if not need_weights:
            return out.squeeze(0) if unbatched else out
        if unbatched:
            out, weights = out.squeeze(0), weights.squeeze(0)
        return out, weights

    @classmethod
    def from_torch(cls, mha: nn.MultiheadAttention) -> MultiHeadAttention:
        """Copy a ``torch.nn.MultiheadAttention`` (same weights, dtype and device).

        ``mha.in_proj_weight`` stacks the three ``(out, in)`` matrices ``[W_q; W_k; W_v]`` in
        one ``(3d, d)`` tensor; its rows ``i·d … (i+1)·d - 1`` become ``q_proj``, ``k_proj``,
        ``v_proj``. ``batch_first`` only changes the input layout, not the weights.

        Raises
        ------
        ValueError
            If ``mha`` has separate key/value widths (``kdim``/``vdim``), extra key/value
            biases (``add_bias_kv``), ``add_zero_attn`` or dropout, none of which this module
            has.
        """
        if not mha._qkv_same_embed_dim:
            raise ValueError("from_torch needs kdim == vdim == embed_dim (one in_proj_weight)")
        if mha.bias_k is not None or mha.add_zero_attn:
            raise ValueError("from_torch does not support add_bias_kv or add_zero_attn")
        if mha.dropout != 0.0:
            raise ValueError(f"from_torch needs dropout=0.0, got {mha.dropout}")
        d, h = mha.embed_dim, mha.num_heads
        weight = mha.in_proj_weight
        bias = mha.in_proj_bias is not None
        ours = cls(d, h, bias=bias).to(device=weight.device, dtype=weight.dtype)
        with torch.no_grad():
            for i, proj in enumerate((ours.q_proj, ours.k_proj, ours.v_proj)):
                proj.weight.copy_(weight[i * d : (i + 1) * d])
                if bias:
                    proj.bias.copy_(mha.in_proj_bias[i * d : (i + 1) * d])
            ours.out_proj.weight.copy_(mha.out_proj.weight)
            if bias:
                ours.out_proj.bias.copy_(mha.out_proj.bias)
        return ours

    def to_torch(self) -> nn.MultiheadAttention:
        """The same layer as ``torch.nn.MultiheadAttention(d, h, bias, batch_first=True)``.

        Remember that its boolean ``attn_mask`` means the opposite of ours (use
        :func:`to_torch_attn_mask`), and that by default it returns head-*averaged* weights
        (pass ``average_attn_weights=False`` for per-head ones).
        """
        weight = self.q_proj.weight
        theirs = nn.MultiheadAttention(
            self.d,
            self.h,
            bias=self.bias,
            batch_first=True,
            device=weight.device,
            dtype=weight.dtype,
        )
        with torch.no_grad():
            theirs.in_proj_weight.copy_(
                torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight])
            )
            theirs.out_proj.weight.copy_(self.out_proj.weight)
            if self.bias:
                theirs.in_proj_bias.copy_(
                    torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias])
                )
                theirs.out_proj.bias.copy_(self.out_proj.bias)
        return theirs

    def extra_repr(self) -> str:
        return f"d={self.d}, h={self.h}, d_k={self.d_k}, bias={self.bias}"
