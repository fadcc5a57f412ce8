"""``python -m attnlab.lm train``: one-line errors, no overwriting, the three result files."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest
import torch

from attnlab.lm.__main__ import PROG, main, parse_args

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _refused(capsys, argv: list[str], match: str) -> None:
    with pytest.raises(SystemExit) as stop:
        parse_args(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"{PROG}: error:"), err
    assert match in err[0], err[0]


@pytest.mark.parametrize(
    ("option", "match"),
    [
        ("--width=0", "--width"), ("--depth=-1", "--depth"), ("--heads=0", "--heads"),
        ("--context=0", "--context"), ("--steps=0", "--steps"), ("--batch=0", "--batch"),
        ("--threads=0", "--threads"), ("--threads=100000", "--threads"),
        ("--width=30", "divide"), ("--lr=0", "--lr"), ("--lr=nan", "--lr"),
        ("--lr=inf", "--lr"), ("--seed=-1", "--seed"), ("--warmup=-1", "--warmup"),
        ("--positions=alibi", "--positions"), ("--norm=batch", "--norm"),
        ("--mlp=relu", "--mlp"), ("--attention=flash", "--attention"), ("--steps=2.5", "--steps"),
        ("--width=36", "rotary"), ("--mlp-hidden=0", "--mlp-hidden"),
        ("--mlp-hidden=2.5", "--mlp-hidden"),
    ],
)  # fmt: skip
def test_bad_options_are_one_line_errors(tmp_path, capsys, option, match):
    extra = ["--positions=rotary", "--heads=2"] if match == "rotary" else []
    if match == "rotary":
        option = "--width=6"  # d_k = 3 is odd
    _refused(capsys, ["train", "--out", str(tmp_path / "o"), *extra, option], match)


def test_a_missing_or_empty_out_is_refused(capsys):
    _refused(capsys, ["train"], "--out")
    _refused(capsys, ["train", "--out="], "--out")
    _refused(capsys, [], "command")


def test_an_out_that_is_a_file_or_below_a_file_is_refused(tmp_path, capsys):
    f = tmp_path / "f"
    f.write_text("keep me")
    _refused(capsys, ["train", "--out", str(f)], "is a file")
    _refused(capsys, ["train", "--out", str(f / "sub")], "is a file")
    assert f.read_text() == "keep me"


@pytest.mark.parametrize("taken", ["model.pt", "log.csv", "config.json"])
def test_existing_results_are_never_overwritten(tmp_path, capsys, taken):
    (tmp_path / taken).write_text("an earlier run")
    _refused(capsys, ["train", "--out", str(tmp_path)], "refusing to overwrite")
    assert (tmp_path / taken).read_text() == "an earlier run"
    assert sorted(p.name for p in tmp_path.iterdir()) == [taken]


def test_the_shell_sees_one_line_and_status_2(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "attnlab.lm", "train", "--out", str(tmp_path), "--width", "0"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip() == f"{PROG}: error: --width must be a positive integer, got 0"
    assert done.stdout == "" and list(tmp_path.iterdir()) == []


def test_a_tiny_run_writes_weights_log_and_config(tmp_path, capsys):
    out = tmp_path / "run" / "deep"
    argv = ["train", "--out", str(out), "--width", "16", "--depth", "1", "--heads", "2",
            "--context", "16", "--steps", "3", "--batch", "2", "--eval-every", "2",
            "--positions", "rotary", "--norm", "rmsnorm", "--mlp", "swiglu", "--mlp-hidden", "24",
            "--no-progress"]
    assert main(argv) == 0
    assert "bits per character" in capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "log.csv", "model.pt"]
    rows = list(csv.DictReader(open(out / "log.csv")))
    assert [int(r["step"]) for r in rows] == [1, 2, 3]
    assert [r["valid_bpc"] == "nan" for r in rows] == [True, False, False]
    assert int(rows[-1]["chars"]) == 3 * 2 * 16
    record = json.loads((out / "config.json").read_text())
    assert record["model"]["positions"] == "rotary" and record["model"]["d"] == 16
    assert record["model"]["mlp_hidden"] == 24
    assert record["training"]["steps"] == 3 and record["results"]["chars_seen"] == 96
    saved = torch.load(out / "model.pt", weights_only=True)
    from attnlab.lm.model import CharTransformer, LMConfig

    model = CharTransformer(LMConfig.from_dict(saved["config"]))
    model.load_state_dict(saved["state_dict"])
    assert model.num_parameters() == record["results"]["parameters"]
    assert 3.0 < record["results"]["test_bpc"] < 7.0  # 3 steps: near log2(85) = 6.4
    # a second call into the same folder is refused and changes nothing
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(SystemExit):
        main(argv)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_text_trains_on_another_corpus(tmp_path, capsys):
    from pathlib import Path

    genesis = Path(__file__).resolve().parent / "data" / "kjv_genesis.txt.xz"
    out = tmp_path / "kjv"
    argv = ["train", "--out", str(out), "--text", str(genesis), "--block", "4096",
            "--width", "16", "--depth", "1", "--heads", "2", "--context", "16", "--steps", "2",
            "--batch", "2", "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    record = json.loads((out / "config.json").read_text())
    from attnlab.lm.corpus import read_text

    text = read_text(genesis)
    assert record["corpus"]["characters"] == len(text) == 196_818
    assert record["corpus"]["block"] == 4096
    assert record["corpus"]["vocab"] == "".join(sorted(set(text)))  # no digit, no "[": Genesis
    assert record["model"]["vocab_size"] == len(record["corpus"]["vocab"]) + 1
    # Genesis is three blocks of 65,536: no test block at the default size
    _refused(capsys, ["train", "--out", str(tmp_path / "o"), "--text", str(genesis)],
             "give a smaller --block")  # fmt: skip
    _refused(capsys, ["train", "--out", str(tmp_path / "o"), "--text", str(tmp_path / "none")],
             "cannot be read")  # fmt: skip
    (tmp_path / "bin.txt").write_bytes(b"\xff\xfe\x00")
    _refused(capsys, ["train", "--out", str(tmp_path / "o"), "--text", str(tmp_path / "bin.txt")],
             "not UTF-8")  # fmt: skip
    _refused(capsys, ["train", "--out", str(tmp_path / "o"), "--block", "0"], "--block")
    assert not (tmp_path / "o").exists()
