"""Where the grader's Python lives must not matter to the sandbox (issue 15's isolation)."""

from __future__ import annotations

import subprocess

import pytest

from attnlab.course import sandbox


def test_folders_under_tmp_stay_visible_in_the_sandbox(tmp_path, monkeypatch):
    """A venv or checkout under /tmp (a CI runner's clone) is bound after the sandbox's own
    /tmp, not hidden under it: the grader once failed on a fresh clone in /tmp."""
    ok, why = sandbox.availability()
    if not ok:
        pytest.skip(why)
    extra = tmp_path / "venv-in-tmp"
    extra.mkdir()
    extra.chmod(0o755)
    (extra / "marker").write_text("seen")
    (extra / "marker").chmod(0o644)
    real = sandbox._python_roots()
    monkeypatch.setattr(sandbox, "_python_roots", lambda: [*real, extra])
    cmd = sandbox.sandbox_command(
        ["/usr/bin/cat", str(extra / "marker")],
        submitted=extra,
        inputs=extra,
        uid=sandbox.UID_BASE,
        limits=sandbox.Limits(),
    )
    done = subprocess.run(cmd, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert done.stdout == b"seen"


def test_python_roots_are_bound_after_the_scratch_mounts(monkeypatch):
    roots = [sandbox.Path("/tmp/clone/.venv"), sandbox.Path("/home/student/src")]
    monkeypatch.setattr(sandbox, "_python_roots", lambda: roots)
    cmd = sandbox.sandbox_command(
        ["true"],
        submitted=sandbox.Path("/nowhere"),
        inputs=sandbox.Path("/nowhere"),
        uid=sandbox.UID_BASE,
        limits=sandbox.Limits(),
    )
    tmpfs = [i for i, arg in enumerate(cmd) if arg == "--tmpfs"]
    for root in roots:
        triple = ["--ro-bind", str(root), str(root)]
        bind = next(i for i in range(len(cmd) - 2) if cmd[i : i + 3] == triple)
        assert bind > max(tmpfs), root
    # the scratch folders keep their own modes: no --dir re-creates /tmp or /home/student
    dirs = [cmd[i + 1] for i, arg in enumerate(cmd) if arg == "--dir"]
    assert "/tmp" not in dirs and "/home/student" not in dirs
