"""Why ``sdpa-sinusoidal`` trails the grid: the table's scale or the rate (chapter 12).

:class:`~attnlab.lm.model.CharTransformer` adds the sinusoidal table (entries in [-1, 1],
each row of norm ``sqrt(d / 2)``) to token embeddings drawn at s.d. 0.02, with no
``sqrt(d)`` scaling of the embeddings as in Vaswani et al. (2017): at the start of training
position outweighs the token about thirty-five to one (row norms 5.7 against 0.16). And
the grid's rate (0.03) was chosen by the pilot on ``sdpa-learned``, whose table starts at
zero. This ablation separates the two on seed 0 of the grid (same batches, same
initialisation): the table as it is at rate 0.01, the table scaled by ``TABLE_SCALE`` (the
embeddings' s.d.) at 0.03 and 0.01, and, as the reference at the lower rate,
``sdpa-learned`` at 0.01.

``python -m attnlab.study.sinusoidal_ablation`` writes ``ABLATION_CSV`` (four rows, about
seven minutes on one CPU thread); chapter 12 reads it.
"""

from __future__ import annotations

import csv
import time
from pathlib import Path

import torch

from attnlab._validate import check_float, check_int

__all__ = ["ABLATION_CSV", "ABLATION_RUNS", "TABLE_SCALE", "run_ablation"]

#: The embeddings' initial standard deviation (GPT-2's 0.02), the scale given to the table.
TABLE_SCALE = 0.02
#: ``(slot, table scale, peak rate)`` of each run; the grid's seed-0 rows are the references
#: at 0.03 (``sdpa-sinusoidal`` with its table as it is, ``sdpa-learned``).
ABLATION_RUNS = (
    ("sdpa-sinusoidal", 1.0, 0.01),
    ("sdpa-sinusoidal", TABLE_SCALE, 0.03),
    ("sdpa-sinusoidal", TABLE_SCALE, 0.01),
    ("sdpa-learned", 1.0, 0.01),
)
ABLATION_CSV = Path(__file__).parent / "language_results" / "sinusoidal_ablation.csv"


def run_ablation(
    slot: str, scale: float, lr: float, *, seed: int = 0, steps: int = 2000
) -> dict[str, str]:
    """Train ``slot`` (its sinusoidal table, if any, multiplied by ``scale``); one result row.

    Raises
    ------
    ValueError, TypeError
        On a slot other than ``sdpa-sinusoidal`` and ``sdpa-learned``, a scale other than 1
        for ``sdpa-learned`` (it has no fixed table), a scale or rate that is not a positive
        finite number, or a seed or step count that is not an integer of the right size;
        all before any work is done.
    """
    from attnlab.lm.corpus import load_corpus
    from attnlab.lm.training import bits_per_char, train_lm
    from attnlab.study.language import format_curve
    from attnlab.study.lm_slots import build_lm

    if slot not in ("sdpa-sinusoidal", "sdpa-learned"):
        raise ValueError(f"slot must be 'sdpa-sinusoidal' or 'sdpa-learned', got {slot!r}")
    scale, lr = check_float(scale, "scale"), check_float(lr, "lr")
    seed, steps = check_int(seed, "seed", minimum=0), check_int(steps, "steps", minimum=10)
    if slot == "sdpa-learned" and scale != 1.0:
        raise ValueError(f"only sdpa-sinusoidal has a table to scale, not {slot!r}")
    corpus = load_corpus()
    model = build_lm(slot, vocab_size=corpus.vocab.size, seed=seed)
    if slot == "sdpa-sinusoidal":
        model.positions.mul_(scale)  # a buffer: not trained, only rescaled
    start = time.perf_counter()
    log = train_lm(
        model, corpus.train, steps=steps, lr=lr, seed=seed, valid_ids=corpus.valid,
        eval_every=steps // 10, progress=False,
    )  # fmt: skip
    return {
        "slot": slot,
        "table_scale": f"{scale:g}",
        "lr": f"{lr:g}",
        "seed": str(seed),
        "steps": str(steps),
        "val_bpc": f"{bits_per_char(model, corpus.valid):.4f}",
        "test_bpc": f"{bits_per_char(model, corpus.test):.4f}",
        "seconds": f"{time.perf_counter() - start:.1f}",
        "curve": format_curve(log),
    }


def main() -> None:
    torch.set_num_threads(1)
    rows = []
    for slot, scale, lr in ABLATION_RUNS:
        rows.append(run_ablation(slot, scale, lr))
        print(slot, scale, lr, rows[-1]["test_bpc"], flush=True)
    with open(ABLATION_CSV, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


if __name__ == "__main__":
    main()
