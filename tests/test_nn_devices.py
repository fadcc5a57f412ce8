"""Every public name of attnlab.nn keeps its tensors on the input's device, checked without a GPU.

Two checks, each over every public module and function of ``attnlab.nn`` (the list is taken
from ``attnlab.nn.__all__``, so a new name without a case here fails the first test):

* **meta device**: the parameters and inputs are moved to PyTorch's ``meta`` device (shapes
  only, no data) and the forward pass runs. A tensor that a module creates on the CPU
  (``torch.arange(n)`` without ``device=``) meets a meta tensor and raises "Tensor on device
  meta is not on the expected device cpu", as it would on a GPU.
* **factory calls**: on the CPU, a ``TorchFunctionMode`` records every tensor factory
  (``torch.arange``, ``torch.full``, ...) that code in ``attnlab`` calls during the forward pass
  without a ``device=`` argument. This also covers modules that validate their input's values
  (which a meta tensor does not have).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from torch import Tensor, nn
from torch.overrides import TorchFunctionMode

import attnlab
import attnlab.nn as ann

META = torch.device("meta")
PACKAGE = str(Path(attnlab.__file__).resolve().parent)
FACTORIES = {
    torch.arange, torch.full, torch.zeros, torch.ones, torch.empty, torch.eye, torch.tensor,
    torch.as_tensor, torch.rand, torch.randn, torch.randint, torch.linspace, torch.logspace,
    torch.tril_indices, torch.triu_indices,
}  # fmt: skip


@dataclass
class Case:
    """How to build a public object of attnlab.nn and call it on inputs made on ``device``."""

    build: Callable[[], nn.Module | None]
    call: Callable[[nn.Module | None, torch.device], object]
    meta: bool = True  # False: the forward pass reads input values, which meta tensors lack


def _x(device, batch=2, s=5, d=8) -> Tensor:
    return torch.randn(batch, s, d, device=device)


def _mask(device, s=5) -> Tensor:
    return torch.tril(torch.ones(s, s, dtype=torch.bool, device=device))


def _seq2seq_inputs(device):
    src = torch.tensor([[3, 4, 5], [6, 7, 0]], device=device)
    return (
        src,
        torch.tensor([3, 2], device=device),
        torch.ones(2, 4, dtype=torch.long, device=device),
    )


CASES: dict[str, Case] = {
    "scaled_dot_product_attention": Case(
        lambda: None,
        lambda _, dev: ann.scaled_dot_product_attention(_x(dev), _x(dev), _x(dev), mask=_mask(dev)),
    ),
    "ScaledDotProductAttention": Case(
        ann.ScaledDotProductAttention, lambda m, dev: m(_x(dev), _x(dev), _x(dev), mask=_mask(dev))
    ),
    "masked_softmax": Case(
        lambda: None, lambda _, dev: ann.masked_softmax(_x(dev, s=5, d=5), _mask(dev))
    ),
    "AttentionHead": Case(
        lambda: ann.AttentionHead(8, 4), lambda m, dev: m(_x(dev), mask=_mask(dev))
    ),
    "MultiHeadAttention": Case(
        lambda: ann.MultiHeadAttention(8, 2),
        lambda m, dev: (
            m(_x(dev), mask=_mask(dev)),
            m(_x(dev), mask=_mask(dev), need_weights=True),
        ),
    ),
    "tiled_attention": Case(
        lambda: None,
        lambda _, dev: (
            ann.tiled_attention(_x(dev), _x(dev), _x(dev, d=3), _mask(dev), q_tile=2, k_tile=3),
            ann.tiled_attention(_x(dev), _x(dev), _x(dev), is_causal=True, q_tile=3, k_tile=2),
        ),
    ),
    "to_torch_attn_mask": Case(lambda: None, lambda _, dev: ann.to_torch_attn_mask(_mask(dev))),
    "grouped_query_attention": Case(
        lambda: None,
        lambda _, dev: ann.grouped_query_attention(
            torch.randn(2, 4, 5, 3, device=dev),
            torch.randn(2, 2, 5, 3, device=dev),
            torch.randn(2, 2, 5, 3, device=dev),
            _mask(dev),
            need_weights=True,
        ),
    ),
    "LuongAttention": Case(
        lambda: ann.LuongAttention("general", 8, 8, 8),
        lambda m, dev: m(_x(dev), _x(dev), _x(dev), _mask(dev)[:2]),
    ),
    "LuongSeq2Seq": Case(
        lambda: ann.LuongSeq2Seq(10, 7, score="general", hidden=8, embed=4),
        lambda m, dev: m(*_seq2seq_inputs(dev)),
    ),
    "LuongSeq2Seq.greedy": Case(
        lambda: ann.LuongSeq2Seq(10, 7, score="general", hidden=8, embed=4),
        lambda m, dev: m.greedy(*_seq2seq_inputs(dev)[:2], steps=3),
    ),
    "GeneralizedAttention": Case(
        lambda: ann.GeneralizedAttention(8, 2, n_brains=2, f="poly", degree=2),
        lambda m, dev: (m(_x(dev), _mask(dev)), m(_x(dev), _mask(dev), need_weights=True)),
    ),
    "GeneralizedAttention(n1=1.5)": Case(
        lambda: ann.GeneralizedAttention(8, 2, n_brains=2, n1=1.5),
        lambda m, dev: (m(_x(dev), _mask(dev)), m(_x(dev), _mask(dev), need_weights=True)),
    ),
    "gam_logits": Case(
        lambda: None, lambda _, dev: ann.gam_logits(_x(dev), torch.randn(3, 8, 8, device=dev), n1=2)
    ),
    "signed_power": Case(lambda: None, lambda _, dev: ann.signed_power(_x(dev), 1.5)),
    # GAMRelativeAttention checks that the positions increase (it reads their values).
    "GAMRelativeAttention": Case(
        lambda: ann.GAMRelativeAttention(8, 5, h=2, n_brains=2),
        lambda m, dev: (
            m(_x(dev), mask=_mask(dev)),
            m(_x(dev), mask=_mask(dev), need_weights=True),
        ),
        meta=False,
    ),
    "GAMRelativeAttention(geometric)": Case(
        lambda: ann.GAMRelativeAttention(8, 5, h=2, combine="geometric"),
        lambda m, dev: (
            m(_x(dev), positions=torch.tensor([0, 2, 3, 7, 8], device=dev)),
            m(_x(dev), positions=torch.tensor([0, 2, 3, 7, 8], device=dev), need_weights=True),
        ),
        meta=False,
    ),
    "apply_rotary": Case(
        lambda: None,
        lambda _, dev: (
            ann.apply_rotary(_x(dev)),
            ann.apply_rotary(_x(dev), torch.arange(3, 8, device=dev), layout="half"),
        ),
    ),
    "RotaryEmbedding": Case(
        lambda: ann.RotaryEmbedding(8),
        lambda m, dev: (m(_x(dev)[:, None], _x(dev)[:, None]), m(_x(dev), _x(dev))),
    ),
    "ShawRelativeAttention": Case(
        lambda: ann.ShawRelativeAttention(8, 2, 3),
        lambda m, dev: (
            m(_x(dev), mask=_mask(dev)),
            m(_x(dev), mask=_mask(dev), need_weights=True),
        ),
    ),
}


def test_every_public_name_has_a_case():
    """A new module or function in attnlab.nn must be added to CASES."""
    covered = {name.split(".")[0].split("(")[0] for name in CASES}
    public = {
        name
        for name in ann.__all__
        if inspect.isfunction(getattr(ann, name))
        or (inspect.isclass(getattr(ann, name)) and issubclass(getattr(ann, name), nn.Module))
    }
    assert public, "attnlab.nn exports no module or function"
    assert public <= covered, f"no device case for {sorted(public - covered)}"


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c.meta])
def test_forward_runs_on_the_meta_device(name):
    case = CASES[name]
    torch.manual_seed(0)
    module = case.build()
    if module is not None:
        module = module.to(META)
        assert all(p.device == META for p in module.parameters())
    outputs = case.call(module, META)
    for out in _tensors(outputs):
        assert out.device == META, f"{name} returned a tensor on {out.device}"


class FactoriesWithoutDevice(TorchFunctionMode):
    """Record tensor factories that attnlab code calls without ``device=``."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in FACTORIES and "device" not in kwargs:
            caller = sys._getframe(1)
            if caller.f_code.co_filename.startswith(PACKAGE):
                where = f"{Path(caller.f_code.co_filename).name}:{caller.f_lineno}"
                self.calls.append(f"torch.{func.__name__} at {where}")
        return func(*args, **kwargs)


@pytest.mark.parametrize("name", list(CASES))
def test_forward_creates_no_tensor_without_a_device(name):
    case = CASES[name]
    torch.manual_seed(0)
    module = case.build()
    with FactoriesWithoutDevice() as mode:
        case.call(module, torch.device("cpu"))
    assert not mode.calls, f"{name} creates tensors on the default device: {mode.calls}"


def test_factory_check_catches_a_tensor_made_without_a_device():
    """The check itself: a module that builds ``torch.arange(n)`` in forward is reported."""

    class Leaky(nn.Module):
        def forward(self, x: Tensor) -> Tensor:
            return x + torch.arange(x.shape[-1])

    # the mode only reports calls from attnlab's files: compile the module as if it were one
    namespace: dict[str, object] = {}
    source = "def forward(self, x):\n    return x + torch.arange(x.shape[-1])\n"
    exec(compile(source, str(Path(PACKAGE) / "leaky.py"), "exec"), {"torch": torch}, namespace)
    Leaky.forward = namespace["forward"]
    with FactoriesWithoutDevice() as mode:
        Leaky()(torch.zeros(3))
    assert mode.calls == ["torch.arange at leaky.py:2"]
    with pytest.raises(RuntimeError, match="device"):
        Leaky()(torch.zeros(3, device=META))


def _tensors(obj) -> list[Tensor]:
    if isinstance(obj, Tensor):
        return [obj]
    if isinstance(obj, (tuple, list)):
        return [t for item in obj for t in _tensors(item)]
    return []
