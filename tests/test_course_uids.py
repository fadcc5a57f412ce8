"""Two graders on one machine never hold the same sandbox user id.

The grader kills every process of its sandbox user before and after a notebook, so a shared id
would let one grading kill another's notebooks. Ids used to be ``pid mod 64`` based: two
graders whose pids differ by a multiple of 64 took the same ones. Each id is now claimed with
a name of the abstract socket namespace (:func:`attnlab.course.grade._claimed_uid`).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from attnlab.course import grade, sandbox

_CLAIM_IN_CHILD = textwrap.dedent(
    """
    import os, sys
    os.getpid = lambda: int(sys.argv[1])  # the parent's pid: the old rule gave its ids
    from attnlab.course import grade
    with grade._claimed_uid() as uid:
        print(uid)
    """
)


def _child_claim(pid: int) -> int:
    done = subprocess.run([sys.executable, "-c", _CLAIM_IN_CHILD, str(pid)], check=True,
                          capture_output=True, text=True, timeout=60)
    return int(done.stdout)


def test_a_held_id_is_not_given_to_another_process_with_the_same_pid_modulo_64():
    with grade._claimed_uid() as held:
        other = _child_claim(__import__("os").getpid())
        assert other != held
    # released: ids are in the range, and the probe's id (UID_BASE) is never handed out
    assert sandbox.UID_BASE < held <= sandbox.UID_BASE + grade.UID_SLOTS
    assert sandbox.UID_BASE < other <= sandbox.UID_BASE + grade.UID_SLOTS


def test_claims_inside_one_process_are_distinct_while_held_and_free_after():
    with grade._claimed_uid() as a, grade._claimed_uid() as b, grade._claimed_uid() as c:
        assert len({a, b, c}) == 3
    with grade._claimed_uid() as again:
        assert sandbox.UID_BASE < again <= sandbox.UID_BASE + grade.UID_SLOTS
