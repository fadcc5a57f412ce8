"""Chapter 01's look-up task, solved by attention that learns its query and key matrices.

:class:`LookupAttention` is the smallest trainable attention: token 0 of each example asks a
question, every other token answers with a key, and the prediction is the softmax-weighted
average of the other tokens' values,

.. math::

    q = x_0 W_Q,\\quad k_p = x_p W_K,\\quad
    w_{0p} = \\operatorname{softmax}_{p \\ne 0}(q\\, k_p^\\top),\\quad
    \\hat y = \\sum_{p \\ne 0} w_{0p}\\, v_p ,

with ``W_Q, W_K`` of shape ``(d, d_k)`` learned and the value ``v_p`` read from one fixed
column of the token (no value projection). :func:`train_lookup` fits the two matrices by
full-batch Adam on the squared error, in float64 and on one CPU thread, so a run is a
deterministic function of its seed and data. :func:`relative_error` is the error measure of
the chapter: mean squared error divided by the variance of the targets (0 is perfect, 1 is
as good as predicting the mean).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor, nn

from attnlab._validate import ANY_INT, check_float, check_int


def _as_tokens(x: np.typing.ArrayLike | Tensor, d: int | None = None) -> Tensor:
    """``x`` as a float64 tensor of shape ``(n, s, d)`` with ``s >= 2``, checked."""
    if isinstance(x, Tensor):
        t = x.detach().to(torch.float64)
    else:
        arr = np.asarray(x)
        if not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
            raise TypeError(f"x must hold real numbers, got dtype {arr.dtype}")
        t = torch.from_numpy(arr.astype(np.float64))
    if t.ndim != 3 or t.shape[1] < 2:
        raise ValueError(f"x must have shape (n, s, d) with s >= 2, got shape {tuple(t.shape)}")
    if d is not None and t.shape[2] != d:
        raise ValueError(f"x has token width {t.shape[2]} but the model expects d = {d}")
    if not torch.isfinite(t).all():
        raise ValueError("x contains NaN or infinite values")
    return t


class LookupAttention(nn.Module):
    """Token 0 attends to the other tokens with learned ``W_Q`` and ``W_K``.

    Parameters
    ----------
    d : int
        Token width.
    d_k : int
        Width of queries and keys.
    value_index : int
        The column of a token that holds its value (default: the last one).
    seed : int
        Seed of the initial ``W_Q`` and ``W_K`` (normal entries of standard deviation
        ``init_std``), drawn from a private generator: the global torch seed is not touched.
    init_std : float
        Standard deviation of the initial entries; small values start from nearly uniform
        weights.

    Attributes
    ----------
    w_q, w_k : torch.nn.Parameter
        The query and key matrices, float64, shape ``(d, d_k)`` (row convention: ``x @ w_q``).

    Shapes
    ------
    ``x (n, s, d)`` → prediction ``(n,)``, weights ``(n, s)`` (column 0, token 0 itself,
    always gets weight 0).

    Examples
    --------
    >>> import torch
    >>> from attnlab.nn.lookup import LookupAttention
    >>> model = LookupAttention(d=3, d_k=2, seed=0)
    >>> pred, weights = model(torch.ones(4, 5, 3, dtype=torch.float64))
    >>> pred.shape, weights.shape, float(weights[0, 0].detach())
    (torch.Size([4]), torch.Size([4, 5]), 0.0)
    """

    def __init__(
        self, d: int, d_k: int, value_index: int = -1, seed: int = 0, init_std: float = 0.1
    ) -> None:
        super().__init__()
        for name, value in (("d", d), ("d_k", d_k), ("value_index", value_index)):
            check_int(value, name, minimum=ANY_INT)  # the ranges are checked below
        if d < 1 or d_k < 1:
            raise ValueError(f"d and d_k must be positive, got d={d}, d_k={d_k}")
        if not -d <= value_index < d:
            raise ValueError(
                f"value_index must be a column of a token of width {d}, got {value_index}"
            )
        init_std = check_float(init_std, "init_std")
        gen = torch.Generator().manual_seed(seed)
        self.d, self.value_index = d, value_index
        self.w_q = nn.Parameter(init_std * torch.randn(d, d_k, generator=gen, dtype=torch.float64))
        self.w_k = nn.Parameter(init_std * torch.randn(d, d_k, generator=gen, dtype=torch.float64))

    def scores(self, x: np.typing.ArrayLike | Tensor) -> Tensor:
        """The logits ``q k_p^T`` of token 0 against every token, ``(n, s)``; token 0: ``-inf``."""
        t = _as_tokens(x, self.d)
        q = t[:, 0] @ self.w_q  # (n, d_k)
        k = t @ self.w_k  # (n, s, d_k)
        logits = torch.einsum("nk,nsk->ns", q, k)
        not_self = torch.ones(t.shape[1], dtype=torch.bool)
        not_self[0] = False
        return logits.masked_fill(~not_self, float("-inf"))

    def forward(self, x: np.typing.ArrayLike | Tensor) -> tuple[Tensor, Tensor]:
        """Return ``(prediction (n,), weights (n, s))`` for tokens ``x (n, s, d)``."""
        t = _as_tokens(x, self.d)
        weights = torch.softmax(self.scores(t), dim=-1)
        return (weights * t[:, :, self.value_index]).sum(dim=-1), weights

    def w_qk(self) -> np.ndarray:
        """The bilinear form ``W_Q W_K^T`` (``(d, d)``, numpy) that the logits depend on."""
        return (self.w_q @ self.w_k.T).detach().numpy()


def relative_error(prediction: np.typing.ArrayLike | Tensor, target: np.typing.ArrayLike) -> float:
    """Mean squared error divided by the variance of ``target``.

    Shapes
    ------
    ``prediction (n,)``, ``target (n,)`` → a float.

    Raises
    ------
    ValueError
        If the shapes differ, fewer than two targets are given, or the targets are constant.

    Examples
    --------
    >>> from attnlab.nn.lookup import relative_error
    >>> relative_error([0.0, 0.0], [1.0, -1.0])
    1.0
    """
    pred = (
        prediction.detach().numpy() if isinstance(prediction, Tensor) else np.asarray(prediction)
    ).astype(np.float64)
    y = np.asarray(target, dtype=np.float64)
    if pred.shape != y.shape or y.ndim != 1:
        raise ValueError(
            f"prediction and target must both have shape (n,), got {pred.shape} and {y.shape}"
        )
    if y.size < 2 or np.var(y) == 0:
        raise ValueError("target must hold at least two different values")
    return float(np.mean((pred - y) ** 2) / np.var(y))


def train_lookup(
    model: LookupAttention,
    x: np.typing.ArrayLike | Tensor,
    target: np.typing.ArrayLike | Tensor,
    *,
    steps: int = 200,
    lr: float = 0.05,
) -> list[float]:
    """Fit ``model.w_q`` and ``model.w_k`` by full-batch Adam on the squared error.

    Parameters
    ----------
    model : LookupAttention
        Trained in place.
    x : array_like
        Tokens, ``(n, s, d)``.
    target : array_like
        The values to predict, ``(n,)``.
    steps : int
        Number of Adam steps, each on the whole data set (no shuffling: deterministic).
    lr : float
        Adam's learning rate.

    Returns
    -------
    list of float
        The relative error (:func:`relative_error`) before each step and after the last one,
        ``steps + 1`` numbers.

    Shapes
    ------
    ``x (n, s, d)``, ``target (n,)``.

    Raises
    ------
    ValueError
        If the shapes do not fit, ``steps`` or ``lr`` is not positive (``lr`` also: not
        finite), or the data are not finite.
    TypeError
        If ``model`` is not a :class:`LookupAttention`, ``steps`` is not an integer or ``lr``
        not a real number (a bool is neither).

    Examples
    --------
    >>> from attnlab.data import lookup_task
    >>> from attnlab.nn.lookup import LookupAttention, train_lookup
    >>> x, y = lookup_task(200, seed=1)
    >>> history = train_lookup(LookupAttention(d=7, d_k=6), x, y, steps=60, lr=0.1)
    >>> len(history), history[-1] < 0.5 * history[0]
    (61, True)
    """
    if not isinstance(model, LookupAttention):
        raise TypeError(f"model must be a LookupAttention, got {type(model).__name__}")
    check_int(steps, "steps")
    lr = check_float(lr, "lr")
    t = _as_tokens(x, model.d)
    y = torch.as_tensor(
        np.asarray(target, dtype=np.float64)
        if not isinstance(target, Tensor)
        else target.detach().to(torch.float64)
    )
    if y.shape != (t.shape[0],):
        raise ValueError(
            f"target must have shape ({t.shape[0]},) for x of shape {tuple(t.shape)}, "
            f"got {tuple(y.shape)}"
        )
    if not torch.isfinite(y).all():
        raise ValueError("target contains NaN or infinite values")
    variance = y.var(unbiased=False)
    if variance == 0:
        raise ValueError("target must hold at least two different values")
    optimiser = torch.optim.Adam(model.parameters(), lr=lr)
    history = []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: one thread is faster, and sums in a fixed order
    try:
        for _ in range(steps):
            optimiser.zero_grad()
            loss = ((model(t)[0] - y) ** 2).mean() / variance
            history.append(float(loss.detach()))
            loss.backward()
            optimiser.step()
        with torch.no_grad():
            history.append(float(((model(t)[0] - y) ** 2).mean() / variance))
    finally:
        torch.set_num_threads(threads)
    return history
