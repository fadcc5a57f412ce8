"""Build attnlab's wheel and install it, with extras, into a fresh venv outside the repository.

Used by ``make test``'s wheel stage (``make nbval``) and by ``tests/wheel/``::

    python scripts/wheel_env.py WORK [--extras book,course] [--wheels _build/wheels]

1. The wheel is built from a copy of ``src/``, ``pyproject.toml``, ``README.md`` and ``LICENSE``
   (so the build writes nothing into the checkout), with this interpreter's setuptools
   (``--no-build-isolation``: no download).
2. The wheelhouse ``--wheels`` receives the wheels of everything the extras require, at the
   versions this interpreter's venv has (``pip freeze`` as constraints: the pins of
   ``requirements.txt`` and what they resolved to). Once it holds them, later runs resolve
   offline (``--no-index``); only a first run, or a change of requirements, reaches the index
   (the same one ``make setup`` used; ``ATTNLAB_PIP_INDEX`` passes ``TORCH_INDEX=cpu``'s options).
3. ``WORK/venv`` is a new venv (``python -m venv``, nothing inherited) into which pip installs
   the wheel with its extras from the wheelhouse alone (``--no-index``). A requirement the
   wheel forgets to declare is therefore missing there, however complete ``.venv`` is.
4. ``WORK/jupyter`` gets a kernelspec ``attnlab-wheel`` that runs that venv's Python, for nbval.

Prints ``WORK/dist/attnlab-*.whl`` on its last line. Exit status 1 with a one-line reason on
failure (pip's own output above it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KERNEL = "attnlab-wheel"
#: What the wheel is built from: the package and the files its metadata names.
SOURCES = ("src", "pyproject.toml", "README.md", "LICENSE")


def _run(args: list[str], what: str, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(args, **kwargs)
    if done.returncode != 0:
        raise SystemExit(f"wheel_env: {what} failed (exit {done.returncode}): {' '.join(args)}")
    return done


def _clean_env() -> dict[str, str]:
    """The environment without PYTHONPATH/PYTHONHOME: the venv must see only what it installed."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


def build_wheel(dist: Path) -> Path:
    """Build the wheel from a copy of the sources into ``dist``; return its path."""
    stage = dist.parent / "source"
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, stage / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, stage / name)
    dist.mkdir(parents=True, exist_ok=True)
    _run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", str(dist), str(stage)],
        "building the wheel", env=_clean_env(),
    )  # fmt: skip
    wheels = sorted(dist.glob("attnlab-*.whl"))
    if len(wheels) != 1:
        raise SystemExit(f"wheel_env: expected one attnlab wheel in {dist}, found {wheels}")
    shutil.rmtree(stage)
    return wheels[0]


def fill_wheelhouse(requirement: str, wheels: Path, work: Path) -> None:
    """Put the wheels of ``requirement``'s dependencies, at this venv's versions, in ``wheels``."""
    wheels.mkdir(parents=True, exist_ok=True)
    frozen = _run(
        [sys.executable, "-m", "pip", "freeze", "--exclude-editable", "--exclude", "attnlab"],
        "pip freeze", capture_output=True, text=True,
    ).stdout  # fmt: skip
    constraints = work / "constraints.txt"
    constraints.write_text(frozen, encoding="utf-8")
    download = [sys.executable, "-m", "pip", "download", "-q", "-d", str(wheels),
                "-c", str(constraints), requirement]  # fmt: skip
    offline = subprocess.run(
        [*download, "--no-index", "--find-links", str(wheels)], capture_output=True, text=True
    )
    if offline.returncode != 0:  # first run, or new requirements: ask the index once
        print("wheel_env: the wheelhouse lacks some wheels; downloading them once", flush=True)
        index = os.environ.get("ATTNLAB_PIP_INDEX", "").split()
        _run([*download, *index], "filling the wheelhouse")
    for stale in wheels.glob("attnlab-*.whl"):  # the package itself comes from WORK/dist
        stale.unlink()


def make_venv(path: Path, requirement: str, wheels: Path) -> Path:
    """A new venv at ``path`` with ``requirement`` installed from ``wheels`` alone."""
    if path.exists():
        raise SystemExit(f"wheel_env: {path} exists; the venv must be new")
    venv.EnvBuilder(with_pip=True, clear=False).create(path)
    python = path / "bin" / "python"
    _run(
        # --no-compile: byte-compiling all of torch takes most of the install; the kernels
        # compile (and cache) only the modules they import.
        [str(python), "-m", "pip", "install", "-q", "--no-compile", "--no-index",
         "--find-links", str(wheels), requirement],
        "installing the wheel into the fresh venv", env=_clean_env(),
    )  # fmt: skip
    return python


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("work", type=Path, help="a new folder outside the repository")
    parser.add_argument("--extras", default="book,course", help="extras to install ('' none)")
    parser.add_argument("--wheels", type=Path, default=ROOT / "_build" / "wheels")
    args = parser.parse_args(argv)
    work = args.work.resolve()
    if work == ROOT or ROOT in work.parents:
        raise SystemExit(f"wheel_env: {work} is inside the repository; use a folder outside it")
    work.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    wheel = build_wheel(work / "dist")
    requirement = f"{wheel}[{args.extras}]" if args.extras else str(wheel)
    built = time.perf_counter()
    fill_wheelhouse(requirement, args.wheels.resolve(), work)
    filled = time.perf_counter()
    python = make_venv(work / "venv", requirement, args.wheels.resolve())
    print(
        f"wheel_env: wheel {built - start:.0f} s, wheelhouse {filled - built:.0f} s, "
        f"venv {time.perf_counter() - filled:.0f} s (load average {os.getloadavg()[0]:.1f})"
    )
    if "book" in args.extras.split(",") or "course" in args.extras.split(","):
        _run(
            [str(python), "-m", "ipykernel", "install", "--prefix", str(work / "jupyter"),
             "--name", KERNEL, "--display-name", "attnlab from its wheel"],
            "installing the kernelspec", env=_clean_env(), capture_output=True,
        )  # fmt: skip
    print(wheel)


if __name__ == "__main__":
    main()
