"""Worst cases of ``python -m attnlab.study``'s options not already in ``test_study_cli.py``.

Every one must end in one line on standard error with status 2 before anything is run or
written (``parse_args`` is where the command checks them; the subprocess tests of the real
command are in ``tests/test_study_cli.py``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from attnlab.study.__main__ import parse_args


def _refused(capsys, argv: list[str], match: str) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse_args(argv)
    assert exit_.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("python -m attnlab.study: error:"), lines
    assert match in lines[0], lines[0]


@pytest.mark.parametrize("minutes", ["-1", "nan", "-inf", "0.0", "ten"])
def test_max_minutes_must_be_a_positive_number(tmp_path, capsys, minutes):
    _refused(capsys, ["--out", str(tmp_path), f"--max-minutes={minutes}"], "--max-minutes")
    assert list(tmp_path.iterdir()) == []


def test_max_minutes_inf_means_no_limit(tmp_path):
    assert parse_args(["--out", str(tmp_path), "--max-minutes", "inf"]).max_minutes == float("inf")


@pytest.mark.parametrize("threads", ["1.5", "two", ""])
def test_threads_must_be_an_integer(tmp_path, capsys, threads):
    _refused(capsys, ["--out", str(tmp_path), f"--threads={threads}"], "--threads")


def test_threads_beyond_the_machine_are_refused(tmp_path, capsys):
    """A typo like ``--threads 1000`` would oversubscribe a shared machine for hours."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert parse_args(["--out", str(tmp_path), "--threads", str(cores)]).threads == cores
    _refused(capsys, ["--out", str(tmp_path), "--threads", "100000"], "--threads")


@pytest.mark.parametrize("rounds", ["-1", "2.5"])
def test_timing_rounds_must_be_a_non_negative_integer(tmp_path, capsys, rounds):
    _refused(capsys, ["--out", str(tmp_path), f"--timing-rounds={rounds}"], "--timing-rounds")


@pytest.mark.parametrize("device", ["CUDA", "cuda:0", "gpu", ""])
def test_device_names_outside_the_choices_are_refused(tmp_path, capsys, device):
    _refused(capsys, ["--out", str(tmp_path), f"--device={device}"], "--device")


@pytest.mark.parametrize("grid", ["Full", "", "reduced "])
def test_grid_names_are_exact(tmp_path, capsys, grid):
    _refused(capsys, ["--out", str(tmp_path), f"--grid={grid}"], "--grid")


def test_an_empty_out_is_refused_not_read_as_the_current_folder(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    _refused(capsys, ["--out="], "--out")
    _refused(capsys, [], "--out")  # required
    assert list(Path(tmp_path).iterdir()) == []


@pytest.mark.parametrize(
    "field, bad",
    [("steps", 0), ("steps", -50), ("batch_size", 0), ("d", 0), ("h", 0), ("layers", 0),
     ("long_n", -1), ("seed", -1), ("steps", 1.5), ("batch_size", True), ("shaw_k", "8"),
     ("lr", -1e-3), ("lr", float("nan")), ("lr", float("inf")), ("lr", True)],
)
def test_a_run_config_refuses_bad_sizes_at_construction_naming_the_field(field, bad):
    """Not at run time, under another name (``num`` for batch_size), or silently (long_n).

    ``lr=0`` stays allowed: tests/test_study.py uses it as a placeholder when grouping rates.
    The error contract: a value of the wrong type (a bool, a float size) is a TypeError.
    """
    from attnlab.study.runner import RunConfig

    wrong_type = isinstance(bad, bool | str) or (field != "lr" and isinstance(bad, float))
    with pytest.raises(TypeError if wrong_type else ValueError, match=field):
        RunConfig("gapped", "sdpa", "abs", **{"seed": 0, field: bad})


def test_every_configuration_of_every_grid_is_valid():
    from attnlab.study.grids import GRIDS, grid

    assert all(grid(name) for name in GRIDS)  # constructing them ran the checks
