"""Package data: the figures and study results a chapter reads come from the package (issue 28).

The loaders are checked against the files of the source tree read by path, byte for byte and
with the standard ``csv`` module, and against bad names. Whether a built wheel really ships
them is checked in ``tests/wheel/`` (run by ``make test``'s wheel stage).
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from attnlab.resources import FIGURES, STUDY_RESULTS, figure_png, packaged_file
from attnlab.study import packaged_results, packaged_text
from attnlab.study.runner import COLUMNS, parse_results

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "attnlab"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
#: What make study writes into STUDY_RESULTS (the CLI's report) and chapter 10 reads.
STUDY_FILES = ("results.csv", "timing.md", "summary.md", "accuracy.png", "ablation.png",
               "curves_gapped.png")  # fmt: skip


def test_the_study_results_are_in_the_package_folder():
    folder = SRC / STUDY_RESULTS
    assert sorted(p.name for p in folder.iterdir()) == sorted(STUDY_FILES)
    assert not (ROOT / "book" / "study" / "results.csv").exists(), "one copy only"


def test_packaged_results_equal_the_csv_read_by_the_csv_module():
    with (SRC / STUDY_RESULTS / "results.csv").open(newline="", encoding="utf-8") as handle:
        expected = list(csv.DictReader(handle))
    rows = packaged_results()
    assert len(rows) == len(expected) > 900 and rows == expected
    assert tuple(rows[0]) == COLUMNS


def test_packaged_text_and_figures_are_the_files_of_the_tree():
    assert packaged_text("timing.md") == (SRC / STUDY_RESULTS / "timing.md").read_text("utf-8")
    assert packaged_text("summary.md") == (SRC / STUDY_RESULTS / "summary.md").read_text("utf-8")
    png = figure_png("gam_scaling.png")
    assert png == (SRC / FIGURES / "gam_scaling.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    raw = packaged_file(STUDY_RESULTS, "ablation.png").read_bytes()
    assert raw == (SRC / STUDY_RESULTS / "ablation.png").read_bytes()


@pytest.mark.parametrize(
    ("folder", "name", "error", "match"),
    [
        ("figures", "missing.png", FileNotFoundError, "ships no file figures/missing.png"),
        ("study/results", "nope.md", FileNotFoundError, "ships no file"),
        ("study", "results.csv", ValueError, "folder must be"),
        ("../figures", "gam_scaling.png", ValueError, "folder must be"),
        ("figures", "../resources.py", ValueError, "without a folder part"),
        ("figures", "", ValueError, "without a folder part"),
        ("figures", "..", ValueError, "without a folder part"),
        ("figures", b"gam_scaling.png", TypeError, "name must be a string"),
        (None, "gam_scaling.png", TypeError, "folder must be a string"),
    ],
)
def test_packaged_file_refuses_bad_names(folder, name, error, match):
    with pytest.raises(error, match=re.escape(match)):
        packaged_file(folder, name)


def test_typed_loaders_refuse_the_wrong_kind_of_file():
    with pytest.raises(ValueError, match="ending in .png"):
        figure_png("gam_scaling.svg")
    with pytest.raises(ValueError, match=r"\.md or \.csv"):
        packaged_text("ablation.png")
    with pytest.raises(FileNotFoundError):
        packaged_text("absent.md")


def test_parse_results_drops_a_half_written_line_and_refuses_another_header():
    header = ",".join(COLUMNS)
    row = ",".join("1" for _ in COLUMNS)
    assert len(parse_results(f"{header}\n{row}\n{row[:5]}")) == 1
    with pytest.raises(ValueError, match="^the text is not a results CSV of this study"):
        parse_results("a,b\n1,2\n")


# ---- notebooks read nothing outside themselves --------------------------------------------------
READS_OUTSIDE = re.compile(
    r"""(open|Path|read_csv|read_text|loadtxt|imread|read_results)\(\s*[frb]?["']\.\./"""
)


def _cells(path):
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_notebook_reads_or_links_a_path_above_its_folder(path):
    for number, cell in enumerate(_cells(path), 1):
        source = "".join(cell["source"])
        assert not READS_OUTSIDE.search(source), f"{path.name} cell {number} reads '../'"
        links = re.findall(r"\]\(([^)\s]+)\)|\{figure\}\s+(\S+)|\{image\}\s+(\S+)", source)
        for target in (t for group in links for t in group if t):
            assert not target.startswith(("../", "/")), (
                f"{path.name} cell {number}: {target} exists only in the repository "
                "(Colab opens the notebook alone): link the book or the repository's URL"
            )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_notebook_imports_myst_nb(path):
    # attnlab.plot.glue falls back to a no-op where myst-nb is missing (a bare Colab runtime).
    for cell in _cells(path):
        if cell["cell_type"] == "code":
            assert not re.search(r"^\s*(from|import)\s+myst_nb", "".join(cell["source"]), re.M)


def test_repository_links_in_notebooks_name_existing_files():
    import yaml

    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    base = f"{config['repository']['url']}/blob/{config['repository']['branch']}/"
    found = 0
    for path in NOTEBOOKS:
        for cell in _cells(path):
            for url in re.findall(r"\((https://github\.com/[^)\s]+)\)", "".join(cell["source"])):
                assert url.startswith(base), f"{path.name}: {url} is not under {base}"
                assert (ROOT / url.removeprefix(base)).is_file(), f"{path.name}: {url}"
                found += 1
    assert found >= 3  # chapters 01, 05 and 06 link the bibliography's source
