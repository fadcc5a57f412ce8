"""Run every benchmarks/bench_*.py and rewrite the tables of book/performance.md.

Each bench module defines ``run() -> dict[str, str]`` mapping a table name to a markdown
table. The page holds one block per name between ``<!-- bench:NAME -->`` and
``<!-- /bench:NAME -->``; a name without a block is appended at the end of the page. The
``machine`` block records where and when the numbers were measured.

Usage: ``python benchmarks/run.py [NAME ...]`` (default: every bench module).
"""

from __future__ import annotations

import datetime
import importlib.util
import os
import platform
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PAGE = HERE.parent / "book" / "performance.md"
sys.path.insert(0, str(HERE))  # the bench scripts import the shared _timing helper


def machine_block() -> str:
    import numpy as np
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    today = datetime.date.today().isoformat()
    return (
        f"Measured on {today}: {cpu}, {os.cpu_count()} logical cores, "
        f"Python {platform.python_version()}, numpy {np.__version__}, torch {torch.__version__} "
        f"({torch.get_num_threads()} threads). Each time is the median of several repeats, "
        f"measured side by side in one process."
    )


def replace_block(text: str, name: str, body: str) -> str:
    start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    block = f"{start}\n{body.strip()}\n{end}"
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.DOTALL)
    if pattern.search(text):
        return pattern.sub(lambda _: block, text)
    return text.rstrip() + "\n\n" + block + "\n"


def load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(names: list[str]) -> None:
    text = PAGE.read_text()
    text = replace_block(text, "machine", machine_block())
    for path in sorted(HERE.glob("bench_*.py")):
        if names and path.stem.removeprefix("bench_") not in names:
            continue
        print(f"==> {path.name}", flush=True)
        for table, markdown in load(path).run().items():
            print(markdown, flush=True)
            text = replace_block(text, table, markdown)
    PAGE.write_text(text)
    print(f"rewrote {PAGE.relative_to(HERE.parent)}")


if __name__ == "__main__":
    main(sys.argv[1:])
