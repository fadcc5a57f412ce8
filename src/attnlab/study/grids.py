"""The named grids of chapter 10's study, each a list of :class:`RunConfig` in priority order.

``"full"`` is built in blocks, most important first, so that a run cut short by a time limit
(``python -m attnlab.study --max-minutes``) still holds complete blocks:

1. ``ablation``: the embedding of ``r`` in GAM's relative branch (``none``, ``layernorm``,
   ``scaled``) for ``gam-p1``, ``gam-p2``, ``gam-poly`` on the gapped task;
2. ``gapped``: the comparators on the gapped task (Shaw's tables with ``sdpa`` and ``luong``,
   learned absolute positions with ``sdpa``, ``gam-p1``, ``gam-p2``);
3. ``length``: shift at n = 16, tested at n = 32, for the models that accept another length
   (Shaw's tables); ``sdpa`` with absolute positions as the one saturated sanity row;
4. ``matched``: parameter-matched controls: ``sdpa`` + Shaw at width 36 (12,178 parameters)
   against GAM-relative at width 32 (11,790; Shaw at width 32 has 9,802, 17 % fewer);
5. ``sanity``: the sanity pair (``luong`` ≡ one-brain ``gam-p1``, absolute positions) on
   recall, the content task that no method saturates;
6. ``lr``: learning rates 1e-3 and 1e-2 beside 3e-3 for the main gapped comparisons;
7. ``layers2``: two blocks instead of one on the gapped task;
8. ``recall``: the content task for the other attentions;
9. ``brains``: two brains, and their parameter-matched Shaw control (width 42);
10. ``reverse``: the absolute-position task for the relative models;
11. ``far``: the gapped task with the answer 10 corpus positions back, beyond the clipping
    distance ``k_max = 8`` of Shaw's tables, with a width-36 Shaw control (added after the
    first ten blocks had run);
12. ``lr-recall``, ``lr-gapped``, ``lr-far``, ``lr-other``: rates 1e-3 and 1e-2 for every
    configuration of blocks 2–5 and 7–11 that block 6 does not sweep (second edition, second
    pass), so that every configuration's rate is chosen on validation among ``LRS``;
13. ``far-k12``: Shaw's tables with ``k_max = 12`` (beyond the answer's distance 10) on the
    far task, at every rate of ``LRS`` (third pass);
14. ``lr-edge``: the next rate beyond the end of ``LRS`` that a configuration chose
    (``EDGE_SPECS``, third pass);
15. ``gapped-long``: the ``ablation`` block at ``LONG_STEPS`` steps and every rate of ``LRS``
    (third pass).

Every block uses seeds 0–4, n = 16 and batches of 32; recall runs (blocks ``sanity``,
``recall``, ``lr-recall``) train for ``RECALL_STEPS`` steps, every other run for
``FULL_STEPS``.
"""

from __future__ import annotations

from dataclasses import replace

from attnlab.study.runner import RunConfig

#: Training steps of every run of the full grid but recall (the curves of a pilot had
#: flattened or solved the task by then, except GAM-relative on the gapped task, still falling
#: slowly, and most recall runs: see ``RECALL_STEPS``).
FULL_STEPS = 800
#: Training steps of the recall runs: a pilot of 4000 steps on two seeds
#: (``book/study/pilot_steps.py``, table in ``book/study/timing.md``) found 4 of its 12 recall
#: curves flat (the rule of :func:`attnlab.study.stats.summarize`) or near zero loss at 800
#: steps and 9 of 12 at 4000, the most the CPU budget allowed with the rate sweep.
RECALL_STEPS = 4000
#: Seeds of every configuration of the full grid.
SEEDS = (0, 1, 2, 3, 4)
#: Training steps of the block ``gapped-long``: GAM-relative on the gapped task, where 31 of
#: the 45 runs at the chosen rates were flat at ``FULL_STEPS`` (third pass).
LONG_STEPS = 2000
#: The learning rates of the sweep (3e-3 is the default of every other block).
LRS = (1e-3, 3e-3, 1e-2)
#: The configurations whose best validation rate among ``LRS`` was an end of the sweep (32 of
#: 42 after the second pass), each with the next rate beyond that end (3e-4 below 1e-3, 3e-2
#: above 1e-2): the block ``lr-edge`` (third pass).
EDGE_SPECS = (
        ("gapped", "gam-p1", "rel", "none", {"steps": 800, "lr": 0.0003}),
        ("gapped", "gam-p1", "rel", "layernorm", {"steps": 800, "lr": 0.03}),
        ("gapped", "gam-p1", "rel", "scaled", {"steps": 800, "lr": 0.03}),
        ("gapped", "gam-p2", "rel", "layernorm", {"steps": 800, "lr": 0.0003}),
        ("gapped", "gam-poly", "rel", "none", {"steps": 800, "lr": 0.0003}),
        ("gapped", "sdpa", "rel", "-", {"steps": 800, "lr": 0.0003}),
        ("gapped", "luong", "rel", "-", {"steps": 800, "lr": 0.0003}),
        ("gapped", "sdpa", "abs", "-", {"steps": 800, "lr": 0.0003}),
        ("gapped", "gam-p1", "abs", "-", {"steps": 800, "lr": 0.0003}),
        ("shift", "sdpa", "rel", "-", {"long_n": 32, "steps": 800, "lr": 0.0003}),
        ("shift", "luong", "rel", "-", {"long_n": 32, "steps": 800, "lr": 0.0003}),
        ("shift", "sdpa", "abs", "-", {"steps": 800, "lr": 0.0003}),
        ("gapped", "sdpa", "rel", "-", {"d": 36, "steps": 800, "lr": 0.0003}),
        ("recall", "luong", "abs", "-", {"steps": 4000, "lr": 0.0003}),
        ("recall", "gam-p1", "abs", "-", {"steps": 4000, "lr": 0.0003}),
        ("gapped", "sdpa", "rel", "-", {"layers": 2, "steps": 800, "lr": 0.0003}),
        ("gapped", "gam-p2", "rel", "none", {"layers": 2, "steps": 800, "lr": 0.0003}),
        ("gapped", "gam-p2", "rel", "layernorm", {"layers": 2, "steps": 800, "lr": 0.0003}),
        ("recall", "sdpa", "rel", "-", {"steps": 4000, "lr": 0.0003}),
        ("gapped", "gam-p1-b2", "rel", "layernorm", {"steps": 800, "lr": 0.03}),
        ("gapped", "gam-p2-b2", "rel", "layernorm", {"steps": 800, "lr": 0.0003}),
        ("gapped", "sdpa", "rel", "-", {"d": 42, "steps": 800, "lr": 0.0003}),
        ("reverse", "sdpa", "rel", "-", {"steps": 800, "lr": 0.03}),
        ("reverse", "gam-p1", "rel", "layernorm", {"steps": 800, "lr": 0.0003}),
        ("reverse", "gam-p1", "rel", "none", {"steps": 800, "lr": 0.0003}),
        ("gapped-far", "sdpa", "rel", "-", {"steps": 800, "lr": 0.0003}),
        ("gapped-far", "luong", "rel", "-", {"steps": 800, "lr": 0.0003}),
        ("gapped-far", "sdpa", "abs", "-", {"steps": 800, "lr": 0.0003}),
        ("gapped-far", "sdpa", "rel", "-", {"d": 36, "steps": 800, "lr": 0.0003}),
        ("gapped-far", "gam-p2", "rel", "layernorm", {"steps": 800, "lr": 0.03}),
        ("gapped-far", "gam-p2", "rel", "scaled", {"steps": 800, "lr": 0.03}),
        ("gapped-far", "gam-poly", "rel", "scaled", {"steps": 800, "lr": 0.03}),
)  # fmt: skip


#: The blocks 1–11 of the full grid at the default rate 3e-3, in priority order: one
#: ``(task, attention, positions, embedding[, settings])`` per configuration (see the list
#: above). :func:`full_blocks` runs each on every seed of ``SEEDS``. A block holds recall
#: runs only or none (they train for another number of steps).
_BLOCKS = {
    "ablation": [
        ("gapped", a, "rel", e)
        for a in ("gam-p1", "gam-p2", "gam-poly")
        for e in ("none", "layernorm", "scaled")
    ],
    "gapped": [
        ("gapped", "sdpa", "rel", "-"),
        ("gapped", "luong", "rel", "-"),
        ("gapped", "sdpa", "abs", "-"),
        ("gapped", "gam-p1", "abs", "-"),
        ("gapped", "gam-p2", "abs", "-"),
    ],
    "length": [
        ("shift", "sdpa", "rel", "-", {"long_n": 32}),
        ("shift", "luong", "rel", "-", {"long_n": 32}),
        ("shift", "sdpa", "abs", "-"),
    ],
    "matched": [("gapped", "sdpa", "rel", "-", {"d": 36})],
    "sanity": [("recall", "luong", "abs", "-"), ("recall", "gam-p1", "abs", "-")],
    "lr": [
        ("gapped", *config, {"lr": lr})
        for config in (
            ("sdpa", "rel", "-"),
            ("sdpa", "abs", "-"),
            ("gam-p2", "rel", "none"),
            ("gam-p2", "rel", "layernorm"),
            ("gam-p1", "rel", "layernorm"),
        )
        for lr in LRS
        if lr != 3e-3
    ],
    "layers2": [
        ("gapped", "sdpa", "rel", "-", {"layers": 2}),
        ("gapped", "gam-p2", "rel", "none", {"layers": 2}),
        ("gapped", "gam-p2", "rel", "layernorm", {"layers": 2}),
        ("gapped", "gam-p1", "rel", "layernorm", {"layers": 2}),
    ],
    "recall": [
        ("recall", "sdpa", "abs", "-"),
        ("recall", "gam-p2", "abs", "-"),
        ("recall", "sdpa", "rel", "-"),
        ("recall", "gam-p2", "rel", "layernorm"),
    ],
    "brains": [
        ("gapped", "gam-p1-b2", "rel", "layernorm"),
        ("gapped", "gam-p2-b2", "rel", "layernorm"),
        ("gapped", "sdpa", "rel", "-", {"d": 42}),
    ],
    "reverse": [
        ("reverse", "sdpa", "rel", "-"),
        ("reverse", "gam-p1", "rel", "layernorm"),
        ("reverse", "gam-p1", "rel", "none"),
    ],
    "far": [
        ("gapped-far", "sdpa", "rel", "-"),
        ("gapped-far", "luong", "rel", "-"),
        ("gapped-far", "sdpa", "abs", "-"),
        ("gapped-far", "sdpa", "rel", "-", {"d": 36}),
        ("gapped-far", "gam-p1", "rel", "layernorm"),
        ("gapped-far", "gam-p2", "rel", "layernorm"),
        ("gapped-far", "gam-p2", "rel", "scaled"),
        ("gapped-far", "gam-poly", "rel", "scaled"),
    ],
}  # fmt: skip


def _block(specs, seeds=SEEDS, **common) -> list[RunConfig]:
    """Configurations for every ``(task, attention, positions, embedding, extra)`` × seed."""
    out = []
    for spec in specs:
        task, attention, positions, embedding, *extra = spec
        kwargs = dict(common) | (extra[0] if extra else {})
        out += [
            RunConfig(task, attention, positions, seed, embedding=embedding, **kwargs)
            for seed in seeds
        ]
    return out


def _sweep(block: list[RunConfig]) -> list[RunConfig]:
    """The configurations of ``block`` (all at 3e-3) at the other rates of ``LRS``."""
    return [replace(c, lr=lr) for lr in LRS if lr != 3e-3 for c in block]


def full_blocks(
    steps: int = FULL_STEPS, recall_steps: int = RECALL_STEPS
) -> dict[str, list[RunConfig]]:
    """The blocks of the full grid by name, in priority order.

    Recall runs train ``recall_steps`` steps, every other run ``steps`` (except
    ``gapped-long``, at ``LONG_STEPS``).
    """
    blocks = {
        name: _block(specs, steps=recall_steps if specs[0][0] == "recall" else steps)
        for name, specs in _BLOCKS.items()
    }
    blocks["lr-recall"] = _sweep(blocks["sanity"] + blocks["recall"])
    swept = {c.key() for c in blocks["lr"]}
    ablation = [c for c in blocks["ablation"] if replace(c, lr=1e-3).key() not in swept]
    gapped = [c for c in blocks["gapped"] if replace(c, lr=1e-3).key() not in swept]
    blocks["lr-gapped"] = _sweep(ablation + gapped + blocks["matched"])
    blocks["lr-far"] = _sweep(blocks["far"])
    blocks["lr-other"] = _sweep(
        blocks["length"] + blocks["reverse"] + blocks["layers2"] + blocks["brains"]
    )
    blocks["far-k12"] = _block(
        [("gapped-far", "sdpa", "rel", "-", {"shaw_k": 12, "lr": lr}) for lr in LRS], steps=steps
    )
    blocks["lr-edge"] = _block(
        [
            (
                *spec[:4],
                spec[4] | {"steps": steps if spec[4]["steps"] == FULL_STEPS else recall_steps},
            )
            for spec in EDGE_SPECS
        ]
    )
    blocks["gapped-long"] = [
        replace(c, steps=LONG_STEPS, lr=lr) for lr in (3e-3, 1e-3, 1e-2) for c in blocks["ablation"]
    ]
    return blocks


def reduced_grid() -> list[RunConfig]:
    """The notebook's grid: 8 runs of 200 steps (seeds 0 and 1).

    GAM-relative ``gam-p2`` with the raw and the layer-normalised embedding and Shaw's
    ``sdpa`` on the gapped task, and Shaw's ``sdpa`` on shift tested at n = 32.
    """
    specs = [
        ("gapped", "gam-p2", "rel", "none"),
        ("gapped", "gam-p2", "rel", "layernorm"),
        ("gapped", "sdpa", "rel", "-"),
        ("shift", "sdpa", "rel", "-", {"long_n": 32}),
    ]
    return _block(specs, seeds=(0, 1), steps=200)


#: The grid names of :func:`grid`.
GRIDS = ("full", "reduced")


def grid(name: str = "reduced") -> list[RunConfig]:
    """The configurations of a named grid (``"full"`` in priority order, or ``"reduced"``).

    Examples
    --------
    >>> from attnlab.study import grid
    >>> len(grid("full")), len(grid("reduced"))
    (940, 8)
    """
    if name == "full":
        return [config for block in full_blocks().values() for config in block]
    if name == "reduced":
        return reduced_grid()
    raise ValueError(f"unknown grid {name!r}; choose one of {', '.join(GRIDS)}")
