"""``python -m attnlab.assign``: student versions of notebooks (solutions out, stubs in).

A thin entry point: the command and every name it offers live in
:mod:`attnlab.course.assign` (and the notebook transform in :mod:`attnlab.course.student`);
this module re-exports them so that ``python -m attnlab.assign`` and
``from attnlab.assign import assign`` keep working.
"""

from __future__ import annotations

import sys

from attnlab.course.assign import *  # noqa: F403  (the command, re-exported)
from attnlab.course.assign import __all__, main  # noqa: F401

if __name__ == "__main__":
    sys.exit(main())
