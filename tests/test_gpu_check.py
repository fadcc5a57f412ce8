"""The prepared GPU check (benchmarks/gpu_check.py) runs its parity part end to end on the CPU.

A session lent a GPU has minutes of device time; the script must not fail on its own plumbing
there. Comparing the CPU with itself exercises every case (build, inputs, backward, gradients)
and must give differences of exactly zero.
"""

from __future__ import annotations

import torch
from _benchmarks import load_benchmark

import attnlab.nn as ann


def test_parity_runs_every_case_on_the_cpu_with_zero_difference():
    gpu_check = load_benchmark("gpu_check")
    rows = gpu_check.parity(torch.device("cpu"))
    names = [name for name, _ in rows]
    assert len(names) == len(gpu_check.parity_cases())
    modules = [
        name
        for name in ann.__all__
        if isinstance(getattr(ann, name), type) and issubclass(getattr(ann, name), torch.nn.Module)
    ]
    for module in modules:  # "every attnlab.nn module", as the script promises
        assert any(name.split("(")[0] == module for name in names), module
    assert any("explicit" in name for name in names) and any("recompute" in name for name in names)
    assert any("tiled" in name for name in names)
    assert all(gap == 0.0 for _, gap in rows), rows
