"""Notebook hygiene: what the book promises about every chapter notebook.

Every notebook is listed in _toc.yml, was executed top to bottom in a fresh kernel (code-cell
execution counts exactly 1..N, outputs present), uses the python3 kernelspec, contains no
absolute paths, and checks something (at least one assert or exercise check).
"""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
ABSOLUTE_PATH = re.compile(r"(?<![\w.:/])/(root|home|tmp|work|Users|var|opt)/[\w.-]+")
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def code_cells(nb: dict) -> list[dict]:
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found under notebooks/"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_listed_in_toc(path):
    toc = (ROOT / "_toc.yml").read_text()
    listed = re.findall(r"^\s*-\s*file:\s*(\S+)", toc, flags=re.MULTILINE)
    assert f"notebooks/{path.stem}" in listed, f"{path.name} is not listed in _toc.yml"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_executed_in_order_with_outputs(path):
    cells = code_cells(load(path))
    counts = [c["execution_count"] for c in cells]
    assert counts == list(range(1, len(cells) + 1)), (
        f"{path.name}: execution counts {counts} are not 1..{len(cells)}; "
        f"re-run it with `make execute NB=notebooks/{path.name}`"
    )
    assert any(c["outputs"] for c in cells), f"{path.name} has no stored outputs"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_kernelspec_is_python3(path):
    assert load(path)["metadata"]["kernelspec"]["name"] == "python3"


def all_text(nb: dict) -> str:
    """Every source and output string of a notebook, decoded, without terminal colour codes."""
    parts = []
    for cell in nb["cells"]:
        parts.append("".join(cell["source"]))
        for out in cell.get("outputs", []):
            parts.append("".join(out.get("text", "")))
            for mime, value in out.get("data", {}).items():
                if not mime.startswith("image/"):  # base64 pictures are not text
                    parts.append("".join(value) if isinstance(value, list) else str(value))
            parts.extend(out.get("traceback", []))
            parts.append(str(out.get("evalue", "")))
    return ANSI.sub("", "\n".join(parts))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_absolute_paths(path):
    hits = ABSOLUTE_PATH.findall(all_text(load(path)))
    assert not hits, (
        f"{path.name} contains absolute paths (in a source, an output or a traceback): {hits[:3]}"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_checks_something(path):
    sources = ["".join(c["source"]) for c in code_cells(load(path))]
    assert any("assert " in s or "check(" in s for s in sources), (
        f"{path.name} has no asserting cell"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_errors_in_stored_outputs(path):
    for cell in code_cells(load(path)):
        tags = cell.get("metadata", {}).get("tags", [])
        for out in cell["outputs"]:
            if out["output_type"] == "error":
                assert "raises-exception" in tags, (
                    f"{path.name}: cell {cell['execution_count']} stored an error "
                    f"({out['ename']}) without the raises-exception tag"
                )



@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_stderr_in_stored_outputs(path):
    # A warning stored with the outputs (matplotlib's findfont from a stale shared font cache,
    # a deprecation) is shown to every reader, and strict nbval fails on a machine that does
    # not print it: execute with a private, warmed MPLCONFIGDIR (scripts/nbval_alone.sh does).
    for cell in code_cells(load(path)):
        for out in cell["outputs"]:
            assert out.get("name") != "stderr", (
                f"{path.name}: cell {cell['execution_count']} stored stderr: "
                f"{''.join(out.get('text', ''))[:120]!r}"
            )

def test_pytest_does_not_collect_build_copies():
    text = (ROOT / "pyproject.toml").read_text()
    assert 'testpaths = ["tests"]' in text
    assert "_build" in text.split("norecursedirs", 1)[1].splitlines()[0]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_solutions_do_not_number_figures(path):
    # A {numref} inside a solution comes out of the PDF as "Fig. ??" (the gated solution is set
    # apart from the figure's label); scripts/check_pdf.py caught one in 09.6. Name the section.
    for index, cell in enumerate(load(path)["cells"]):
        tags = cell.get("metadata", {}).get("tags", [])
        if cell["cell_type"] == "markdown" and "solution" in tags:
            assert "{numref}" not in "".join(cell["source"]), f"{path.name}: cell {index}"
