"""The one-line error of attnlab's commands: ``PROG: error: MESSAGE`` and status 2.

argparse prints a usage block before its error; a learner who mistyped one option needs the
one line that says what is wrong (tests in ``tests/test_cli_*.py`` hold every command to it).
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn


def fail(prog: str, message: str) -> NoReturn:
    """Print ``prog: error: message`` on standard error and exit with status 2 (as argparse)."""
    print(f"{prog}: error: {message}", file=sys.stderr)
    raise SystemExit(2)


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line, without the usage block."""

    def error(self, message: str) -> NoReturn:
        fail(self.prog, message)
