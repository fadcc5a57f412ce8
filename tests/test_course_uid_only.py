"""``uid-only`` grading refuses, before any notebook runs, an interpreter its user cannot run.

As root without bubblewrap (``--allow-unsandboxed``) each notebook runs under a user id of its
own. A venv made from a Python under root's home (mode 0700, where pyenv puts it) cannot be
started by that user: every answer used to fail with "Permission denied", and every student
got zero.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from attnlab.course import sandbox

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="uid-only grading needs root and setpriv on Linux",
)


SYSTEM_PYTHON = Path("/usr/bin/python3")


@pytest.fixture
def open_tmp():
    """A folder every user may enter (pytest's own tmp_path lies under a 0700 folder)."""
    folder = Path(tempfile.mkdtemp(prefix="attnlab-uid-only-", dir="/tmp"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder)


def _python_in(folder: Path, mode: int) -> str:
    """A link to the system's Python in ``folder/bin``, with ``folder`` at ``mode``."""
    (folder / "bin").mkdir(parents=True)
    link = folder / "bin" / "python"
    link.symlink_to(SYSTEM_PYTHON)
    folder.chmod(mode)
    return str(link)


def test_an_interpreter_behind_a_private_folder_is_refused_and_the_folder_named(open_tmp):
    python = _python_in(open_tmp / "private", 0o700)
    refusal = sandbox.uid_only_refusal(python)
    assert refusal is not None and "cannot run" in refusal
    assert f"other users cannot enter {open_tmp / 'private'}" in refusal
    assert "bubblewrap" in refusal  # and says what to do


def test_an_interpreter_other_users_can_run_is_accepted(open_tmp):
    if not SYSTEM_PYTHON.exists() or sandbox._unsearchable(SYSTEM_PYTHON) is not None:
        pytest.skip("no system Python that other users can run here")
    assert sandbox.uid_only_refusal(_python_in(open_tmp / "shared", 0o755)) is None


def test_the_grader_refuses_in_uid_only_mode_before_grading(tmp_path, monkeypatch):
    from attnlab.course import grade_cli

    monkeypatch.setattr(sandbox, "availability", lambda: (False, "no bubblewrap (test)"))
    monkeypatch.setattr(sandbox, "unsandboxed_mode", lambda: "uid-only")
    monkeypatch.setattr(sandbox, "uid_only_refusal", lambda: "uid-only grading: no (test)")
    (tmp_path / "submissions").mkdir()
    with pytest.raises(RuntimeError, match="uid-only grading: no"):
        grade_cli.grade(tmp_path / "submissions", tmp_path / "out.csv", allow_unsandboxed=True)
    assert not (tmp_path / "out.csv").exists()
