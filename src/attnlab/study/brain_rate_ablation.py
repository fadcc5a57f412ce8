"""Is GAM's gap the rate of its brains or of everything else? An ablation (chapter 12).

In the language grid each family trains at one AdamW rate. GAM's is set by its brains
``B`` (chapter 12, section 12.3: one step moves ``yᵀ B y`` by a sum of ``d²`` moves), so the
GAM rate, ten to thirty times below ``sdpa``'s, also slows the embedding, the MLPs, the
values, the output projection and the head. This ablation gives the brains their family's
rate and every other parameter ``sdpa``'s (``REST_RATE``), on the grid's three seeds (same
batches, same initialisation as the grid's rows), for ``gam-p2`` (the paper's power 2) and
``gamrel`` (GAM-relative, both of its brains). It was named after the grid's results and is
reported apart from the grid.

``python -m attnlab.study.brain_rate_ablation`` writes ``ABLATION_CSV`` (six rows, about
forty minutes on one CPU thread; ``--workers 2`` runs two at a time); chapter 12 reads it.
"""

from __future__ import annotations

import argparse
import csv
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch
from torch import nn

from attnlab._validate import check_float, check_int

__all__ = ["ABLATION_CSV", "ABLATION_RUNS", "BRAIN_NAMES", "REST_RATE", "SLOW_SETS",
           "brain_rates", "run_ablation"]  # fmt: skip

#: ``sdpa``'s rate in the grid (the pilot's choice for that family), given to every
#: parameter that is not a brain.
REST_RATE = 0.03
#: The last part of a brain's parameter name: the content brains ``b`` of
#: ``GeneralizedAttention`` and the position brains ``b_p`` of ``GAMRelativeAttention``.
BRAIN_NAMES = ("b", "b_p")
#: What trains at the family's rate: ``"brains"``, or ``"brains+r"``: the brains and
#: GAM-relative's embedding of ``r`` (``attn.inner.embed``), whose output ``p`` enters the
#: position brains' quadratic form ``p B_p pᵀ`` as ``y`` enters ``y B yᵀ``.
SLOW_SETS = ("brains", "brains+r")
#: ``(slot, slow set, its rate, seed)`` of each run: the family's grid rate for the slow set.
#: The ``"brains+r"`` runs were added after the ``"brains"`` runs of ``gamrel`` had failed.
ABLATION_RUNS = tuple(
    (slot, slow, rate, seed)
    for slot, slow, rate in (
        ("gam-p2", "brains", 0.001), ("gamrel", "brains", 0.003), ("gamrel", "brains+r", 0.003)
    )
    for seed in (0, 1, 2)
)  # fmt: skip
ABLATION_CSV = Path(__file__).parent / "language_results" / "brain_rate_ablation.csv"


def _check_slow(slow: str) -> None:
    if slow not in SLOW_SETS:
        raise ValueError(f"slow must be one of {', '.join(SLOW_SETS)}, got {slow!r}")


def _is_slow(name: str, slow: str) -> bool:
    parts = name.split(".")
    if parts[-1] in BRAIN_NAMES:
        return True
    return slow == "brains+r" and "attn" in parts and parts[-2] == "embed"


def brain_rates(model: nn.Module, rate: float, slow: str = "brains") -> dict[str, float]:
    """``{name: rate}`` for every parameter of ``slow`` (one of ``SLOW_SETS``) in ``model``:
    the ``rates`` of ``train_lm``.

    Raises
    ------
    ValueError
        On an unknown ``slow``, or when ``model`` has no brain (an ``sdpa``, Shaw or Luong
        model).
    """
    _check_slow(slow)
    names = {name: rate for name, _ in model.named_parameters() if _is_slow(name, slow)}
    if not names:
        raise ValueError("the model has no GAM brain (a parameter named b or b_p)")
    return names


def run_ablation(
    slot: str, brain_rate: float, *, slow: str = "brains", seed: int = 0, steps: int = 2000
) -> dict[str, str]:
    """Train ``slot`` with its ``slow`` set at ``brain_rate`` and the rest at ``REST_RATE``.

    Returns
    -------
    dict of str to str
        One row of ``ABLATION_CSV``: the run's settings, validation and test bits per
        character on the whole splits, seconds, and the learning curve.

    Raises
    ------
    ValueError, TypeError
        On a slot other than ``gam-p2`` and ``gamrel``, an unknown ``slow``, a rate that is
        not a positive finite number, or a seed or step count that is not an integer of the
        right size; all before any work is done.
    """
    from attnlab.lm.corpus import load_corpus
    from attnlab.lm.training import bits_per_char, train_lm
    from attnlab.study.language import format_curve
    from attnlab.study.lm_slots import build_lm

    if slot not in ("gam-p2", "gamrel"):
        raise ValueError(f"slot must be 'gam-p2' or 'gamrel', got {slot!r}")
    _check_slow(slow)
    brain_rate = check_float(brain_rate, "brain_rate")
    seed, steps = check_int(seed, "seed", minimum=0), check_int(steps, "steps", minimum=10)
    torch.set_num_threads(1)
    corpus = load_corpus()
    model = build_lm(slot, vocab_size=corpus.vocab.size, seed=seed)
    start, cpu = time.perf_counter(), time.process_time()
    log = train_lm(
        model, corpus.train, steps=steps, lr=REST_RATE, seed=seed, valid_ids=corpus.valid,
        eval_every=steps // 10, progress=False, rates=brain_rates(model, brain_rate, slow),
    )  # fmt: skip
    return {
        "slot": slot,
        "slow": slow,
        "brain_lr": f"{brain_rate:g}",
        "rest_lr": f"{REST_RATE:g}",
        "seed": str(seed),
        "steps": str(steps),
        "val_bpc": f"{bits_per_char(model, corpus.valid):.4f}",
        "test_bpc": f"{bits_per_char(model, corpus.test):.4f}",
        "seconds": f"{time.perf_counter() - start:.1f}",
        "cpu_seconds": f"{time.process_time() - cpu:.1f}",
        "curve": format_curve(log),
    }


def _run(args: tuple[str, str, float, int]) -> dict[str, str]:
    slot, slow, brain_rate, seed = args
    return run_ablation(slot, brain_rate, slow=slow, seed=seed)


def _key(row: dict[str, str]) -> tuple[str, str, float, int]:
    return row["slot"], row["slow"], float(row["brain_lr"]), int(row["seed"])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m attnlab.study.brain_rate_ablation",
                                     description=__doc__.splitlines()[0])  # fmt: skip
    parser.add_argument("--workers", type=int, default=1, help="runs at a time (default 1)")
    parser.add_argument("--out", type=Path, default=ABLATION_CSV, help="the CSV to write")
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error(f"--workers must be at least 1, got {args.workers}")
    done = {}
    if args.out.exists():  # a rerun trains only the runs that are missing
        with open(args.out, newline="") as fh:
            reader = csv.DictReader(fh)
            if not {"slot", "slow", "brain_lr", "seed"} <= set(reader.fieldnames or ()):
                parser.error(f"{args.out} is not this ablation's CSV; it is left untouched")
            done = {_key(row): row for row in reader}
    todo = [run for run in ABLATION_RUNS if run not in done]
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        done |= {_key(row): row for row in pool.map(_run, todo)}
    rows = [done[run] for run in ABLATION_RUNS]  # in ABLATION_RUNS' order
    for row in rows:
        print(*_key(row), row["test_bpc"], flush=True)
    tmp = args.out.with_suffix(".tmp")
    with open(tmp, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    tmp.replace(args.out)


if __name__ == "__main__":
    main()
