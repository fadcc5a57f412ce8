"""Launch buttons work: a notebook opened on Colab or Binder can import attnlab.

Every chapter's first code cell is the install guard of CONTRIBUTING.md: it imports attnlab,
and only where that fails (a fresh Colab runtime) installs it from the repository named in
``_config.yml``. Locally and under nbval the import succeeds and the cell does nothing. Binder
builds its image from ``binder/`` with the same pins as ``requirements.txt``.
"""

from __future__ import annotations

import builtins
import importlib.metadata
import json
import os
import re
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
REPO_URL = CONFIG["repository"]["url"]
GUARD_URL = re.compile(r"git\+(\S+?)[\"']")


def contributing_guard() -> str:
    """The guard cell as CONTRIBUTING.md prints it (the first python block of that section)."""
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    section = text.split("### The first two code cells of every chapter", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, flags=re.DOTALL)
    assert match, "CONTRIBUTING.md lost the guard cell of 'The first two code cells'"
    return match.group(1)


def normalise(source: str) -> list[str]:
    """The guard's code lines: comments (its wording may be edited) and blank lines dropped."""
    lines = [re.sub(r"\s+#.*$", "", line).rstrip() for line in source.splitlines()]
    return [line for line in lines if line.strip() and not line.lstrip().startswith("#")]


def first_code_cell(path: Path) -> dict:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return next(c for c in cells if c["cell_type"] == "code")


def run_guard(source: str, importable: bool) -> list[tuple[str, str]]:
    """Execute the guard as IPython would, with attnlab importable or not; return %pip calls."""
    from IPython.core.inputtransformer2 import TransformerManager

    code = TransformerManager().transform_cell(source)
    magics: list[tuple[str, str]] = []
    installed = {"done": importable}
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "attnlab" and not installed["done"]:
            raise ModuleNotFoundError("No module named 'attnlab'")
        return real_import(name, *args, **kwargs)

    class FakeShell:
        def run_line_magic(self, magic: str, line: str) -> None:
            magics.append((magic, line))
            installed["done"] = True  # the install succeeded: the second import works

    namespace = {"get_ipython": FakeShell, "__builtins__": builtins}
    saved = sys.modules.pop("attnlab", None)
    builtins.__import__ = fake_import
    try:
        exec(compile(code, "<guard>", "exec"), namespace)
    finally:
        builtins.__import__ = real_import
        if saved is not None:
            sys.modules["attnlab"] = saved
    return magics


# ---- the guard itself --------------------------------------------------------------------------
def test_contributing_guard_installs_from_the_configured_repository():
    urls = GUARD_URL.findall(contributing_guard())
    assert urls == [REPO_URL], (
        f"CONTRIBUTING.md's guard installs from {urls}; _config.yml says {REPO_URL}"
    )


def test_guard_is_a_no_op_where_attnlab_imports():
    assert run_guard(contributing_guard(), importable=True) == []


def test_guard_installs_attnlab_where_it_is_missing():
    magics = run_guard(contributing_guard(), importable=False)
    assert len(magics) == 1, magics
    magic, line = magics[0]
    assert magic == "pip" and "install" in line.split()
    # The book's extra: what a chapter imports, with lower bounds only (pyproject.toml), so the
    # torch a runtime already has (Colab's) satisfies it and is not replaced.
    assert f"attnlab[book] @ git+{REPO_URL}" in line


def test_there_are_notebooks_to_check():
    assert NOTEBOOKS, "no notebooks under notebooks/"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_first_code_cell_is_the_install_guard(path):
    cell = first_code_cell(path)
    got, expected = normalise("".join(cell["source"])), normalise(contributing_guard())
    assert got == expected, (
        f"{path.name}: the first code cell must be the install guard of CONTRIBUTING.md.\n"
        f"expected:\n" + "\n".join(expected) + "\n\ngot:\n" + "\n".join(got)
    )
    assert GUARD_URL.findall("".join(cell["source"])) == [REPO_URL]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_guard_did_nothing_when_the_notebook_was_executed(path):
    cell = first_code_cell(path)
    assert cell["outputs"] == [], (
        f"{path.name}: the guard cell printed something, so it installed attnlab instead of "
        f"importing it; run `make setup` and re-execute the notebook"
    )


# ---- launch buttons and Binder ------------------------------------------------------------------
def test_config_has_launch_buttons():
    buttons = CONFIG["launch_buttons"]
    assert buttons.get("colab_url", "").startswith("https://")
    assert buttons.get("binderhub_url", "").startswith("https://")
    assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", REPO_URL), REPO_URL
    assert CONFIG["repository"].get("branch"), "repository.branch names the launch branch"


def pins(path: Path) -> dict[str, str]:
    found = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("--"):  # pip options (binder's package index)
            name, _, version = line.partition("==")
            assert version, f"{path.name}: '{line}' is not an exact pin"
            found[name.strip().lower()] = version.strip()
    return found


def test_binder_pins_agree_with_requirements():
    binder, main = pins(ROOT / "binder/requirements.txt"), pins(ROOT / "requirements.txt")
    differ = {k: (v, main.get(k)) for k, v in binder.items() if main.get(k) != v}
    assert not differ, f"binder/requirements.txt pins differ from requirements.txt: {differ}"


def index_options(path: Path) -> list[str]:
    lines = [ln.split("#", 1)[0].strip() for ln in path.read_text(encoding="utf-8").splitlines()]
    return [ln for ln in lines if ln.startswith("--")]


def test_binder_installs_the_cpu_torch_and_the_default_install_stays_pypi():
    # Binder has no GPU: PyTorch's CPU index saves the ~2.7 GB of CUDA wheels that PyPI's
    # Linux torch pulls; every other package still comes from PyPI. The main requirements.txt
    # names no index, so a plain `pip install -r requirements.txt` works everywhere.
    assert index_options(ROOT / "binder/requirements.txt") == [
        "--index-url https://download.pytorch.org/whl/cpu",
        "--extra-index-url https://pypi.org/simple",
    ]
    assert index_options(ROOT / "requirements.txt") == []


def test_binder_python_meets_requires_python():
    runtime = (ROOT / "binder/runtime.txt").read_text(encoding="utf-8").strip()
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    minimum = re.search(r'requires-python\s*=\s*">=(\d+)\.(\d+)"', text)
    assert minimum and runtime.startswith("python-")
    have = tuple(int(x) for x in runtime.removeprefix("python-").split(".")[:2])
    assert have >= (int(minimum[1]), int(minimum[2])), f"{runtime} < {minimum.group(0)}"


def test_binder_post_build_installs_attnlab_from_the_checkout():
    post_build = ROOT / "binder/postBuild"
    assert os.access(post_build, os.X_OK), "binder/postBuild must be executable"
    commands = [ln for ln in post_build.read_text().splitlines() if not ln.startswith("#")]
    assert any(re.search(r"pip install .*(\s\.$|\s-e \.$)", ln) for ln in commands)


def notebook_imports() -> set[str]:
    names = set()
    for path in NOTEBOOKS:
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "code":
                source = "".join(cell["source"])
                names.update(re.findall(r"^\s*(?:from|import)\s+(\w+)", source, flags=re.M))
    return names


def test_binder_installs_everything_the_notebooks_import():
    binder = set(pins(ROOT / "binder/requirements.txt"))
    provided = importlib.metadata.packages_distributions()
    missing = {}
    for module in sorted(notebook_imports()):
        if module in sys.stdlib_module_names or module in {"attnlab", "IPython"}:
            continue
        dists = {d.lower() for d in provided.get(module, [module])}
        if not dists & binder:
            missing[module] = sorted(dists)
    assert not missing, f"notebooks import modules Binder would not install: {missing}"
