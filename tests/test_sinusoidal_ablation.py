"""The ablation of ``sdpa-sinusoidal`` (chapter 12): what it runs, and what it refuses."""

from __future__ import annotations

import csv

import pytest

from attnlab.study.sinusoidal_ablation import (
    ABLATION_CSV,
    ABLATION_RUNS,
    TABLE_SCALE,
    run_ablation,
)


def test_the_csv_holds_every_planned_run_once():
    with open(ABLATION_CSV, newline="") as f:
        rows = list(csv.DictReader(f))
    ran = [(r["slot"], float(r["table_scale"]), float(r["lr"])) for r in rows]
    assert ran == list(ABLATION_RUNS) and len(set(ran)) == len(ran)
    assert TABLE_SCALE == 0.02  # GPT-2's embedding s.d., as CharTransformer draws them


def test_a_table_scale_for_a_slot_without_a_table_is_refused():
    with pytest.raises(ValueError, match="only sdpa-sinusoidal has a table"):
        run_ablation("sdpa-learned", 0.5, 0.01, steps=1)
