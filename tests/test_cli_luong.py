"""A bad ``--device`` of ``python -m attnlab.nn.luong``, and of ``attnlab.train.train``.

The command must refuse in one line (status 2) before it builds the data set and starts a
long run; ``train(..., device=...)`` must raise a ``ValueError`` naming ``device``.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import torch

from attnlab.train import train

NO_CUDA = not torch.cuda.is_available()


def _luong(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "attnlab.nn.luong", *args],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def _one_line_error(done: subprocess.CompletedProcess, match: str) -> None:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("python -m attnlab.nn.luong: error:"), lines
    assert match in lines[0], lines[0]
    assert done.stdout == ""  # not even the table header: nothing ran


@pytest.mark.parametrize("device", ["tpu", "", "cuda:x"])
def test_an_unknown_device_is_a_one_line_error(device):
    _one_line_error(_luong("--device", device, "--epochs", "1"), "device")


@pytest.mark.skipif(not NO_CUDA, reason="this machine has CUDA: nothing to refuse")
@pytest.mark.parametrize("device", ["cuda", "cuda:0"])
def test_cuda_without_a_cuda_device_is_refused_before_the_run(device):
    start = time.monotonic()
    _one_line_error(_luong("--device", device), "CUDA")
    assert time.monotonic() - start < 60  # refused up front, not after building 21,000 dates


def test_a_cuda_index_beyond_the_devices_is_refused():
    _one_line_error(_luong("--device", f"cuda:{torch.cuda.device_count() + 7}"), "CUDA")


@pytest.mark.parametrize("option", ["--epochs=0", "--epochs=-1", "--threads=0", "--hidden=0",
                                    "--examples=-5"])
def test_non_positive_sizes_are_one_line_errors(option):
    _one_line_error(_luong(option), option.split("=")[0])


def _train_on(device: str) -> None:
    model = torch.nn.Linear(1, 1)
    train(model, lambda epoch: [torch.zeros(2, 1)], lambda m, b: (m(b) ** 2).mean(),
          progress=False, device=device)


@pytest.mark.parametrize("device", ["tpu", ""] + (["cuda"] if NO_CUDA else []))
def test_train_with_a_bad_device_raises_a_value_error_naming_it(device):
    with pytest.raises(ValueError, match="device"):
        _train_on(device)


def test_the_device_rule_accepts_every_cuda_device_that_exists(monkeypatch):
    """On a machine with one GPU (simulated), cuda and cuda:0 pass and cuda:1 does not; the
    one rule serves train, the luong command and the study."""
    from attnlab.study.runner import resolve_device as study_device
    from attnlab.train import resolve_device

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert resolve_device("cuda") == torch.device("cuda")
    assert resolve_device("cuda:0") == torch.device("cuda:0")
    with pytest.raises(ValueError, match="no such CUDA device"):
        resolve_device("cuda:1")
    assert study_device("cuda") == torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    for device in ("cuda", torch.device("cuda")):
        with pytest.raises(ValueError, match="no such CUDA device"):
            resolve_device(device)
    with pytest.raises(ValueError, match="no such CUDA device"):
        study_device("cuda")
    assert resolve_device("cpu") == torch.device("cpu")
