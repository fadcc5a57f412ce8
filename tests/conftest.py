"""Fixtures shared by the test modules."""

import pytest


@pytest.fixture
def one_torch_thread():
    """Run the test on one torch thread, then restore the count.

    Tiny models train fastest, and reproducibly, on one thread, and do not fight other
    processes for the cores.
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
