"""``python -m attnlab.grade``: grade a folder of submitted notebooks, each in a sandbox.

A thin entry point: the command and every name it offers live in
:mod:`attnlab.course.grade_cli` (the grading of one notebook in :mod:`attnlab.course.grade`);
this module re-exports them so that ``python -m attnlab.grade`` and
``from attnlab.grade import grade`` keep working.
"""

from __future__ import annotations

import sys

from attnlab.course.grade_cli import *  # noqa: F403  (the command, re-exported)
from attnlab.course.grade_cli import __all__, main  # noqa: F401

if __name__ == "__main__":
    sys.exit(main())
