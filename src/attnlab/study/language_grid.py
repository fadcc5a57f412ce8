"""The language grid of issue 27: a learning-rate pilot, then the main grid at the chosen rates.

The plan, with the measured step times behind it, is in ``language_plan.md`` beside this
module. In short:

1. **Pilot** (:func:`pilot_grid`): one representative per family (``REPRESENTATIVES``)
   at the rates ``PILOT_LRS``, seed 0, ``PILOT_STEPS`` steps.
2. **Edge** (:func:`edge_grid`): where a representative's best rate is an end of
   ``PILOT_LRS``, one more rate beyond it (``EDGE_LRS``).
3. **Rule, stated before the pilot ran** (:func:`choose_rates`): each family trains at the
   rate of its representative's lowest validation bits per character after the pilot's
   steps (a tie goes to the smaller rate).
4. **Main grid** (:func:`main_grid`): every slot of ``MAIN_SLOTS`` (all but
   ``DROPPED``) at its family's rate,
   ``MAIN_STEPS`` steps, seeds ``SEEDS``, **seed-major** (every slot for seed 0, then
   seed 1, then seed 2), so that a grid cut short holds balanced seeds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from attnlab.study.language import LMRunConfig
from attnlab.study.lm_slots import LM_SLOTS

__all__ = [
    "DROPPED", "DROP_ORDER", "EDGE_LRS", "FAMILIES", "MAIN_SLOTS", "MAIN_STEPS", "PILOT_LRS",
    "PILOT_STEPS", "REPRESENTATIVES", "SEEDS", "TINY", "choose_rates", "edge_grid", "family_of",
    "main_grid", "pilot_grid",
]  # fmt: skip

#: The families that share a learning rate, each with its slots.
FAMILIES: dict[str, tuple[str, ...]] = {
    "sdpa": ("sdpa-learned", "sdpa-rotary", "shaw", "sdpa-matched", "sdpa-sinusoidal"),
    "gam-1": ("gam-p2", "gam-poly", "luong", "gam-p1"),
    "gam-2": ("gam-p2-b2", "gam-poly-b2"),
    "gamrel": ("gamrel", "gamrel-c1"),
}
#: The slot of each family that the pilot trains.
REPRESENTATIVES = {"sdpa": "sdpa-learned", "gam-1": "gam-p2", "gam-2": "gam-p2-b2",
                   "gamrel": "gamrel"}  # fmt: skip
PILOT_LRS = (1e-3, 3e-3, 1e-2)
#: The rate beyond each end of ``PILOT_LRS``.
EDGE_LRS = {1e-3: 3e-4, 1e-2: 3e-2}
PILOT_STEPS = 1000
PILOT_SEED = 0
MAIN_STEPS = 2000
SEEDS = (0, 1, 2)
#: Named before the grid ran: the slots dropped first, in this order, if the main grid does
#: not fit its budget (``language_plan.md``): ``gam-poly-b2``, the most expensive slot (about a
#: fifth of the grid), whose question (do two brains help?) ``gam-p2-b2`` asks too; then
#: ``gam-p1``, which computes Luong's function class (chapter 10's sanity pair).
DROP_ORDER = ("gam-poly-b2", "gam-p1")
#: The slots dropped: the pilot's first rows cost 1.15–1.33 times the planned CPU-seconds,
#: which projects the full main grid to about 5.6 CPU-hours; without ``gam-poly-b2`` it is
#: about 4.4 (``language_plan.md``).
DROPPED = DROP_ORDER[:1]
#: The slots of the main grid in their order within a seed (``LM_SLOTS``'s order).
MAIN_SLOTS = tuple(s for s in LM_SLOTS if s not in DROPPED)
#: Sizes of the tests' tiny grid (seconds per run).
TINY = {"d": 8, "layers": 1, "h": 2, "context": 16, "batch_size": 4, "eval_chars": 600,
        "curve_points": 2}  # fmt: skip


def family_of(slot: str) -> str:
    """The family (a key of ``FAMILIES``) a slot takes its rate from."""
    for family, slots in FAMILIES.items():
        if slot in slots:
            return family
    raise ValueError(f"unknown slot {slot!r}; choose one of {', '.join(LM_SLOTS)}")


def pilot_grid(steps: int = PILOT_STEPS, **sizes) -> list[LMRunConfig]:
    """Every representative at every rate of ``PILOT_LRS`` (seed 0), family by family."""
    return [
        LMRunConfig(slot, PILOT_SEED, lr=lr, steps=steps, **sizes)
        for slot in REPRESENTATIVES.values()
        for lr in PILOT_LRS
    ]


def _best(rows: Iterable[Mapping[str, str]], slot: str, lrs: Iterable[float]) -> float | None:
    """The rate of ``lrs`` with the lowest ``val_bpc`` among ``rows`` of ``slot``, if all ran."""
    scores = {float(r["lr"]): float(r["val_bpc"]) for r in rows if r["slot"] == slot}
    lrs = list(lrs)
    if any(lr not in scores for lr in lrs):
        return None
    return min(lrs, key=lambda lr: (scores[lr], lr))


def edge_grid(pilot_rows: Iterable[Mapping[str, str]], steps: int = PILOT_STEPS, **sizes):
    """For each representative whose best pilot rate is an end of ``PILOT_LRS``, the next rate."""
    rows = list(pilot_rows)
    out = []
    for slot in REPRESENTATIVES.values():
        best = _best(rows, slot, PILOT_LRS)
        if best in EDGE_LRS:
            out.append(LMRunConfig(slot, PILOT_SEED, lr=EDGE_LRS[best], steps=steps, **sizes))
    return out


def choose_rates(rows: Iterable[Mapping[str, str]]) -> dict[str, float]:
    """Each family's rate by the rule: its representative's lowest validation bpc in the pilot.

    A family is left out while its pilot is incomplete: a rate of ``PILOT_LRS`` missing, or
    the best at an end without the rate beyond it.
    """
    rows = list(rows)
    rates = {}
    for family, slot in REPRESENTATIVES.items():
        best = _best(rows, slot, PILOT_LRS)
        if best is None:
            continue
        if best in EDGE_LRS:
            best = _best(rows, slot, (*PILOT_LRS, EDGE_LRS[best]))
            if best is None:
                continue
        rates[family] = best
    return rates


def main_grid(
    rates: Mapping[str, float],
    steps: int = MAIN_STEPS,
    seeds: Iterable[int] = SEEDS,
    slots: Iterable[str] = MAIN_SLOTS,
    **sizes,
) -> list[LMRunConfig]:
    """Every slot at its family's rate, seed-major; slots whose family has no rate are left out."""
    slots = [s for s in slots if family_of(s) in rates]
    return [
        LMRunConfig(slot, seed, lr=rates[family_of(slot)], steps=steps, **sizes)
        for seed in seeds
        for slot in slots
    ]
