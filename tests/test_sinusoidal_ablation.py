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


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "phrase"),
    [
        (("sdpa-learned", 0.5, 0.01), {}, ValueError, "only sdpa-sinusoidal has a table"),
        (("gam-p2", 1.0, 0.01), {}, ValueError, "slot must be"),
        (("sdpa-sinusoidal", float("nan"), 0.01), {}, ValueError, "scale must be"),
        (("sdpa-sinusoidal", 0.0, 0.01), {}, ValueError, "scale must be"),
        (("sdpa-sinusoidal", -1.0, 0.01), {}, ValueError, "scale must be"),
        (("sdpa-sinusoidal", 1.0, float("inf")), {}, ValueError, "lr must be"),
        (("sdpa-sinusoidal", 1.0, "0.01"), {}, TypeError, "lr must be"),
        (("sdpa-sinusoidal", True, 0.01), {}, TypeError, "scale must be"),
        (("sdpa-sinusoidal", 1.0, 0.01), {"steps": 5}, ValueError, "steps"),
        (("sdpa-sinusoidal", 1.0, 0.01), {"seed": -1}, ValueError, "seed"),
    ],
)
def test_bad_arguments_are_refused_before_any_work(args, kwargs, error, phrase, corpus_forbidden):
    with pytest.raises(error, match=phrase):
        run_ablation(*args, **kwargs)
