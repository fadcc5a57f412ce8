"""A small, readable training loop for the book's torch models.

:func:`train` runs Adam over the batches of each epoch, clips the gradient norm, and returns
the loss of every step. It knows nothing about the model: a ``loss_fn(model, batch)`` turns a
batch into a scalar loss, and a ``batches(epoch)`` function yields the batches of one epoch
(for example :func:`tensor_batches`, reshuffled with the epoch number as the seed), so runs
are reproducible step for step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import Tensor, nn
from tqdm import tqdm

from attnlab.data import batch_indices


def tensor_batches(
    *tensors: Tensor, batch_size: int, seed: int | None = None
) -> list[tuple[Tensor, ...]]:
    """Cut tensors that share their first axis into (optionally shuffled) batches.

    Parameters
    ----------
    *tensors : torch.Tensor
        Arrays of examples, all with the same first size ``N``.
    batch_size : int
        Examples per batch (the last batch may be smaller).
    seed : int, optional
        Shuffle the examples with this seed first (``None``: keep the order).

    Returns
    -------
    list of tuple of torch.Tensor
        One tuple per batch, the tensors in the order given.

    Shapes
    ------
    Each tensor ``(N, ...)`` → batches of ``(batch_size, ...)``.

    Raises
    ------
    ValueError
        If no tensor is given or the first sizes differ.

    Examples
    --------
    >>> import torch
    >>> from attnlab.train import tensor_batches
    >>> x, y = torch.arange(5), torch.arange(5) * 10
    >>> [tuple(b.tolist() for b in batch) for batch in tensor_batches(x, y, batch_size=2)]
    [([0, 1], [0, 10]), ([2, 3], [20, 30]), ([4], [40])]
    """
    if not tensors:
        raise ValueError("tensor_batches needs at least one tensor")
    sizes = {t.shape[0] for t in tensors}
    if len(sizes) != 1:
        raise ValueError(
            f"tensors must share their first size, got shapes {[tuple(t.shape) for t in tensors]}"
        )
    n = sizes.pop()
    return [
        tuple(t[torch.as_tensor(index)] for t in tensors)
        for index in batch_indices(n, batch_size, seed=seed)
    ]


def train(
    model: nn.Module,
    batches: Callable[[int], Iterable[Any]],
    loss_fn: Callable[[nn.Module, Any], Tensor],
    *,
    epochs: int = 1,
    lr: float = 3e-3,
    clip_norm: float | None = 1.0,
    seed: int = 0,
    progress: bool = True,
    desc: str = "training",
    device: str | torch.device | None = None,
) -> list[float]:
    """Train ``model`` with Adam and return the loss of every step.

    Parameters
    ----------
    model : torch.nn.Module
        The model; its parameters are updated in place.
    batches : callable
        ``batches(epoch)`` returns the batches of epoch ``epoch`` (0, 1, …). Use the epoch as a
        shuffling seed to make runs reproducible.
    loss_fn : callable
        ``loss_fn(model, batch)`` returns a scalar loss tensor.
    epochs : int
        Passes over the data.
    lr : float
        Adam's learning rate.
    clip_norm : float, optional
        Clip the gradient norm to this value (``None``: no clipping).
    seed : int
        ``torch.manual_seed(seed)`` before training (dropout and other randomness in the model).
    progress : bool
        Show a tqdm progress bar (turn it off in notebooks and tests).
    desc : str
        Label of the progress bar.
    device : str or torch.device, optional
        Move the model there first, and every tensor of every batch (a tensor, or tuples,
        lists and dicts of them) before ``loss_fn`` sees it. ``None``: move nothing.

    Returns
    -------
    list of float
        The training loss after each optimisation step, in order.

    Raises
    ------
    ValueError
        If ``epochs`` is not positive, the loss is not a finite scalar, or ``device`` fails
        :func:`attnlab.train.resolve_device`.

    Examples
    --------
    >>> import torch
    >>> from attnlab.train import train
    >>> model = torch.nn.Linear(1, 1)
    >>> x = torch.linspace(-1, 1, 32).unsqueeze(1)
    >>> loss = lambda m, batch: ((m(batch) - 3 * batch) ** 2).mean()
    >>> history = train(model, lambda epoch: [x], loss, epochs=200, lr=0.05, progress=False)
    >>> history[-1] < 0.01 < history[0]
    True
    """
    if epochs <= 0:
        raise ValueError(f"epochs must be positive, got {epochs}")
    if device is not None:
        device = resolve_device(device)
        model.to(device)
    torch.manual_seed(seed)
    optimiser = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    history: list[float] = []
    bar = tqdm(total=None, desc=desc, disable=not progress, unit="step")
    for epoch in range(epochs):
        for batch in batches(epoch):
            loss = loss_fn(model, batch if device is None else to_device(batch, device))
            if loss.dim() != 0 or not torch.isfinite(loss):
                raise ValueError(f"loss must be a finite scalar, got {loss}")
            optimiser.zero_grad()
            loss.backward()
            if clip_norm is not None:
                nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
            optimiser.step()
            history.append(loss.item())
            bar.update(1)
            bar.set_postfix(epoch=epoch, loss=f"{history[-1]:.3f}")
    bar.close()
    model.eval()
    return history


def resolve_device(device: str | torch.device) -> torch.device:
    """``device`` as a torch device this machine has; ``"auto"`` is CUDA when available.

    One rule for :func:`attnlab.train.train`, ``python -m attnlab.nn.luong --device`` and
    ``python -m attnlab.study --device``.

    Raises
    ------
    ValueError
        If torch knows no such device (``"tpu"``, ``""``, ``"cuda:x"``), or it is a CUDA device
        this machine does not have.

    Examples
    --------
    >>> from attnlab.train import resolve_device
    >>> resolve_device("cpu")
    device(type='cpu')
    """
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        checked = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(
            f"device must be 'auto', 'cpu' or 'cuda[:N]' (a torch device), got {device!r}"
        ) from None
    if checked.type == "cuda" and (checked.index or 0) >= torch.cuda.device_count():
        raise ValueError(f"device={str(checked)!r} but torch finds no such CUDA device")
    return checked


def to_device(batch: Any, device: str | torch.device) -> Any:
    """``batch`` with every tensor moved to ``device`` (tuples, lists and dicts recursively).

    Anything that is not a tensor or a container of them is returned unchanged.

    Examples
    --------
    >>> import torch
    >>> from attnlab.train import to_device
    >>> moved = to_device((torch.zeros(2), {"y": torch.ones(1)}, 3), "cpu")
    >>> moved[0].device.type, moved[1]["y"].device.type, moved[2]
    ('cpu', 'cpu', 3)
    """
    if isinstance(batch, Tensor):
        return batch.to(device)
    if isinstance(batch, tuple):
        return tuple(to_device(b, device) for b in batch)
    if isinstance(batch, list):
        return [to_device(b, device) for b in batch]
    if isinstance(batch, dict):
        return {key: to_device(value, device) for key, value in batch.items()}
    return batch


def count_parameters(module: nn.Module) -> int:
    """Number of trainable parameters (scalars) of ``module``.

    Examples
    --------
    >>> import torch
    >>> from attnlab.train import count_parameters
    >>> count_parameters(torch.nn.Linear(3, 2))      # 3 * 2 weights + 2 biases
    8
    """
    return sum(p.numel() for p in module.parameters() if p.requires_grad)
