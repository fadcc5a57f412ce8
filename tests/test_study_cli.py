"""The study's command line never destroys a file it did not write and fails in one line."""

from __future__ import annotations

import subprocess
import sys

import pytest

from attnlab.study.__main__ import main, parse_args
from attnlab.study.runner import COLUMNS


def _cli(*args, cwd=None):
    """Run the real command line in a subprocess; return (status, stdout, stderr)."""
    done = subprocess.run(
        [sys.executable, "-m", "attnlab.study", *args],
        capture_output=True, text=True, timeout=120, cwd=cwd,
    )  # fmt: skip
    return done.returncode, done.stdout, done.stderr


def _one_line_error(status, stderr, match):
    assert status == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr  # one line, no traceback, no usage block
    assert lines[0].startswith("python -m attnlab.study: error:") and match in lines[0]
    assert "Traceback" not in stderr


@pytest.mark.parametrize("threads", ["0", "-3"])
def test_threads_must_be_positive(tmp_path, threads):
    status, _, stderr = _cli("--grid", "reduced", "--out", str(tmp_path), "--threads", threads)
    _one_line_error(status, stderr, "--threads must be a positive integer")
    assert list(tmp_path.iterdir()) == []  # nothing was written


def test_out_naming_a_file_is_refused(tmp_path):
    target = tmp_path / "notes.txt"
    target.write_text("mine")
    status, _, stderr = _cli("--grid", "reduced", "--out", str(target))
    _one_line_error(status, stderr, "is a file")
    assert target.read_text() == "mine"
    status, _, stderr = _cli("--grid", "reduced", "--out", str(target / "inside"))
    _one_line_error(status, stderr, "cannot be created")
    assert target.read_text() == "mine"


@pytest.mark.parametrize(
    "content",
    [
        b"name,score\nada,3\n",  # another CSV
        b"name,score\nada,3",  # ... without its last newline (the runner would "repair" it)
        b"\x89PNG\r\n\x1a\n\x00\x00",  # not text at all
    ],
)
def test_a_foreign_results_csv_is_refused_and_left_untouched(tmp_path, content):
    path = tmp_path / "results.csv"
    path.write_bytes(content)
    status, _, stderr = _cli("--grid", "reduced", "--out", str(tmp_path))
    _one_line_error(status, stderr, "not a results CSV")
    assert path.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.csv"]


def test_bad_choices_are_one_line_errors(tmp_path):
    status, _, stderr = _cli("--grid", "huge", "--out", str(tmp_path))
    _one_line_error(status, stderr, "--grid")
    status, _, stderr = _cli("--grid", "reduced", "--out", str(tmp_path), "--device", "tpu")
    _one_line_error(status, stderr, "--device")
    status, _, stderr = _cli("--grid", "reduced", "--out", str(tmp_path), "--max-minutes", "0")
    _one_line_error(status, stderr, "--max-minutes")


@pytest.mark.skipif(
    __import__("torch").cuda.is_available(), reason="this machine has CUDA: nothing to refuse"
)
def test_cuda_without_a_device_is_a_one_line_error(tmp_path):
    status, _, stderr = _cli("--grid", "reduced", "--out", str(tmp_path), "--device", "cuda")
    _one_line_error(status, stderr, "no such CUDA device")


def test_parse_args_accepts_good_arguments(tmp_path):
    args = parse_args(["--out", str(tmp_path / "new"), "--threads", "2", "--device", "auto"])
    assert args.grid == "full" and args.threads == 2 and args.device.type in ("cpu", "cuda")


@pytest.mark.parametrize("make_folder", [False, True])
def test_report_only_without_a_results_csv_is_a_one_line_error(tmp_path, make_folder):
    # Issue 28: a report of nothing used to exit 0 with an empty summary.
    out = tmp_path / "empty"
    if make_folder:
        out.mkdir()
    status, stdout, stderr = _cli("--grid", "reduced", "--out", str(out), "--report-only")
    _one_line_error(status, stderr, "--report-only needs")
    assert "results.csv" in stderr and "does not exist" in stderr and stdout == ""
    assert out.exists() == make_folder and (not make_folder or list(out.iterdir()) == [])


def test_report_only_on_an_empty_results_csv_is_a_one_line_error(tmp_path):
    (tmp_path / "results.csv").write_text("")
    status, _, stderr = _cli("--grid", "reduced", "--out", str(tmp_path), "--report-only")
    _one_line_error(status, stderr, "is empty")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.csv"]


def test_report_only_on_a_started_grid_writes_a_report(tmp_path, capsys):
    (tmp_path / "results.csv").write_text(",".join(COLUMNS) + "\n")  # a grid with no run yet
    main(["--grid", "reduced", "--out", str(tmp_path), "--report-only", "--timing-rounds", "0"])
    assert (tmp_path / "summary.md").exists() and "0 of 8 runs" in capsys.readouterr().out
