"""Package a run of ``python -m attnlab.lm train`` as chapter 11's stored run.

Copies ``model.pt``, ``log.csv`` and ``config.json`` of RUN into ``src/attnlab/lm/files/`` as
``stored_model.pt``, ``stored_log.csv`` and ``stored_config.json``, and adds to the record the
baselines on the same test split: interpolated Kneser-Ney trigram and 5-gram (discount tuned
on validation) and xz's conditional size (preset 9)::

    python -m attnlab.lm train --out runs/stored ...   # the command in stored_config.json
    python scripts/package_lm_run.py runs/stored
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

FILES = Path(__file__).resolve().parents[1] / "src/attnlab/lm/files"


def baselines() -> dict:
    from attnlab.lm.baselines import KneserNey, tune_discount, xz_bits_per_char
    from attnlab.lm.corpus import load_corpus

    corpus = load_corpus()
    out = {}
    for order in (3, 5):
        lm = KneserNey(corpus.train, corpus.vocab.size, order)
        d, valid = tune_discount(lm, corpus.valid)
        out[f"kn{order}"] = {"discount": d, "valid_bpc": valid,
                             "test_bpc": lm.bits_per_char(corpus.test, d)}  # fmt: skip
    out["xz"] = {"preset": 9, "test_bpc": xz_bits_per_char(corpus.texts["train"],
                                                           corpus.texts["test"])}  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--command", required=True, help="the exact training command")
    args = parser.parse_args(argv)
    record = json.loads((args.run / "config.json").read_text())
    record["command"] = args.command
    record["baselines"] = baselines()
    shutil.copyfile(args.run / "model.pt", FILES / "stored_model.pt")
    shutil.copyfile(args.run / "log.csv", FILES / "stored_log.csv")
    (FILES / "stored_config.json").write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record["results"]), json.dumps(record["baselines"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
