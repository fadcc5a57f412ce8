"""The attention slots of the language grid: chapter 11's model with another causal attention.

Every model of the grid is chapter 11's :class:`~attnlab.lm.model.CharTransformer` (pre-norm
decoder, GELU MLP, bias-free projections, learned/sinusoidal/rotary or no absolute
positions) whose attention modules are swapped for one of ``LM_SLOTS``:

- ``sdpa-learned``, ``sdpa-sinusoidal``, ``sdpa-rotary``: chapter 11's own
  :class:`~attnlab.lm.blocks.CausalSelfAttention` (PyTorch's ``is_causal`` kernel) with the
  three kinds of absolute positions; ``sdpa-matched`` is ``sdpa-learned`` made wider
  (``MATCHED_D``) to about the parameter count of ``gam-p2-b2``;
- ``shaw``: ``attnlab.nn.ShawRelativeAttention`` (clipping distance ``SHAW_K``), no
  absolute positions;
- ``luong``: :class:`attnlab.study.slots.LuongSelfAttention` (Luong's general score per
  head), learned positions;
- ``gam-p1``, ``gam-p2``, ``gam-p2-b2``, ``gam-poly``, ``gam-poly-b2``:
  ``attnlab.nn.GeneralizedAttention`` (power 1 or 2, or the degree-2 polynomial; one or
  two brains), learned positions;
- ``gamrel``, ``gamrel-c1``: ``attnlab.nn.GAMRelativeAttention`` (power 2, one brain,
  linear combination, ``r`` embedded ``"scaled"``: chapter 10's best embedding for
  ``gam-p2``), no absolute positions; ``c1 = 0.5`` fixed, or learned
  (:class:`LearnedC1GAMRelative`).

:class:`CausalSlot` gives each module the causal mask (``True`` where ``j <= i``). The GAM
modules run one pinned path, ``GAM_PATH`` (``"fused"``: the modules' default,
``need_weights=False``, one ``scaled_dot_product_attention`` call per brain; not slower
than the explicit path in an interleaved measurement at this shape on one CPU thread, see
``language_plan.md``), recorded per row of the CSV.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnlab.lm.blocks import causal_mask
from attnlab.lm.model import CharTransformer, LMConfig
from attnlab.nn import GAMRelativeAttention, GeneralizedAttention, ShawRelativeAttention
from attnlab.study.slots import LuongSelfAttention

__all__ = [
    "GAM_PATH", "GAM_PATHS", "LM_SLOTS", "MATCHED_D", "SHAW_K", "CausalSlot",
    "LearnedC1GAMRelative", "SlotSpec", "build_lm", "slot_path",
]  # fmt: skip

#: Clipping distance ``k_max`` of Shaw's tables in the language grid (distances beyond 32
#: characters, about six words, share the end rows).
SHAW_K = 32
#: Width of ``sdpa-matched``: the multiple of 4 whose ``sdpa-learned`` model is closest in
#: parameters to ``gam-p2-b2`` at d = 64 (checked in the tests).
MATCHED_D = 76
#: The paths a GAM module can take (``attnlab.nn.gam``); the grid pins ``GAM_PATH``.
GAM_PATHS = ("explicit", "fused", "tiled", "recompute")
GAM_PATH = "fused"


@dataclass(frozen=True)
class SlotSpec:
    """One slot of the language grid.

    Attributes
    ----------
    kind : str
        ``"sdpa"``, ``"shaw"``, ``"luong"``, ``"gam"`` or ``"gamrel"``.
    positions : str
        Absolute positions of the model: ``"learned"``, ``"sinusoidal"``, ``"rotary"`` or
        ``"none"``.
    n1, f, degree, n_brains
        GAM's feature function and brains (ignored by the other kinds).
    learn_c1 : bool
        GAM-relative's content weight ``c1`` learned instead of fixed at 0.5.
    d : int or None
        A width of its own (``sdpa-matched``); ``None``: the grid's width.
    """

    kind: str
    positions: str = "learned"
    n1: float = 1.0
    f: str = "power"
    degree: int | None = None
    n_brains: int = 1
    learn_c1: bool = False
    d: int | None = None


#: The slots by name, in the order of the grid.
LM_SLOTS: dict[str, SlotSpec] = {
    "sdpa-learned": SlotSpec("sdpa"),
    "gam-p2": SlotSpec("gam", n1=2.0),
    "gam-p2-b2": SlotSpec("gam", n1=2.0, n_brains=2),
    "gamrel": SlotSpec("gamrel", positions="none", n1=2.0),
    "sdpa-rotary": SlotSpec("sdpa", positions="rotary"),
    "shaw": SlotSpec("shaw", positions="none"),
    "gam-poly": SlotSpec("gam", f="poly", degree=2),
    "gamrel-c1": SlotSpec("gamrel", positions="none", n1=2.0, learn_c1=True),
    "sdpa-matched": SlotSpec("sdpa", d=MATCHED_D),
    "sdpa-sinusoidal": SlotSpec("sdpa", positions="sinusoidal"),
    "luong": SlotSpec("luong"),
    "gam-p1": SlotSpec("gam", n1=1.0),
    "gam-poly-b2": SlotSpec("gam", f="poly", degree=2, n_brains=2),
}


def slot_path(slot: str) -> str:
    """The GAM path a slot trains with (``GAM_PATH``), or ``"-"`` for a slot without GAM."""
    return GAM_PATH if LM_SLOTS[slot].kind in ("gam", "gamrel") else "-"


class LearnedC1GAMRelative(GAMRelativeAttention):
    """GAM-relative whose content weight ``c1 = sigmoid(w)`` is learned (``w`` starts at 0).

    The parent combines ``c1 z + (1 - c1) π``; here ``c1`` is a property over the parameter
    ``c1_logit``, so the combination is the parent's with a trainable weight in ``(0, 1)``.
    Only ``combine="linear"``.

    Shapes
    ------
    As ``attnlab.nn.GAMRelativeAttention``.
    """

    def __init__(self, *args, **kwargs) -> None:
        if kwargs.get("combine", "linear") != "linear":
            raise ValueError("a learned c1 needs combine='linear'")
        super().__init__(*args, **kwargs)

    @property
    def c1(self) -> Tensor:
        return torch.sigmoid(self.c1_logit)

    @c1.setter
    def c1(self, value: float) -> None:  # the parent's __init__ sets the starting value
        start = math.log(value / (1.0 - value))
        self.c1_logit = nn.Parameter(torch.tensor(start))


class CausalSlot(nn.Module):
    """An ``attnlab.nn`` attention module in chapter 11's block: ``forward(x)`` with a causal mask.

    Parameters
    ----------
    inner : torch.nn.Module
        ``inner(x, mask=..., need_weights=...)`` as the book's modules take it.
    path : str
        ``"explicit"`` asks the module for its weights (and drops them), which forms the
        ``n × n`` weights; ``"fused"`` (or a module built tiled/recompute) does not.

    Shapes
    ------
    ``x (b, n, d)`` → ``(b, n, d)``; output ``i`` depends on ``x[:, :i + 1]`` only.
    """

    def __init__(self, inner: nn.Module, path: str = "-") -> None:
        super().__init__()
        self.inner, self.path = inner, path
        self._mask = torch.zeros(0, 0, dtype=torch.bool)

    def forward(self, x: Tensor) -> Tensor:
        n = x.shape[1]
        if self._mask.shape[0] != n or self._mask.device != x.device:
            self._mask = causal_mask(n, device=x.device)
        if self.path == "explicit":
            out, _ = self.inner(x, mask=self._mask, need_weights=True)
            return out
        return self.inner(x, mask=self._mask)


def _gam_kwargs(spec: SlotSpec, path: str) -> dict:
    return dict(
        n_brains=spec.n_brains, f=spec.f, n1=spec.n1, degree=spec.degree,
        tiled=path == "tiled", recompute=path == "recompute",
    )  # fmt: skip


def _make_slot(spec: SlotSpec, d: int, h: int, context: int, path: str) -> nn.Module:
    if spec.kind == "shaw":
        return CausalSlot(ShawRelativeAttention(d, h, SHAW_K))
    if spec.kind == "luong":
        return CausalSlot(LuongSelfAttention(d, h))
    if spec.kind == "gam":
        return CausalSlot(GeneralizedAttention(d, h, **_gam_kwargs(spec, path)), path)
    cls = LearnedC1GAMRelative if spec.learn_c1 else GAMRelativeAttention
    inner = cls(
        d, context, h, combine="linear", c1=0.5, rel_embedding="scaled", **_gam_kwargs(spec, path)
    )
    return CausalSlot(inner, path)


def _redraw_shared(model: CharTransformer, seed: int) -> None:
    """Draw every parameter outside the attention modules from its own seeded generator.

    Each 2-D parameter ``name`` gets chapter 11's initialisation (normal, std 0.02; the MLP's
    output divided by ``sqrt(2L)``) from ``torch.Generator().manual_seed((crc32(name) +
    seed · 2654435761) mod 2³²)``, so that a seed gives the same shared parts whatever the
    attention and whatever the other parameters drew. (Modulo 2³² because PyTorch's CPU
    generator keeps only the low 32 bits of a seed: ``seed · 2³² + crc32(name)`` would give
    every seed the same draws.) Norm gains stay at one.
    """
    layers = model.config.layers
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".attn." in name or p.dim() != 2:
                continue
            mixed = (zlib.crc32(name.encode()) + seed * 2654435761) % 2**32
            generator = torch.Generator().manual_seed(mixed)
            std = 0.02 / (math.sqrt(2 * layers) if name.endswith("mlp.down.weight") else 1.0)
            p.copy_(torch.randn(p.shape, generator=generator) * std)


def build_lm(
    slot: str, *, vocab_size: int, seed: int, d: int = 64, layers: int = 2, h: int = 4,
    context: int = 128, path: str = GAM_PATH,
) -> CharTransformer:  # fmt: skip
    """The untrained model of a slot: chapter 11's model with the slot's causal attention.

    The shared parts (embedding, absolute position table, norms, MLPs, head) are drawn by
    ``_redraw_shared`` from ``seed`` alone; the attention modules from
    ``torch.manual_seed(seed)``, block after block.

    Raises
    ------
    ValueError
        On an unknown slot or path (and as :class:`~attnlab.lm.model.LMConfig` on bad sizes).
    """
    if slot not in LM_SLOTS:
        raise ValueError(f"unknown slot {slot!r}; choose one of {', '.join(LM_SLOTS)}")
    if path not in GAM_PATHS:
        raise ValueError(f"path must be one of {', '.join(GAM_PATHS)}, got {path!r}")
    spec = LM_SLOTS[slot]
    width = spec.d or d
    positions = "learned" if spec.positions == "none" else spec.positions
    config = LMConfig(
        vocab_size=vocab_size, d=width, layers=layers, heads=h, context=context,
        positions=positions, attention="sdpa",
    )  # fmt: skip
    model = CharTransformer(config)
    if spec.positions == "none":
        model.positions = None  # relative positions only (CharTransformer skips None)
    if spec.kind != "sdpa":
        torch.manual_seed(seed)
        for block in model.blocks:
            block.attn = _make_slot(spec, width, h, context, path)
    else:
        torch.manual_seed(seed)
        for block in model.blocks:
            nn.init.normal_(block.attn.qkv.weight, std=0.02)
            nn.init.normal_(block.attn.out.weight, std=0.02 / math.sqrt(2 * layers))
    _redraw_shared(model, seed)
    return model
