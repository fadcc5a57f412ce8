"""Census of the error contract: how many generated bad inputs end in each outcome.

Runs the hypothesis contract tests (``tests/test_contract_*.py``) in recording mode
(``CONTRACT_RECORD``), so that every generated case is classified instead of asserted, and
prints one table per file: outcome (``ok``, ``silent``, ``nan``, ``internal``, ``vague``) by
class of bad input. Point ``PYTHONPATH`` at the attnlab source to measure (for example the
``main`` branch before the contract and this branch after) and keep ``CONTRACT_EXAMPLES`` equal:
the generator is derandomized, so both runs see the same inputs.

Usage: ``PYTHONPATH=src python tests/contract_census.py [examples]``.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
FILES = (
    "test_contract_numpy.py",
    "test_contract_nn.py",
    "test_contract_others.py",
    "test_contract_positions.py",
)
OUTCOMES = ("ok", "silent", "nan", "internal", "vague")


def census(test_file: str, examples: int) -> list[dict]:
    """Run the generated tests of ``test_file`` in recording mode; return the records."""
    with tempfile.TemporaryDirectory() as tmp:
        record = Path(tmp) / "record.jsonl"
        env = {**os.environ, "CONTRACT_RECORD": str(record), "CONTRACT_EXAMPLES": str(examples)}
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "-k",
                "contract",
                str(HERE / test_file),
            ],
            env=env,
            check=False,
            capture_output=True,
            cwd=HERE.parent,
        )
        if not record.exists():
            return []
        lines = record.read_text(encoding="utf-8").splitlines()
    unique = {line: json.loads(line) for line in lines}  # a case seen twice counts once
    return list(unique.values())


def table(records: list[dict]) -> str:
    """A markdown table: class of bad input by outcome."""
    counts = collections.Counter((r["kind"], r["outcome"]) for r in records)
    kinds = sorted({r["kind"] for r in records})
    rows = ["| class | " + " | ".join(OUTCOMES) + " |", "|---" * (len(OUTCOMES) + 1) + "|"]
    for kind in [*kinds, "all"]:
        cells = [
            sum(n for (k, o), n in counts.items() if o == outcome and kind in (k, "all"))
            for outcome in OUTCOMES
        ]
        rows.append(f"| {kind} | " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(rows)


def main() -> None:
    examples = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    for test_file in FILES:
        records = census(test_file, examples)
        print(f"\n## {test_file} ({len(records)} distinct cases, {examples} per function)\n")
        print(table(records))
        bad = collections.Counter(
            (r["spec"], r["outcome"]) for r in records if r["outcome"] != "ok"
        )
        for (spec, outcome), n in sorted(bad.items()):
            print(f"- {spec}: {n} {outcome}")


if __name__ == "__main__":
    main()
