"""The built wheel, installed with its extras into a fresh venv, is a working attnlab (issue 22).

``make test``'s wheel stage (``scripts/nbval_alone.sh``) builds the wheel and the venv once
with ``scripts/wheel_env.py`` and points ``ATTNLAB_WHEEL_WORK`` at them; run alone, this
module builds its own (a few minutes). The venv is made by ``python -m venv`` and filled by
pip from a wheelhouse with ``--no-index`` (the wheels of the pinned versions, fetched once):
a dependency the wheel does not declare is missing there, however complete ``.venv`` is.
``make test``'s unit stage skips this folder (``--ignore=tests/wheel``); the wheel stage runs it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WHEELHOUSE = ROOT / "_build" / "wheels"


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    given = os.environ.get("ATTNLAB_WHEEL_WORK")
    if given:
        return Path(given)
    path = tmp_path_factory.mktemp("wheel") / "env"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "wheel_env.py"), str(path)], check=True)
    return path


@pytest.fixture(scope="module")
def wheel(work) -> Path:
    (found,) = sorted((work / "dist").glob("attnlab-*.whl"))
    return found


def _in_venv(python: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    # Nothing from the checkout on the path; byte-code cached (the wheel was installed with
    # --no-compile), so torch is compiled once, not at every call.
    drop = ("PYTHONPATH", "PYTHONHOME", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    return subprocess.run(
        [str(python), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300
    )


def _metadata(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return archive.read(name).decode().splitlines()


def test_the_wheel_ships_the_package_data(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    expected = {"attnlab/py.typed", "attnlab/figures/gam_scaling.png"} | {
        f"attnlab/study/results/{n}"
        for n in ("results.csv", "timing.md", "summary.md", "accuracy.png", "ablation.png",
                  "curves_gapped.png")
    }  # fmt: skip
    assert expected <= names, sorted(expected - names)
    assert not any(n.startswith(("tests/", "notebooks/", "book/")) for n in names)


def test_the_metadata_declares_bounds_not_pins(wheel):
    requires = [ln.removeprefix("Requires-Dist: ") for ln in _metadata(wheel)
                if ln.startswith("Requires-Dist: ")]  # fmt: skip
    always = [r for r in requires if "extra ==" not in r]
    assert always == ["numpy>=2.0"], always  # the core needs numpy alone
    assert not [r for r in requires if "==" in r.split(";")[0]], "an exact pin in an extra"
    assert any(r.startswith("torch>=2.5") and 'extra == "torch"' in r for r in requires)
    extras = {ln.removeprefix("Provides-Extra: ") for ln in _metadata(wheel)
              if ln.startswith("Provides-Extra: ")}  # fmt: skip
    assert {"book", "course", "torch", "plot"} <= extras


def test_imports_and_commands_work_in_the_fresh_venv(work, tmp_path):
    python = work / "venv" / "bin" / "python"
    done = _in_venv(python, "-c", "import attnlab, attnlab.nn; print(attnlab.__file__)",
                    cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).is_relative_to(work / "venv"), "attnlab not from the wheel"
    for command in ("attnlab.grade", "attnlab.study", "attnlab.assign"):
        done = _in_venv(python, "-m", command, "--help", cwd=tmp_path)
        assert done.returncode == 0, f"{command}: {done.stderr}"
        assert done.stdout.startswith(f"usage: python -m {command}"), done.stdout[:200]
    code = (
        "from attnlab.study import packaged_results, packaged_text\n"
        "from attnlab.resources import figure_png\n"
        "rows = packaged_results()\n"
        "assert len(rows) > 900 and packaged_text('timing.md').startswith('# Timing')\n"
        "assert figure_png('gam_scaling.png').startswith(b'\\x89PNG')\n"
        "print(len(rows))\n"
    )
    done = _in_venv(python, "-c", code, cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def test_the_fresh_venv_holds_what_the_extras_require_and_no_more(work, tmp_path):
    python = work / "venv" / "bin" / "python"
    done = _in_venv(python, "-m", "pip", "list", "--format=freeze", cwd=tmp_path)
    names = {line.split("==")[0].lower() for line in done.stdout.splitlines()}
    assert {"torch", "numpy", "matplotlib", "tqdm", "myst-nb", "nbformat", "nbclient",
            "ipykernel"} <= names  # fmt: skip
    assert not names & {"pytest", "nbval", "jupyter-book", "ruff", "hypothesis", "playwright"}


def test_the_core_needs_numpy_alone(wheel, tmp_path):
    core = tmp_path / "core"
    venv.EnvBuilder(with_pip=True).create(core)
    python = core / "bin" / "python"
    install = _in_venv(python, "-m", "pip", "install", "-q", "--no-compile", "--no-index",
                       "--find-links", str(WHEELHOUSE), str(wheel), cwd=tmp_path)  # fmt: skip
    assert install.returncode == 0, install.stderr
    listed = _in_venv(python, "-m", "pip", "list", "--format=freeze", cwd=tmp_path).stdout
    assert {ln.split("==")[0] for ln in listed.splitlines()} - {"pip", "setuptools"} == {
        "attnlab", "numpy"}  # fmt: skip
    done = _in_venv(python, "-c", "import attnlab, numpy as np; "
                    "print(attnlab.softmax(np.zeros(4)).tolist())", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0 and done.stdout.strip() == "[0.25, 0.25, 0.25, 0.25]", done.stderr
    done = _in_venv(python, "-c", "import attnlab.nn", cwd=tmp_path)
    assert done.returncode != 0 and "No module named 'torch'" in done.stderr
