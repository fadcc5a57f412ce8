"""Regenerate the second corpus of the tests, ``tests/data/kjv_genesis.txt.xz``.

The source is the King James Version as printed by Debian's ``bible-kjv`` package (version
4.38, with its text in ``bible-kjv-text`` 4.38; ``apt-get install bible-kjv``). Its program
``bible -f gen1:1-50:26`` prints the book of Genesis one verse a line, each line opened by a
verse label such as ``Ge1:1``. The labels are stripped (they would give a model free bits:
a counter predicts them exactly), which leaves 1,533 verses, one a line, ``\\n`` line ends;
the text is written with Python's ``lzma`` (xz format, preset 9, CRC64)::

    python scripts/make_kjv_excerpt.py            # runs `bible`, writes the file
    python scripts/make_kjv_excerpt.py --check    # compares with the file in the repository

``tests/test_lm_kjv.py`` checks the SHA-256 of the file and of its text (``FILE_SHA256``,
``TEXT_SHA256`` below) and, where ``bible`` is installed, that this script rebuilds the same
bytes. The text is in the public domain except in the United Kingdom, where the rights in
the Authorized Version are vested in the Crown and administered under letters patent (see
the book's *Corpus* page).
"""

from __future__ import annotations

import argparse
import hashlib
import lzma
import re
import shutil
import subprocess
import sys
from pathlib import Path

#: The passage printed: all of Genesis.
PASSAGE = "gen1:1-50:26"
VERSES = 1533
#: A verse label at the start of a line: the book's abbreviation, chapter, colon, verse.
LABEL = re.compile(r"^Ge\d+:\d+ ")
OUT = Path(__file__).resolve().parents[1] / "tests/data/kjv_genesis.txt.xz"
FILE_SHA256 = "77bae2e3b18551b881a303d6ed11a56d10e0d27951457ba0611ccb7815148011"
TEXT_SHA256 = "e7b72bfd25d395f55a3bd0c1ada5cbf3fd627f61734d239503d834ac9b5e23b6"


def strip_labels(printed: str) -> str:
    """The verses of ``bible -f`` output without their labels, one a line.

    Raises
    ------
    ValueError
        If a non-empty line does not start with a Genesis verse label, or the count of
        verses is not ``VERSES`` (another edition of the text, or another passage).
    """
    lines = [line for line in printed.split("\n") if line]
    bad = [line for line in lines if not LABEL.match(line)]
    if bad:
        raise ValueError(f"{len(bad)} lines without a verse label, the first: {bad[0][:60]!r}")
    if len(lines) != VERSES:
        raise ValueError(f"expected {VERSES} verses of Genesis, got {len(lines)}")
    return "".join(LABEL.sub("", line) + "\n" for line in lines)


def printed_text(program: str = "bible") -> str:
    """``bible -f gen1:1-50:26``'s output (raises if the program is not installed)."""
    path = shutil.which(program)
    if path is None:
        raise FileNotFoundError(f"{program!r} not found: apt-get install bible-kjv")
    done = subprocess.run(
        [path, "-f", PASSAGE], capture_output=True, check=True, stdin=subprocess.DEVNULL
    )
    return done.stdout.decode("ascii")


def compress(text: str) -> bytes:
    """xz (preset 9, CRC64) of the UTF-8 text: the bytes of the test file."""
    return lzma.compress(text.encode("utf-8"), format=lzma.FORMAT_XZ, preset=9)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help="where to write the .xz file")
    parser.add_argument("--check", action="store_true", help="compare with --out, write nothing")
    args = parser.parse_args(argv)
    text = strip_labels(printed_text())
    data = compress(text)
    print(f"{VERSES} verses, {len(text):,} characters, {len(data):,} bytes of xz")
    print("text sha256:", hashlib.sha256(text.encode("utf-8")).hexdigest())
    print("file sha256:", hashlib.sha256(data).hexdigest())
    if args.check:
        same = args.out.is_file() and args.out.read_bytes() == data
        print(f"{args.out}: {'identical' if same else 'DIFFERENT'}")
        return 0 if same else 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(data)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
