"""Chapter 06's learned heads: a one-layer patch model, its training, and head masses (torch).

The chapter trains :class:`PatchModel` (``MultiHeadAttention(48, h)`` followed by a linear
read-out to the six targets of :func:`attnlab.data.images.colour_texture_task`) with
:func:`train_patch_model`, then measures with :func:`head_masses` how much attention each head
puts on patches of the query's colour and of the query's texture. The chapter and the test of
its twelve-seed claim (``tests/test_ch06_seeds.py``) call these same functions, so the claim
is checked on exactly the chapter's protocol.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor, nn

from attnlab._validate import check_int
from attnlab.data.images import ColourTextureTask
from attnlab.nn import MultiHeadAttention

#: Adam steps, images per batch and learning rate of the chapter's protocol.
STEPS, BATCH, LR = 150, 32, 1e-2


class PatchModel(nn.Module):
    """One multi-head self-attention layer over patch tokens, then a linear read-out.

    Parameters
    ----------
    heads : int
        Number of heads ``h`` (must divide ``d``).
    d : int, optional
        Token width (default 48: ``4 × 4`` RGB patches).
    n_out : int, optional
        Targets per patch (default 6).

    Shapes
    ------
    ``x (b, s, d)`` → ``prediction (b, s, n_out)``, ``weights (b, h, s, s)``.

    Examples
    --------
    >>> import torch
    >>> from attnlab.nn.image_heads import PatchModel
    >>> _ = torch.manual_seed(0)
    >>> prediction, weights = PatchModel(4)(torch.zeros(2, 64, 48))
    >>> tuple(prediction.shape), tuple(weights.shape)
    ((2, 64, 6), (2, 4, 64, 64))
    """

    def __init__(self, heads: int, d: int = 48, n_out: int = 6) -> None:
        super().__init__()
        self.attention = MultiHeadAttention(d, heads)
        self.readout = nn.Linear(d, n_out)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Return ``(prediction, weights)`` (see the class docstring)."""
        out, weights = self.attention(x, need_weights=True)
        return self.readout(out), weights


def train_patch_model(
    model: PatchModel,
    task: ColourTextureTask,
    *,
    steps: int = STEPS,
    batch: int = BATCH,
    lr: float = LR,
    data_seed: int = 0,
) -> None:
    """Train ``model`` in place with Adam on the squared error of the task's targets.

    Every step draws ``batch`` images of ``task`` with replacement, from a generator seeded
    with ``data_seed`` (so models with different initial weights see the same batches).

    Shapes
    ------
    ``task.tokens (n, s, d)``, ``task.targets (n, s, n_out)``.

    Raises
    ------
    TypeError
        If ``steps`` or ``batch`` is not an integer (a bool or a float is not).
    ValueError
        If ``steps`` or ``batch`` is below 1.

    Examples
    --------
    >>> import torch
    >>> from attnlab.data.images import colour_texture_task
    >>> from attnlab.nn.image_heads import PatchModel, train_patch_model
    >>> _ = torch.manual_seed(0)
    >>> model = PatchModel(4)
    >>> train_patch_model(model, colour_texture_task(8), steps=2, batch=4)
    """
    steps, batch = check_int(steps, "steps"), check_int(batch, "batch")
    x = torch.tensor(task.tokens, dtype=torch.float32)
    y = torch.tensor(task.targets, dtype=torch.float32)
    optimiser = torch.optim.Adam(model.parameters(), lr=lr)
    draws = torch.Generator().manual_seed(data_seed)
    for _ in range(steps):
        idx = torch.randint(0, len(x), (batch,), generator=draws)
        prediction, _ = model(x[idx])
        loss = torch.mean((prediction - y[idx]) ** 2)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()


def head_masses(model: PatchModel, task: ColourTextureTask) -> tuple[np.ndarray, np.ndarray]:
    """Mean attention mass each head puts on same-colour and on same-texture patches.

    For every image and every query patch, sum the head's weights over the keys that share the
    query's colour (texture); average over queries and images.

    Returns
    -------
    colour, texture : numpy.ndarray
        One mass in ``[0, 1]`` per head, shape ``(h,)`` each.

    Shapes
    ------
    ``task.tokens (n, s, d)`` → ``(h,)``, ``(h,)``.

    Examples
    --------
    >>> import torch
    >>> from attnlab.data.images import colour_texture_task
    >>> from attnlab.nn.image_heads import PatchModel, head_masses
    >>> _ = torch.manual_seed(0)
    >>> colour, texture = head_masses(PatchModel(4), colour_texture_task(4))
    >>> colour.shape, bool((colour > 0).all() and (colour <= 1).all())
    ((4,), True)
    """
    with torch.no_grad():
        _, w = model(torch.tensor(task.tokens, dtype=torch.float32))
    w = w.numpy()  # (n, h, s, s)
    same_c = task.colours[:, :, None] == task.colours[:, None, :]  # (n, s, s)
    same_t = task.textures[:, :, None] == task.textures[:, None, :]
    return (w * same_c[:, None]).sum(-1).mean((0, 2)), (w * same_t[:, None]).sum(-1).mean((0, 2))
