"""What autograd keeps for a backward pass (the memory tests of the tiled and GAM paths)."""

from __future__ import annotations

from collections.abc import Callable

import torch


def saved_bytes(step: Callable[[], object]) -> int:
    """Bytes of the distinct storages autograd keeps for the backward pass of ``step()``.

    Every tensor saved for backward passes through a ``saved_tensors_hooks`` pack hook; views
    of one storage count once (keyed by the storage's address), so the sum is memory, not the
    number of saved tensors.
    """
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        step()
    return sum(storages.values())
