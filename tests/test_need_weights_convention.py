"""One calling convention for attention weights across ``attnlab.nn`` (issue 18).

Every public module whose ``forward`` takes ``need_weights`` follows ``MultiHeadAttention``:
the default is ``False`` and returns the output only (through a fused path where the module
has one); ``need_weights=True`` returns ``(out, weights)`` with the same ``out``; anything but
a bool (``1``, ``"yes"``) is a ``TypeError``. The modules are found by inspecting
``attnlab.nn.__all__``, so a new module is covered (or must be added to ``CASES`` or, with a
reason, to ``ALWAYS_PAIRS``); so are the public functions that take ``need_weights``
(``FUNCTION_CASES``).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
from torch import Tensor, nn

import attnlab.nn as ann


def _public_modules() -> dict[str, type[nn.Module]]:
    return {
        name: obj
        for name in ann.__all__
        if inspect.isclass(obj := getattr(ann, name)) and issubclass(obj, nn.Module)
    }


def _takes_need_weights(cls: type[nn.Module]) -> bool:
    return "need_weights" in inspect.signature(cls.forward).parameters


WITH_NEED_WEIGHTS = sorted(
    name for name, cls in _public_modules().items() if _takes_need_weights(cls)
)

#: Public functions of ``attnlab.nn`` that take ``need_weights`` (the same convention).
FUNCTIONS_WITH_NEED_WEIGHTS = sorted(
    name
    for name in ann.__all__
    if inspect.isfunction(fn := getattr(ann, name))
    and "need_weights" in inspect.signature(fn).parameters
)

#: Public modules that always return their weights, and why (they take no ``need_weights``).
#: Each is a teaching piece whose weights are the lesson, not a layer with a cheaper path.
ALWAYS_PAIRS = {
    "ScaledDotProductAttention": "chapter 02's formula as a module; the weights are its point",
    "AttentionHead": "chapter 06's single head; its probabilities are plotted",
    "LuongAttention": "chapter 07's score; the decoder keeps its alignments",
    "LuongSeq2Seq": "not an attention layer: logits and every step's alignments",
    "RotaryEmbedding": "not an attention layer: it returns the rotated (q, k), no weights",
}


@dataclass(frozen=True)
class Case:
    build: Callable[[], nn.Module]
    kwargs: Callable[[], dict]


def _x() -> Tensor:
    return torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(1), dtype=torch.float64)


CAUSAL = torch.tril(torch.ones(5, 5, dtype=torch.bool))

CASES: dict[str, Case] = {
    "MultiHeadAttention": Case(lambda: ann.MultiHeadAttention(8, 2), lambda: {"mask": CAUSAL}),
    "GeneralizedAttention": Case(
        lambda: ann.GeneralizedAttention(8, 2, n_brains=2, n1=2.0), lambda: {"mask": CAUSAL}
    ),
    "GAMRelativeAttention": Case(
        lambda: ann.GAMRelativeAttention(8, 5, h=2, n_brains=2, combine="geometric"),
        lambda: {"positions": torch.tensor([0, 2, 3, 7, 8]), "mask": CAUSAL},
    ),
    "ShawRelativeAttention": Case(
        lambda: ann.ShawRelativeAttention(8, 2, k_max=2), lambda: {"mask": CAUSAL}
    ),
}


def _grouped(**kwargs):
    gen = torch.Generator().manual_seed(2)
    q = torch.randn(2, 4, 5, 3, generator=gen, dtype=torch.float64)
    k, v = (torch.randn(2, 2, 5, 3, generator=gen, dtype=torch.float64) for _ in range(2))
    return ann.grouped_query_attention(q, k, v, CAUSAL, **kwargs)


#: A call of each public function with ``need_weights``, its other arguments fixed.
FUNCTION_CASES: dict[str, Callable[..., object]] = {"grouped_query_attention": _grouped}


def test_every_public_module_either_takes_need_weights_or_says_why_not():
    public = _public_modules()
    assert WITH_NEED_WEIGHTS, "no public module of attnlab.nn takes need_weights"
    without = {name for name, cls in public.items() if not _takes_need_weights(cls)}
    assert without == set(ALWAYS_PAIRS), (
        f"modules without need_weights: {sorted(without)}; documented exceptions: "
        f"{sorted(ALWAYS_PAIRS)}"
    )
    assert set(WITH_NEED_WEIGHTS) <= set(CASES), (
        f"add a case for {sorted(set(WITH_NEED_WEIGHTS) - set(CASES))}"
    )
    assert FUNCTIONS_WITH_NEED_WEIGHTS, "no public function of attnlab.nn takes need_weights"
    assert set(FUNCTIONS_WITH_NEED_WEIGHTS) <= set(FUNCTION_CASES), (
        f"add a case for {sorted(set(FUNCTIONS_WITH_NEED_WEIGHTS) - set(FUNCTION_CASES))}"
    )


@pytest.mark.parametrize("name", WITH_NEED_WEIGHTS + FUNCTIONS_WITH_NEED_WEIGHTS)
def test_need_weights_defaults_to_false(name):
    obj = getattr(ann, name)
    parameter = inspect.signature(getattr(obj, "forward", obj)).parameters["need_weights"]
    assert parameter.default is False, f"{name}(need_weights={parameter.default!r})"


@pytest.mark.parametrize("bad", [1, 0, "yes", None], ids=["1", "0", "yes", "None"])
@pytest.mark.parametrize("name", WITH_NEED_WEIGHTS + FUNCTIONS_WITH_NEED_WEIGHTS)
def test_need_weights_must_be_a_bool(name, bad):
    """One rule: ``need_weights=1`` is not read as ``True`` (nor ``"yes"``, ``0``, ``None``)."""
    if name in FUNCTION_CASES:
        call = FUNCTION_CASES[name]
    else:
        case = CASES[name]
        torch.manual_seed(0)
        module = case.build().double()
        x = _x()

        def call(**kwargs):
            return module(x, **case.kwargs(), **kwargs)

    with pytest.raises(
        TypeError, match="^need_weights must be True or False, got " + re.escape(repr(bad))
    ):
        call(need_weights=bad)


def _weight_tensors(weights) -> list[Tensor]:
    if isinstance(weights, Tensor):
        return [weights]
    assert isinstance(weights, tuple) and weights, f"weights of type {type(weights).__name__}"
    assert all(isinstance(w, Tensor) for w in weights)
    return list(weights)


@pytest.mark.parametrize("checked", [False, True], ids=["plain", "check_values"])
@pytest.mark.parametrize("name", WITH_NEED_WEIGHTS)
def test_default_returns_the_output_only_and_true_adds_the_weights(name, checked):
    case = CASES[name]
    torch.manual_seed(0)
    module = case.build().double()
    x = _x()
    with ann.check_values(checked):
        out = module(x, **case.kwargs())
        pair = module(x, **case.kwargs(), need_weights=True)
    assert isinstance(out, Tensor), f"{name}(...) returned {type(out).__name__}, not a Tensor"
    assert out.shape == x.shape
    assert isinstance(pair, tuple) and len(pair) == 2, f"{name}(..., need_weights=True)"
    explicit, weights = pair
    torch.testing.assert_close(out, explicit, rtol=0, atol=1e-12)
    for w in _weight_tensors(weights):
        # attention weights: (batch, h, s, s), zero where masked, each row a distribution
        assert w.shape == (2, 2, 5, 5)
        assert torch.all(w[..., ~CAUSAL] == 0)
        torch.testing.assert_close(w.sum(-1), torch.ones(2, 2, 5, dtype=w.dtype))
