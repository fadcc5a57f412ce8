"""Luong et al.'s attention scores as a batched torch module (chapter 07).

:class:`~attnlab.nn.luong.LuongAttention` scores every (query, key) pair with one of Luong et
al.'s scores (``"dot"``, ``"scaled"``, ``"general"``, ``"concat"``; the names are
:data:`SCORES`), normalises over the keys and averages the values, in torch's row convention
(``batch_first``). The encoder–decoder that uses it is in :mod:`attnlab.nn.seq2seq`; both are
re-exported (and documented) by :mod:`attnlab.nn.luong`.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attnlab._validate import check_int, check_tensor, require_nonempty, shape_of
from attnlab.nn.attention import masked_softmax

__all__ = ["SCORES", "LuongAttention"]

#: The score names :class:`LuongAttention` accepts.
SCORES = ("dot", "scaled", "general", "concat")


class LuongAttention(nn.Module):
    """Attention with one of Luong et al.'s score functions (row convention, batch first).

    For a query ``q (d_q,)`` and a key ``k (d_k,)`` the score is

    - ``"dot"``: ``q · k`` (``d_q = d_k``);
    - ``"scaled"``: ``q · k / sqrt(d_k)`` (``d_q = d_k``);
    - ``"general"``: ``qᵀ W_a k`` with ``W_a (d_q, d_k)``, Luong's ``h_tᵀ W_a h̄_s`` (stored
      as ``self.w``, an ``nn.Linear(d_k, d_q)``, whose weight *is* ``W_a``);
    - ``"concat"``: ``v_aᵀ tanh(W_a [q; k])`` with ``W_a (d_a, d_q + d_k)`` (``self.w``,
      an ``nn.Linear(d_q + d_k, d_a)``) and ``v_a (d_a,)``. The two column blocks of ``W_a``
      are Bahdanau's ``W`` (for the query) and ``U`` (for the key).

    Parameters
    ----------
    score : str
        The score function: ``"dot"``, ``"scaled"``, ``"general"`` or ``"concat"``.
    query_size : int, optional
        ``d_q``; required for ``"general"`` and ``"concat"``.
    key_size : int, optional
        ``d_k``; required for ``"general"`` and ``"concat"``.
    attn_size : int, optional
        ``d_a`` of ``"concat"`` (default: ``key_size``).

    Shapes
    ------
    ``query (B, n, d_q)``, ``keys (B, m, d_k)``, ``values (B, m, d_v)``, ``key_mask (B, m)``
    → ``out (B, n, d_v)``, ``weights (B, n, m)``.

    Raises
    ------
    TypeError
        If a size is not an integer (a bool is not), or an input is not a tensor.
    ValueError
        On an unknown score, missing or non-positive sizes, or (in ``forward``) inputs whose
        ranks, sizes, batch sizes, dtypes or devices disagree, an empty sequence (``n = 0`` or
        ``m = 0``), or a bad ``key_mask``. With :func:`attnlab.nn.check_values` on, also
        non-finite inputs and logits that overflow the dtype.

    Examples
    --------
    >>> import math, torch
    >>> from attnlab.nn import LuongAttention
    >>> attn = LuongAttention("dot")
    >>> q = torch.tensor([[[math.log(3.0), 0.0]]])      # B = 1, n = 1, d = 2
    >>> k = torch.eye(2).unsqueeze(0)                    # m = 2 keys
    >>> out, w = attn(q, k, torch.tensor([[[10.0], [20.0]]]))
    >>> w
    tensor([[[0.7500, 0.2500]]])
    >>> out
    tensor([[[12.5000]]])
    """

    def __init__(
        self,
        score: str = "dot",
        query_size: int | None = None,
        key_size: int | None = None,
        attn_size: int | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(score, str) or score not in SCORES:
            raise ValueError(f"unknown score {score!r}; choose one of {', '.join(SCORES)}")
        self.score = score
        if score in ("general", "concat") and (query_size is None or key_size is None):
            raise ValueError(
                f"score {score!r} needs query_size and key_size, got query_size={query_size}, "
                f"key_size={key_size}"
            )
        sizes = {"query_size": query_size, "key_size": key_size, "attn_size": attn_size}
        for name, value in sizes.items():
            if value is not None:
                sizes[name] = check_int(value, name)
        query_size, key_size, attn_size = sizes.values()
        self.query_size = query_size
        self.key_size = key_size
        if score == "general":
            self.w = nn.Linear(key_size, query_size, bias=False)  # weight (d_q, d_k) = W_a
        elif score == "concat":
            attn_size = key_size if attn_size is None else attn_size
            self.w = nn.Linear(query_size + key_size, attn_size, bias=False)  # (d_a, d_q + d_k)
            bound = 1.0 / math.sqrt(attn_size)
            self.v_a = nn.Parameter(torch.empty(attn_size).uniform_(-bound, bound))

    def extra_repr(self) -> str:
        return f"score={self.score!r}"

    def _check(self, query: Tensor, keys: Tensor) -> None:
        check_tensor(query, "query", "(B, n, d_q)", min_ndim=0)  # rank: below
        check_tensor(keys, "keys", "(B, m, d_k)", min_ndim=0, like=query, like_name="query")
        if query.dim() != 3 or keys.dim() != 3 or query.shape[0] != keys.shape[0]:
            raise ValueError(
                f"query must be (B, n, d_q) and keys (B, m, d_k) with the same B, got "
                f"query of shape {shape_of(query)}, keys of shape {shape_of(keys)}"
            )
        for param in self.parameters():
            if param.dtype != query.dtype or param.device != query.device:
                raise ValueError(
                    f"query is {query.dtype} on {query.device} but the module's parameters are "
                    f"{param.dtype} on {param.device}; convert one with .to(...)"
                )
        require_nonempty({"query": query, "keys": keys})
        d_q, d_k = query.shape[-1], keys.shape[-1]
        if self.score in ("dot", "scaled") and d_q != d_k:
            raise ValueError(
                f"score {self.score!r} needs d_q = d_k, got query {shape_of(query)}, "
                f"keys {shape_of(keys)}; use score='general'"
            )
        if self.score in ("dot", "scaled") and d_k == 0:
            raise ValueError(f"empty key size d_k = 0: keys has shape {shape_of(keys)}")
        if self.score in ("general", "concat") and (d_q, d_k) != (self.query_size, self.key_size):
            raise ValueError(
                f"this LuongAttention({self.score!r}) expects d_q={self.query_size}, "
                f"d_k={self.key_size}, got query {shape_of(query)}, keys {shape_of(keys)}"
            )

    def scores(self, query: Tensor, keys: Tensor) -> Tensor:
        """The score of every key for every query, before the softmax: ``(B, n, m)``."""
        self._check(query, keys)
        return self._scores(query, keys)

    def _scores(self, query: Tensor, keys: Tensor) -> Tensor:
        """:meth:`scores` without the checks (the caller has run them)."""
        if self.score == "dot":
            return query @ keys.transpose(-2, -1)
        if self.score == "scaled":
            return query @ keys.transpose(-2, -1) / math.sqrt(keys.shape[-1])
        if self.score == "general":
            return query @ self.w(keys).transpose(-2, -1)  # q · (W_a k)
        # concat: W_a [q; k] = W_q q + W_k k with the column blocks of W_a (Bahdanau's form),
        # computed once per query and once per key, then broadcast over all pairs.
        d_q = query.shape[-1]
        w_q, w_k = self.w.weight[:, :d_q], self.w.weight[:, d_q:]
        from_q = query @ w_q.T  # (B, n, d_a)
        from_k = keys @ w_k.T  # (B, m, d_a)
        hidden = torch.tanh(from_q.unsqueeze(2) + from_k.unsqueeze(1))  # (B, n, m, d_a)
        return hidden @ self.v_a

    def forward(
        self,
        query: Tensor,
        keys: Tensor,
        values: Tensor | None = None,
        key_mask: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Attend from each query over the keys; return the output and the weights.

        Parameters
        ----------
        query : torch.Tensor
            ``(B, n, d_q)``.
        keys : torch.Tensor
            ``(B, m, d_k)``.
        values : torch.Tensor, optional
            ``(B, m, d_v)``; default: the keys (as in Luong et al., where both are the
            encoder states).
        key_mask : torch.Tensor of bool, optional
            ``(B, m)``, ``True`` for real keys, ``False`` for padding. A query whose keys are
            all masked gets zero weights and a zero output.

        Returns
        -------
        out : torch.Tensor
            ``(B, n, d_v)``.
        weights : torch.Tensor
            ``(B, n, m)``; each row sums to one over the unmasked keys.
        """
        self._check(query, keys)
        values = keys if values is None else values
        check_tensor(values, "values", "(B, m, d_v)", min_ndim=0, like=keys, like_name="keys")
        if values.dim() != 3 or values.shape[:2] != keys.shape[:2]:
            raise ValueError(
                f"values must be (B, m, d_v) like keys of shape {shape_of(keys)}, "
                f"got values of shape {shape_of(values)}"
            )
        logits = self._scores(query, keys)
        mask = None
        if key_mask is not None:
            if not isinstance(key_mask, Tensor):
                raise TypeError(f"key_mask must be a torch.Tensor, got {type(key_mask).__name__}")
            if key_mask.dtype != torch.bool or key_mask.shape != keys.shape[:2]:
                raise ValueError(
                    f"key_mask must be a bool tensor of shape (B, m) = {shape_of(keys)[:2]}, "
                    f"got {key_mask.dtype} of shape {shape_of(key_mask)}"
                )
            mask = key_mask.unsqueeze(1)  # (B, 1, m): the same keys for every query
        weights = masked_softmax(logits, mask)
        return weights @ values, weights

    def column_weights(self) -> dict[str, object]:
        """The parameters as numpy arrays for :func:`attnlab.luong.luong_attention` (columns).

        ``"general"``: ``{"w": W}`` with ``W = W_aᵀ`` of shape ``(d_k, d_q)``, because the
        column convention writes ``k_iᵀ W q_j`` where Luong writes ``h_tᵀ W_a h̄_s``.
        ``"concat"``: ``{"w": W_a (d_a, d_q + d_k), "v_a": v_a (d_a,)}``. Otherwise ``{}``.
        """
        if self.score == "general":
            return {"w": self.w.weight.detach().cpu().numpy().T.copy()}
        if self.score == "concat":
            return {
                "w": self.w.weight.detach().cpu().numpy().copy(),
                "v_a": self.v_a.detach().cpu().numpy().copy(),
            }
        return {}
