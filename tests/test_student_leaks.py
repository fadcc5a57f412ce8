"""Nothing of a solution reaches a student version: the worst cases an instructor can write.

Each test puts an answer where a careless instructor might (a default argument, a decorator,
a docstring, a solution block inside a list item, a solution cell without a fence) and checks
that the student version holds no trace of it, while the parts a student needs (the names,
the literal defaults, the docstring's description) stay.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys

import nbformat
import pytest

from attnlab.course.assign import assign
from attnlab.course.stubs import stub_source
from attnlab.course.student import student_version

SECRET = "np.exp(x - x.max()) / np.exp(x - x.max()).sum()"


def _stub_runs_and_raises(stub: str, name: str) -> None:
    namespace: dict = {}
    exec(compile(stub, "<stub>", "exec"), namespace)  # the stub must still be valid Python
    with pytest.raises(NotImplementedError):
        namespace[name](1.0)


def test_a_default_argument_that_computes_the_answer_becomes_an_ellipsis():
    source = (
        "import numpy as np\n"
        f"def softmax(x, _ref=lambda x: {SECRET}, axis=-1, eps=1e-9, mode='mean', dims=(1, -2),\n"
        "            *, dtype=np.float64, scale=None, out=np.zeros(3)):\n"
        "    return _ref(x)\n"
    )
    stub = stub_source(source)
    assert "lambda" not in stub and "exp" not in stub and "zeros" not in stub
    signature = ast.parse(stub).body[1].args
    literal = [ast.unparse(d) for d in signature.defaults]
    assert literal == ["...", "-1", "1e-09", "'mean'", "(1, -2)"]
    assert [ast.unparse(d) for d in signature.kw_defaults] == ["np.float64", "None", "..."]
    _stub_runs_and_raises(stub, "softmax")


def test_a_plain_signature_keeps_its_own_layout():
    source = "def f(x,\n      scale=None):  # the scale\n    return x\n"
    assert stub_source(source).splitlines()[:2] == ["def f(x,", "      scale=None):"]


def test_a_decorator_that_carries_the_answer_is_dropped_plain_ones_stay():
    source = (
        "import functools\nimport numpy as np\n"
        "@functools.lru_cache(maxsize=None)\n"
        f"@(lambda f: (lambda x: {SECRET}))\n"
        "@np.vectorize\n"
        "def softmax(x):\n    return x\n"
    )
    stub = stub_source(source)
    assert "lambda" not in stub and "exp" not in stub
    assert "@functools.lru_cache(maxsize=None)" in stub and "@np.vectorize" in stub


def test_a_decorator_call_with_a_computed_argument_is_dropped():
    source = f"@answer_from(lambda x: {SECRET})\ndef softmax(x):\n    return x\n"
    stub = stub_source(source)
    assert "answer_from" not in stub and "exp" not in stub
    _stub_runs_and_raises(stub, "softmax")


def test_a_docstring_keeps_its_description_but_loses_examples_and_the_solution_section():
    source = (
        "def softmax(x):\n"
        '    """Softmax over the last axis.\n\n'
        "    Parameters\n    ----------\n    x : ndarray\n        Logits.\n\n"
        "    Solution\n    --------\n"
        f"    Subtract the maximum: ``{SECRET}``.\n\n"
        "    Examples\n    --------\n"
        f"    >>> {SECRET}\n    array([0.5, 0.5])\n"
        '    """\n'
        f"    return {SECRET}\n"
    )
    stub = stub_source(source)
    assert "exp" not in stub and ">>>" not in stub and "Solution" not in stub
    assert "Softmax over the last axis." in stub and "Logits." in stub
    _stub_runs_and_raises(stub, "softmax")


def test_an_answer_paragraph_in_a_one_line_style_docstring_goes():
    source = f'def softmax(x):\n    """Softmax.\n\n    Answer:\n    {SECRET}\n    """\n    return x'
    stub = stub_source(source)
    assert "exp" not in stub and "Softmax." in stub


def test_a_method_with_a_leaky_default_is_stubbed_at_its_own_indent():
    source = f"class Layer:\n    def forward(self, x, f=lambda x: {SECRET}):\n        return f(x)\n"
    stub = stub_source(source)
    assert "exp" not in stub and "    def forward(self, x, f=...):" in stub.splitlines()
    ast.parse(stub)


def _notebook(*cells: nbformat.NotebookNode) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Homework"), *cells]
    return nb


def test_a_solution_block_inside_a_list_item_goes():
    text = (
        "1. Compute the softmax.\n\n"
        "   ```{solution} ex-02-1\n"
        f"   Use `{SECRET}`.\n"
        "   ```\n"
        "2. Next question.\n"
    )
    student = student_version(_notebook(nbformat.v4.new_markdown_cell(text)))
    shown = "\n".join(c.source for c in student.cells)
    assert "exp" not in shown and "{solution}" not in shown and "ex-02-1" not in shown
    assert "Compute the softmax." in shown and "Next question." in shown


def test_a_markdown_cell_tagged_solution_without_a_fence_goes():
    cell = nbformat.v4.new_markdown_cell(f"The answer is `{SECRET}`.")
    cell.metadata["tags"] = ["solution"]
    student = student_version(_notebook(cell, nbformat.v4.new_markdown_cell("After.")))
    shown = "\n".join(c.source for c in student.cells)
    assert "exp" not in shown and "After." in shown


def _write(path, nb) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


def test_a_folder_named_like_a_notebook_is_refused_not_copied(tmp_path):
    _write(tmp_path / "src" / "hw.ipynb" / "inner.ipynb", _notebook())
    with pytest.raises(ValueError, match="folder named like a notebook"):
        assign(tmp_path / "src", tmp_path / "out")
    with pytest.raises(ValueError, match="folder named like a notebook"):
        assign(tmp_path / "src" / "hw.ipynb", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_an_out_named_like_a_notebook_is_refused_in_one_line(tmp_path):
    _write(tmp_path / "src" / "hw.ipynb", _notebook())
    done = subprocess.run(
        [sys.executable, "-m", "attnlab.assign", str(tmp_path / "src"), "--out",
         str(tmp_path / "hw5.ipynb")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "named like a notebook file" in done.stderr
    assert not (tmp_path / "hw5.ipynb").exists()


def test_no_chapter_solution_survives_in_its_student_version(tmp_path):
    """Every solution code line of every chapter is absent from the student version."""
    from pathlib import Path

    notebooks = sorted(Path(__file__).parents[1].joinpath("notebooks").glob("*.ipynb"))
    assert notebooks
    for path in notebooks:
        nb = nbformat.read(path, as_version=4)
        student = json.dumps([c.source for c in student_version(nb).cells])
        for cell in nb.cells:
            if cell.cell_type == "code" and "solution" in cell.metadata.get("tags", []):
                for line in cell.source.splitlines():
                    body = line.strip()
                    if body.startswith("return ") and len(body) > 12:
                        assert body not in student, f"{path.name}: {body!r} leaked"
