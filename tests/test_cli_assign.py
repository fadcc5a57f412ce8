"""Worst cases of every input of ``python -m attnlab.assign`` (paths and notebook contents).

Each bad input ends in one line on standard error and exit status 2, with nothing written;
never a traceback, never a silent success. The happy paths are in ``tests/test_assign.py``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from attnlab.assign import main
from attnlab.course.student import student_version

FIXTURES = Path(__file__).parent / "fixtures" / "coursework"
REFERENCE = FIXTURES / "softmax_hw.ipynb"


def _one_line_error(capsys, status: int, match: str) -> str:
    err = capsys.readouterr().err
    assert status == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("attnlab.assign: "), err
    assert match in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def source(tmp_path: Path) -> Path:
    folder = tmp_path / "nbs"
    shutil.copytree(FIXTURES, folder)
    return folder


def _notebook(*cells: nbformat.NotebookNode) -> nbformat.NotebookNode:
    return nbformat.v4.new_notebook(cells=list(cells))


def _md(text: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_markdown_cell(text)


def _code(text: str, tags: tuple[str, ...] = ()) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(text)
    if tags:
        cell.metadata["tags"] = list(tags)
    return cell


EXERCISE = "```{{exercise}} Title\n:label: {label}\n\nDo it.\n```"


# ---- paths ----------------------------------------------------------------------------------
@pytest.mark.parametrize("flag", ["--out", "--list"])
def test_a_missing_source_is_an_error(tmp_path, capsys, flag):
    args = [str(tmp_path / "missing"), flag] + ([str(tmp_path / "out")] if flag == "--out" else [])
    _one_line_error(capsys, main(args), "no notebook or folder at")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("flag", ["--out", "--list"])
def test_a_source_file_that_is_not_a_notebook_is_an_error(tmp_path, capsys, flag):
    text = tmp_path / "notes.txt"
    text.write_text("not a notebook")
    args = [str(text), flag] + ([str(tmp_path / "elsewhere" / "out")] if flag == "--out" else [])
    _one_line_error(capsys, main(args), "not a notebook (.ipynb)")
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.parametrize("flag", ["--out", "--list"])
def test_a_folder_without_notebooks_is_an_error_not_zero_notebooks(tmp_path, capsys, flag):
    empty = tmp_path / "empty"
    (empty / "sub").mkdir(parents=True)
    (empty / "data.csv").write_text("a,b\n")
    args = [str(empty), flag] + ([str(tmp_path / "out")] if flag == "--out" else [])
    _one_line_error(capsys, main(args), "no notebook (.ipynb) under")
    assert not (tmp_path / "out").exists()


def test_out_naming_an_existing_file_is_an_error_even_with_force(source, tmp_path, capsys):
    target = tmp_path / "grades.txt"
    target.write_text("mine")
    for extra in ([], ["--force"]):
        _one_line_error(capsys, main([str(source), "--out", str(target), *extra]), "is a file")
    assert target.read_text() == "mine"
    inside = target / "hw"
    _one_line_error(capsys, main([str(source), "--out", str(inside)]), "is a file")


def test_out_inside_or_equal_to_the_source_is_an_error_on_the_command_line(source, capsys):
    before = {p: p.read_bytes() for p in source.rglob("*")}
    for out in (source, source / "student", source / "softmax_hw.ipynb"):
        status = main([str(source), "--out", str(out), "--force"])
        _one_line_error(capsys, status, "inside the source folder")
    status = main([str(source / "softmax_hw.ipynb"), "--out", str(source), "--force"])
    _one_line_error(capsys, status, "inside the source folder")
    assert {p: p.read_bytes() for p in source.rglob("*")} == before


def test_a_folder_named_like_a_notebook_is_not_read_as_one(source, tmp_path, capsys):
    (source / "old.ipynb").mkdir()  # a folder, e.g. an unpacked archive
    assert main([str(source), "--out", str(tmp_path / "out")]) == 0
    assert sorted(p.name for p in (tmp_path / "out").glob("*.ipynb")) == ["softmax_hw.ipynb"]


# ---- notebook contents ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "content, match",
    [
        (b"{not json", "not a valid notebook"),
        (b'{"cells": 3}', "not a valid notebook"),  # JSON, but not a notebook
        (b"[]", "not a valid notebook"),
        (b"\xff\xfe\x00binary", "not a valid notebook"),
    ],
)
@pytest.mark.parametrize("flag", ["--out", "--list"])
def test_an_invalid_notebook_is_an_error_and_nothing_is_written(
    source, tmp_path, capsys, content, match, flag
):
    # "a_" sorts before the good notebook: the bad one must stop the run before any write.
    bad = source / "zz_broken.ipynb" if flag == "--list" else source / "a_broken.ipynb"
    bad.write_bytes(content)
    out = tmp_path / "out"
    args = [str(source), flag] + ([str(out)] if flag == "--out" else [])
    line = _one_line_error(capsys, main(args), match)
    assert bad.name in line
    assert not out.exists()  # checked before the first file is written


def test_a_check_whose_solution_cell_lacks_its_tag_is_refused(tmp_path, capsys):
    """The answer would reach students: the untagged cell is copied as it is."""
    nb = _notebook(
        _md("# Homework"),
        _md(EXERCISE.format(label="ex-99-1") + "\n\n```{solution} ex-99-1\nUse exp.\n```"),
        _code("def f(x):\n    return 2 * x  # THE ANSWER"),  # no `solution` tag
        _code('assert check("99.1", f)'),
    )
    path = tmp_path / "src" / "hw.ipynb"
    path.parent.mkdir()
    nbformat.write(nb, path)
    with pytest.raises(ValueError, match=r"99\.1.*no solution code cell"):
        student_version(nb)
    line = _one_line_error(capsys, main([str(path), "--out", str(tmp_path / "o")]), "99.1")
    assert "hw.ipynb" in line and not (tmp_path / "o").exists()
    nb.cells[2].metadata["tags"] = ["solution"]  # tagged: accepted, the answer is stubbed
    assert "THE ANSWER" not in nbformat.writes(student_version(nb))


def test_a_check_for_an_exercise_missing_from_the_notebook_is_refused():
    nb = _notebook(_md(EXERCISE.format(label="ex-99-1")),
                   _code("g = 1", tags=("solution",)), _code('assert check("99.2", g)'))
    with pytest.raises(ValueError, match=r"99\.2.*ex-99-2"):
        student_version(nb)


def test_a_duplicated_exercise_label_is_refused(tmp_path, capsys):
    nb = _notebook(
        _md(EXERCISE.format(label="ex-99-1")),
        _code("a = 1", tags=("solution",)),
        _md(EXERCISE.format(label="ex-99-1")),  # copied and not renumbered
        _code("b = 2", tags=("solution",)),
    )
    with pytest.raises(ValueError, match="ex-99-1.*more than once"):
        student_version(nb)
    path = tmp_path / "hw.ipynb"
    nbformat.write(nb, path)
    _one_line_error(capsys, main([str(path), "--list"]), "more than once")


def test_the_real_command_fails_in_one_line(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "attnlab.assign", str(tmp_path / "missing"), "--out", "x"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        f"attnlab.assign: no notebook or folder at {tmp_path / 'missing'}"
    ]
