"""Tests of attnlab.assign: student versions lose their solutions and keep their self-checks.

Two kinds: the small fixture assignment in ``tests/fixtures/coursework`` (every rule, with
expected text written out by hand), and every real chapter in ``notebooks/`` (no solution
code or prose survives, every stub fails its check, every reference solution passed its
check when the chapter was executed; strict nbval re-runs those cells in ``make test``).
"""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import nbformat
import pytest

from attnlab.assign import (
    ANSWER_TAG,
    SOLUTION_TAG,
    assign,
    check_ids_in,
    exercises_in,
    main,
    stub_source,
    student_version,
)
from attnlab.course.markup import exercise_head
from attnlab.exercises import check

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures" / "coursework"
REFERENCE = FIXTURES / "softmax_hw.ipynb"
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


# ---- stubs of single cells ------------------------------------------------------------------
def test_stub_keeps_signature_and_docstring_and_drops_the_body():
    source = (
        "import numpy as np\n"
        "\n"
        "\n"
        "@staticmethod\n"
        "def heads(x: np.ndarray,\n"
        "          h: int = 2) -> np.ndarray:\n"
        '    """Split x into h heads."""\n'
        "    s, d = x.shape  # SOLUTION LINE\n"
        "    return x.reshape(s, h, d // h)\n"
        "\n"
        "\n"
        "print(heads(np.ones((2, 4))).shape)\n"
    )
    expected = (
        "import numpy as np\n"
        "\n"
        "@staticmethod\n"
        "def heads(x: np.ndarray,\n"
        "          h: int = 2) -> np.ndarray:\n"
        '    """Split x into h heads."""\n'
        "    # YOUR CODE HERE\n"
        "    raise NotImplementedError"
    )
    assert stub_source(source) == expected


def test_stub_of_one_line_function_and_of_class_methods():
    assert stub_source("def f(x): return x + 1") == (
        "def f(x):\n    # YOUR CODE HERE\n    raise NotImplementedError"
    )
    source = (
        "class Head(Base):\n"
        '    """One head."""\n'
        "    size = 3\n"
        "    def __init__(self, d):\n"
        "        self.d = d\n"
        "\n"
        "    def forward(self, x):\n"
        "        return x * self.d\n"
    )
    expected = (
        "class Head(Base):\n"
        '    """One head."""\n'
        "\n"
        "    def __init__(self, d):\n"
        "        # YOUR CODE HERE\n"
        "        raise NotImplementedError\n"
        "\n"
        "    def forward(self, x):\n"
        "        # YOUR CODE HERE\n"
        "        raise NotImplementedError"
    )
    assert stub_source(source) == expected


def test_stub_of_a_value_answer_names_what_to_define():
    assert stub_source("w_o = 2 * rng.normal(size=(4, 4))\nprint(w_o)") == (
        "# YOUR CODE HERE (define: w_o)\nraise NotImplementedError"
    )


def test_stub_of_magics_and_of_broken_code_is_the_bare_stub():
    bare = "# YOUR CODE HERE\nraise NotImplementedError"
    assert stub_source("%%time\nsecret = 42") == bare
    assert stub_source("x = (1, 2") == bare
    assert "SECRET" not in stub_source("%timeit f(1)\ndef g(y):\n    return 'SECRET'")


def test_a_stubbed_function_raises_not_implemented():
    namespace: dict = {}
    exec(stub_source("def f(x):\n    '''doc'''\n    return x"), namespace)
    assert namespace["f"].__doc__ == "doc"
    with pytest.raises(NotImplementedError):
        namespace["f"](1)


# ---- the fixture assignment -----------------------------------------------------------------
def test_fixture_student_version_has_no_solution_and_keeps_the_rest():
    reference = _read(REFERENCE)
    student = student_version(reference)
    text = nbformat.writes(student)
    assert "SECRET-PROSE" not in text  # the prose of all three solutions is gone
    assert "{solution" not in text
    assert "stable_softmax(np.array([1000.0, 1000.0]))" not in text
    assert "np.log(4))" not in text
    answers = [c for c in student.cells if ANSWER_TAG in c.metadata.get("tags", [])]
    assert [c.source for c in answers] == [
        "def stable_softmax(x: np.ndarray) -> np.ndarray:\n"
        '    """Softmax over the last axis of ``x``; shape unchanged."""\n'
        "    # YOUR CODE HERE\n"
        "    raise NotImplementedError",
        "# YOUR CODE HERE (define: uniform_entropy)\nraise NotImplementedError",
    ]
    assert not any(SOLUTION_TAG in c.metadata.get("tags", []) for c in student.cells)
    # The exercises, the text after solution-end and the self-checks are all still there.
    for label in ("ex-99-1", "ex-99-2", "ex-99-3"):
        assert f":label: {label}" in text
    assert "That was the last code exercise." in text
    checks = [c.source for c in student.cells if c.cell_type == "code" and "check(" in c.source]
    assert checks == [
        'assert check("99.1", stable_softmax)',
        'assert check("99.2", uniform_entropy)',
    ]
    assert student.cells[0].source == reference.cells[0].source  # the title stays first
    assert "Student version" in student.cells[1].source
    for cell in student.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None
    nbformat.validate(student)
    assert reference.cells[3].metadata["tags"] == ["solution"]  # the input is not modified


def test_colon_fences_and_prose_in_the_start_cell_are_removed():
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell(
                "Intro.\n\n:::{solution-start} ex-02-1\n:class: dropdown\n:::\nHIDDEN A"
            ),
            nbformat.v4.new_markdown_cell("HIDDEN B"),
            nbformat.v4.new_code_cell("x = 1  # untagged, but inside the solution"),
            nbformat.v4.new_markdown_cell(":::{solution-end}\n:::\nAfter."),
            nbformat.v4.new_markdown_cell(
                "Before.\n````{solution} ex-02-2\n```{math}\nHIDDEN C\n```\n````\nAfter 2."
            ),
        ]
    )
    student = student_version(nb)
    text = nbformat.writes(student)
    assert "HIDDEN" not in text and "x = 1" not in text
    sources = [c.source for c in student.cells]
    assert "Intro." in sources and "After." in sources and "Before.\nAfter 2." in sources


def test_student_version_of_an_old_notebook_stays_valid():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Title")])
    nb.nbformat_minor = 4  # before cell ids existed
    del nb.cells[0]["id"]
    student = student_version(nb)
    nbformat.validate(student)
    assert [c.source.split(".")[0] for c in student.cells] == ["# Title", "**Student version"]


def test_an_unclosed_solution_block_is_an_error():
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("```{solution-start} ex-01-1\n```"),
            nbformat.v4.new_code_cell('assert check("01.1", f)'),
        ]
    )
    with pytest.raises(ValueError, match="no solution-end closes"):
        student_version(nb)


def test_exercise_inventory_of_the_fixture():
    found = exercises_in(_read(REFERENCE))
    assert [(e.label, e.kind, e.check_ids) for e in found] == [
        ("ex-99-1", "code", ["99.1"]),
        ("ex-99-2", "code", ["99.2"]),
        ("ex-99-3", "written", []),
    ]
    assert found[0].title == "Stable softmax"
    assert check_ids_in("check( '01.10', f)  # and check(\"02.3\", g)") == ["01.10", "02.3"]


# ---- the command ----------------------------------------------------------------------------
def test_command_writes_students_versions_and_copies_other_files(tmp_path, capsys):
    out = tmp_path / "hw"
    assert main([str(FIXTURES), "--out", str(out)]) == 0
    assert (out / "hw_checks.py").read_text() == (FIXTURES / "hw_checks.py").read_text()
    written = _read(out / "softmax_hw.ipynb")
    assert written.cells == student_version(_read(REFERENCE), filename=REFERENCE.name).cells
    assert "wrote 1 student notebook(s)" in capsys.readouterr().out


def test_command_refuses_a_non_empty_folder_without_force(tmp_path, capsys):
    out = tmp_path / "hw"
    out.mkdir()
    work = out / "softmax_hw.ipynb"
    work.write_text("a student's answers")
    assert main([str(REFERENCE), "--out", str(out)]) == 2
    assert "not empty" in capsys.readouterr().err
    assert work.read_text() == "a student's answers"
    assert main([str(REFERENCE), "--out", str(out), "--force"]) == 0
    assert _read(work).cells == student_version(_read(REFERENCE), filename=REFERENCE.name).cells


def test_command_refuses_to_write_into_the_source_folder(tmp_path):
    source = tmp_path / "nbs"
    shutil.copytree(FIXTURES, source)
    before = (source / "softmax_hw.ipynb").read_text()
    with pytest.raises(ValueError, match="inside the source folder"):
        assign(source, source, force=True)
    with pytest.raises(ValueError, match="inside the source folder"):
        assign(source, source / "student", force=True)
    assert (source / "softmax_hw.ipynb").read_text() == before
    with pytest.raises(FileNotFoundError):
        assign(tmp_path / "missing", tmp_path / "out")


# ---- the real chapters ----------------------------------------------------------------------
def _solution_cells(nb: nbformat.NotebookNode) -> list[int]:
    """Indices of code cells that are solutions: tagged, or between the gated fences."""
    indices, inside = [], False
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if "{solution-start}" in line:
                    inside = True
                elif "{solution-end}" in line:
                    inside = False
        elif SOLUTION_TAG in cell.metadata.get("tags", []) or inside:
            indices.append(index)
    return indices


def _is_stub(source: str) -> bool:
    """Only imports, and functions/classes whose bodies are a docstring and the stub."""

    def stub_body(body: list[ast.stmt]) -> bool:
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]
        return len(body) == 1 and isinstance(body[0], ast.Raise | ast.Pass)

    def ok(node: ast.stmt) -> bool:
        if isinstance(node, ast.Import | ast.ImportFrom | ast.Raise):
            return True
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            return stub_body(node.body)
        if isinstance(node, ast.ClassDef):
            members = [n for n in node.body if not isinstance(n, ast.Expr)]
            return all(ok(n) for n in members) and (bool(members) or stub_body(node.body))
        return False

    return all(ok(node) for node in ast.parse(source).body)


@pytest.mark.skipif(not CHAPTERS, reason="no chapter notebooks yet")
@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_chapter_student_version_contains_no_solution(path):
    reference = _read(path)
    student = student_version(reference)
    solutions = _solution_cells(reference)
    answers = [c for c in student.cells if ANSWER_TAG in c.metadata.get("tags", [])]
    assert len(answers) == len(solutions)
    for cell in answers:
        assert "# YOUR CODE HERE" in cell.source and _is_stub(cell.source), cell.source
    # Every other code cell is unchanged, in the same order.
    others = [
        c.source
        for i, c in enumerate(reference.cells)
        if c.cell_type == "code" and i not in solutions
    ]
    kept = [
        c.source
        for c in student.cells
        if c.cell_type == "code" and ANSWER_TAG not in c.metadata.get("tags", [])
    ]
    assert kept == others
    text = "\n".join(c.source for c in student.cells)
    assert "{solution" not in text
    assert all(c.get("outputs", []) == [] for c in student.cells)
    # The plain markup (attnlab.course.markup): no solution heading, no solution prose cell.
    assert "**Solution" not in text
    assert not [c for c in student.cells if SOLUTION_TAG in c.metadata.get("tags", [])]
    prose = [
        c.source
        for c in reference.cells
        if c.cell_type == "markdown" and SOLUTION_TAG in c.metadata.get("tags", [])
    ]
    assert prose and not [p for p in prose if p in text]
    assert [e.title for e in exercises_in(reference) if e.title] == [
        " · ".join(b) for b in (exercise_head(c.source) for c in reference.cells) if b
    ]


def _imports_before(nb: nbformat.NotebookNode, stop: int) -> str:
    """The top-level import statements of the code cells before ``stop`` (magics skipped)."""
    lines = []
    for cell in nb.cells[:stop]:
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        lines += [ast.unparse(n) for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    return "\n".join(lines)


@pytest.mark.skipif(not CHAPTERS, reason="no chapter notebooks yet")
@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_chapter_stubs_fail_their_checks(path):
    student = student_version(_read(path))
    calls = 0
    for index, cell in enumerate(student.cells):
        if cell.cell_type != "code" or ANSWER_TAG in cell.metadata.get("tags", []):
            continue
        for call in ast.walk(ast.parse(cell.source) if "check(" in cell.source else ast.Module()):
            if not (isinstance(call, ast.Call) and getattr(call.func, "id", "") == "check"):
                continue
            exercise_id = call.args[0].value
            answer_name = call.args[1].id
            namespace: dict = {}
            exec(_imports_before(student, index), namespace)
            for stub in student.cells[:index]:
                if ANSWER_TAG in stub.metadata.get("tags", []):
                    try:  # a bare stub raises, as the student's cell will until answered
                        exec("from __future__ import annotations\n" + stub.source, namespace)
                    except NotImplementedError:
                        pass
            if answer_name in namespace:  # a stubbed function or class: its check must fail
                assert check(exercise_id, namespace[answer_name], verbose=False) is False
            else:  # a value answer: the stub defines nothing, so the check cell cannot pass
                assert re.search(rf"define: .*\b{answer_name}\b", text_of_answers(student))
            calls += 1
    code = "\n".join(c.source for c in student.cells if c.cell_type == "code")
    assert calls == len(check_ids_in(code))


def text_of_answers(nb: nbformat.NotebookNode) -> str:
    return "\n".join(c.source for c in nb.cells if ANSWER_TAG in c.metadata.get("tags", []))


@pytest.mark.skipif(not CHAPTERS, reason="no chapter notebooks yet")
@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_chapter_reference_solutions_passed_their_checks(path):
    """Every check cell ran without error and passed (strict nbval re-runs these cells).

    A check cell passes if it printed the verdict "passed", or if it asserts the check
    (``assert check(...)``) and ran without an error.
    """
    reference = _read(path)
    for cell in reference.cells:
        if cell.cell_type != "code" or not check_ids_in(cell.source):
            continue
        where = f"{path.name}: cell {cell.source!r}"
        assert cell.execution_count is not None, f"{where} was never run (make execute NB=...)"
        assert not [o for o in cell.outputs if o.output_type == "error"], where
        printed = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
        asserted = {
            n.test.args[0].value
            for n in ast.walk(ast.parse(cell.source))
            if isinstance(n, ast.Assert)
            and isinstance(n.test, ast.Call)
            and n.test.args
            and isinstance(n.test.args[0], ast.Constant)
        }
        for exercise_id in check_ids_in(cell.source):
            verdict = f"Exercise {exercise_id}: passed."
            assert verdict in printed or exercise_id in asserted, (where, exercise_id)
            assert f"Exercise {exercise_id}: not yet." not in printed, (where, exercise_id)


def test_assign_re_exports_every_name_of_student_and_nothing_is_listed_twice():
    import attnlab.course.assign as assign_module
    import attnlab.course.student as student_module

    assert assign_module.__all__ == [*student_module.__all__, "read_notebook", "assign", "main"]
    assert len(set(assign_module.__all__)) == len(assign_module.__all__)
    for name in student_module.__all__:
        assert getattr(assign_module, name) is getattr(student_module, name), name
