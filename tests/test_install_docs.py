"""The install the README describes is the one the Makefile and Binder do (issue 17).

- ``make setup TORCH_INDEX=cpu`` passes exactly pip's two standard index options that the README
  shows and that ``binder/requirements.txt`` uses; the default install names no index.
- ``make lab`` as root starts JupyterLab with ``--allow-root`` and says why; as another user it
  does not (run with stand-ins for ``id`` and ``jupyter``; nothing is installed or started:
  ``-o`` tells make not to remake the venv's stamp or MathJax, the set-up is printed with
  ``-n`` only).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CPU_INDEX = [
    "--index-url https://download.pytorch.org/whl/cpu",
    "--extra-index-url https://pypi.org/simple",
]
NO_REMAKE = ["-o", ".venv/.installed", "-o", "_extra/mathjax/tex-svg-full.js"]

needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="GNU make is not installed")


def make(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["make", "--no-print-directory", *NO_REMAKE, *args],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env=env,
    )


def pip_install_line(*make_args: str) -> str:
    # -n -W requirements.txt: print the set-up recipe as if requirements.txt had changed
    out = subprocess.run(
        ["make", "--no-print-directory", "-n", "-W", "requirements.txt", ".venv/.installed",
         *make_args],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    ).stdout
    lines = [ln for ln in out.splitlines() if "pip install -q" in ln and "-r requirements" in ln]
    assert len(lines) == 1, out
    return lines[0]


@needs_make
def test_torch_index_cpu_passes_pips_standard_index_options():
    line = pip_install_line("TORCH_INDEX=cpu")
    assert " ".join(CPU_INDEX) in line


@needs_make
def test_the_default_install_names_no_index():
    assert "--index-url" not in pip_install_line()


@needs_make
def test_an_unknown_torch_index_is_refused():
    result = make("-n", "setup", "TORCH_INDEX=cuda")
    assert result.returncode != 0
    assert "TORCH_INDEX is 'cpu' or unset" in result.stderr


def test_readme_and_binder_show_the_same_options():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "make setup TORCH_INDEX=cpu" in readme
    assert " ".join(CPU_INDEX) in readme
    binder = (ROOT / "binder/requirements.txt").read_text(encoding="utf-8").splitlines()
    assert [ln for ln in binder if ln.startswith("--")] == CPU_INDEX


def test_readme_has_the_plain_line_for_learners_without_make():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "-m venv .venv && . .venv/bin/activate && pip install -r requirements.txt -e . && " \
           "jupyter lab notebooks/" in readme


def fake_tools(tmp_path: Path, uid: int) -> dict[str, str]:
    """PATH with a stand-in ``id`` (prints ``uid``) and ``jupyter`` (prints its arguments)."""
    (tmp_path / "id").write_text(f'#!/bin/sh\necho {uid}\n', encoding="utf-8")
    (tmp_path / "jupyter").write_text('#!/bin/sh\necho "jupyter $*"\n', encoding="utf-8")
    for tool in ("id", "jupyter"):
        (tmp_path / tool).chmod(0o755)
    return {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}


@needs_make
def test_make_lab_as_root_passes_allow_root_and_says_why(tmp_path: Path):
    result = make("lab", f"BIN={tmp_path}", env=fake_tools(tmp_path, 0))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "jupyter lab --allow-root notebooks/" in result.stdout
    assert "running as root" in result.stdout


@needs_make
def test_make_lab_as_another_user_does_not(tmp_path: Path):
    result = make("lab", f"BIN={tmp_path}", env=fake_tools(tmp_path, 1000))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "jupyter lab notebooks/" in result.stdout
    assert "--allow-root" not in result.stdout and "root" not in result.stdout
