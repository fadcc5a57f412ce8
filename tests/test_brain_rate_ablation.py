"""The brain-rate ablation of chapter 12: its runs, the parameters it slows, what it refuses."""

from __future__ import annotations

import csv

import pytest

from attnlab.study.brain_rate_ablation import (
    ABLATION_CSV,
    ABLATION_RUNS,
    REST_RATE,
    brain_rates,
    run_ablation,
)
from attnlab.study.language import LANGUAGE_LAYOUT
from attnlab.study.language_grid import choose_rates, family_of
from attnlab.study.lm_slots import build_lm


def test_the_csv_holds_every_planned_run_once_at_the_grids_rates():
    with open(ABLATION_CSV, newline="") as f:
        rows = list(csv.DictReader(f))
    ran = [(r["slot"], r["slow"], float(r["brain_lr"]), int(r["seed"])) for r in rows]
    assert ran == list(ABLATION_RUNS) and len(set(ran)) == len(ran)
    assert all(float(r["rest_lr"]) == REST_RATE and r["steps"] == "2000" for r in rows)
    pilot = LANGUAGE_LAYOUT.read(ABLATION_CSV.parent / "pilot" / "results.csv")
    chosen = choose_rates(pilot)  # the pilot's rule, family by family
    assert REST_RATE == chosen["sdpa"]
    assert all(rate == chosen[family_of(slot)] for slot, _, rate, _ in ABLATION_RUNS)


@pytest.mark.parametrize(("slot", "brains"), [("gam-p2", 2), ("gamrel", 4), ("gam-p2-b2", 2)])
def test_brain_rates_names_every_brain_and_nothing_else(slot, brains):
    model = build_lm(slot, vocab_size=85, seed=0)
    rates = brain_rates(model, 1e-3)
    assert len(rates) == brains and set(rates.values()) == {1e-3}  # one per block (and branch)
    shapes = {name: p.shape for name, p in model.named_parameters()}
    assert all(shapes[name][-2:] == (64, 64) and shapes[name].numel() > 4096 for name in rates)
    others = [n for n in shapes if n not in rates]
    assert any(n.endswith("value.weight") for n in others) and "embed.weight" in others


def test_brains_and_r_adds_only_gam_relatives_embedding_of_r():
    gamrel = build_lm("gamrel", vocab_size=85, seed=0)
    added = set(brain_rates(gamrel, 1e-3, "brains+r")) - set(brain_rates(gamrel, 1e-3))
    assert added == {f"blocks.{i}.attn.inner.embed.{w}" for i in (0, 1) for w in ("weight", "bias")}
    gam = build_lm("gam-p2", vocab_size=85, seed=0)  # no r: the same set, never the token table
    assert brain_rates(gam, 1e-3, "brains+r") == brain_rates(gam, 1e-3)
    assert "embed.weight" not in brain_rates(gamrel, 1e-3, "brains+r")
    with pytest.raises(ValueError, match="slow must be"):
        brain_rates(gamrel, 1e-3, "everything")


@pytest.mark.parametrize("slot", ["sdpa-learned", "shaw", "luong"])
def test_a_model_without_brains_is_refused(slot):
    with pytest.raises(ValueError, match="no GAM brain"):
        brain_rates(build_lm(slot, vocab_size=85, seed=0), 1e-3)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "phrase"),
    [
        (("sdpa-learned", 1e-3), {}, ValueError, "slot must be"),
        (("gam-p2-b2", 1e-3), {}, ValueError, "slot must be"),
        (("gam-p2", float("nan")), {}, ValueError, "brain_rate must be"),
        (("gam-p2", 0.0), {}, ValueError, "brain_rate must be"),
        (("gam-p2", -1e-3), {}, ValueError, "brain_rate must be"),
        (("gam-p2", "1e-3"), {}, TypeError, "brain_rate must be"),
        (("gam-p2", True), {}, TypeError, "brain_rate must be"),
        (("gam-p2", 1e-3), {"steps": 5}, ValueError, "steps"),
        (("gam-p2", 1e-3), {"seed": -1}, ValueError, "seed"),
        (("gam-p2", 1e-3), {"seed": 1.0}, TypeError, "seed"),
        (("gamrel", 1e-3), {"slow": "embed"}, ValueError, "slow must be"),
        (("gamrel", 1e-3), {"slow": None}, ValueError, "slow must be"),
    ],
)
def test_bad_arguments_are_refused_before_any_work(args, kwargs, error, phrase, corpus_forbidden):
    with pytest.raises(error, match=phrase):
        run_ablation(*args, **kwargs)


def test_the_command_refuses_a_foreign_csv_and_zero_workers_before_training(
    tmp_path, corpus_forbidden, capsys
):
    from attnlab.study.brain_rate_ablation import main

    foreign = tmp_path / "results.csv"
    foreign.write_text("slot,seed,test_bpc\nsdpa-learned,0,2.4\n")
    with pytest.raises(SystemExit) as stop:
        main(["--out", str(foreign)])
    assert stop.value.code == 2 and "not this ablation's CSV" in capsys.readouterr().err
    assert foreign.read_text() == "slot,seed,test_bpc\nsdpa-learned,0,2.4\n"  # untouched
    with pytest.raises(SystemExit) as stop:
        main(["--workers", "0", "--out", str(tmp_path / "new.csv")])
    assert stop.value.code == 2 and "--workers must be at least 1" in capsys.readouterr().err
    assert not (tmp_path / "new.csv").exists()
