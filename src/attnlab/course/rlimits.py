"""Set resource limits, then run a command: ``python -m attnlab.course.rlimits D A C P F N -- CMD``.

The six numbers are ``RLIMIT_DATA``, ``RLIMIT_AS``, ``RLIMIT_CPU``, ``RLIMIT_NPROC``,
``RLIMIT_FSIZE`` and ``RLIMIT_NOFILE`` (bytes, seconds or counts), each set as soft and hard
limit but never above the hard limit already in force (an unprivileged process may not raise
it); a negative number leaves that limit alone. Portable where ``prlimit`` is not (macOS);
the grader starts every sandbox through it.
"""

from __future__ import annotations

import os
import resource
import sys

NAMES = ("RLIMIT_DATA", "RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_NPROC", "RLIMIT_FSIZE",
         "RLIMIT_NOFILE")

# The same as main(), self-contained, for `python -I -c INLINE D A C P F N -- CMD`.
INLINE = (
    "import os, resource, sys\n"
    f"names = {NAMES!r}\n"
    "for name, value in zip(names, map(int, sys.argv[1:7])):\n"
    "    if value >= 0 and hasattr(resource, name):\n"
    "        which = getattr(resource, name)\n"
    "        hard = resource.getrlimit(which)[1]\n"
    "        value = value if hard == resource.RLIM_INFINITY else min(value, hard)\n"
    "        resource.setrlimit(which, (value, value))\n"
    "assert sys.argv[7] == '--'\n"
    "os.execvp(sys.argv[8], sys.argv[8:])\n"
)


def apply(values: list[int]) -> None:
    """Set each limit of ``NAMES`` to ``values`` (capped at the current hard limit; a
    negative value leaves that limit alone)."""
    for name, value in zip(NAMES, values, strict=True):
        if value < 0 or not hasattr(resource, name):
            continue
        which = getattr(resource, name)
        hard = resource.getrlimit(which)[1]
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(which, (value, value))


def main(argv: list[str]) -> int:
    """Parse ``D A C P F N -- CMD ...``, set the limits, exec ``CMD``."""
    if len(argv) < 8 or argv[6] != "--":
        print("usage: python -m attnlab.course.rlimits D A C P F N -- CMD ...", file=sys.stderr)
        return 2
    apply([int(v) for v in argv[:6]])
    os.execvp(argv[7], argv[7:])
    return 127  # pragma: no cover - execvp does not return


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
