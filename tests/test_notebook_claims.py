"""Claims in chapters 01 to 09 are asserted, not only printed (issue 14).

Two rules of DESIGN.md §5b, checked on the code of each chapter with ``ast``:

- a comparison a cell prints (``np.allclose``, ``np.array_equal``, ``torch.allclose``, ...)
  is also asserted in that cell, so a printed ``False`` cannot pass unnoticed; in a cell that
  illustrates an erratum (the code after a ``(err-...)=`` label), printed shapes and
  ``==``/``<`` comparisons are asserted too;
- a ``try``/``except`` that demonstrates an error has an ``else: raise`` branch (or the cell
  carries the ``raises-exception`` tag with ``# NBVAL_RAISES_EXCEPTION``), so the cell fails
  when the error is no longer raised.

The other chapters belong to other maintainers; add them to ``CHAPTERS`` once they comply.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = (
    "01_local_context",
    "02_dot_product_attention",
    "03_self_attention",
    "04_scaled_attention",
    "05_multi_head_attention",
    "06_attention_heads_on_images",
    "07_luong_attention",
    "08_generalized_attention",
    "09_positions",
    "10_gam_study",
    "11_language_model",
    "12_gam_on_language",
)
COMPARISONS = {"allclose", "array_equal", "isclose", "equal", "array_equiv"}
ERRATUM_LABEL = re.compile(r"^\(err-[\w-]+\)=", re.M)


def parse(source: str) -> ast.Module:
    """The cell's code, with IPython magics (``%pip``, ``!cmd``) replaced by ``pass``."""
    lines = [
        line[: len(line) - len(line.lstrip())] + "pass"
        if line.lstrip().startswith(("%", "!"))
        else line
        for line in source.splitlines()
    ]
    return ast.parse("\n".join(lines))


def cells(stem: str) -> list[tuple[int, dict, bool]]:
    """(code cell number, cell, is it an erratum cell) for each code cell of a chapter."""
    nb = json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text(encoding="utf-8"))
    out, number, erratum = [], 0, False
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            erratum = bool(ERRATUM_LABEL.search("".join(cell["source"])))
            continue
        number += 1
        out.append((number, cell, erratum))
    return out


def is_comparison_call(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute | ast.Name)
        and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
        in COMPARISONS
    )


def claims(node: ast.AST, erratum: bool) -> list[str]:
    """The claim-like sub-expressions of a printed argument, as source text."""
    found = []
    for sub in ast.walk(node):
        if is_comparison_call(sub) or (
            erratum
            and (
                isinstance(sub, ast.Compare)
                or (isinstance(sub, ast.Attribute) and sub.attr == "shape")
            )
        ):
            found.append(ast.unparse(sub))
    return found


def unasserted_prints(source: str, erratum: bool) -> list[str]:
    tree = parse(source)
    asserted = " ".join(ast.unparse(n.test) for n in ast.walk(tree) if isinstance(n, ast.Assert))
    missing = []
    for node in ast.walk(tree):
        is_call = isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        if is_call and node.func.id == "print":
            for arg in node.args:
                missing += [c for c in claims(arg, erratum) if c not in asserted]
    return missing


def silent_error_demos(source: str) -> list[int]:
    """Line numbers of ``try`` blocks that catch an error but pass if none is raised."""
    bad = []
    for node in ast.walk(parse(source)):
        if not isinstance(node, ast.Try):
            continue
        caught = " ".join(ast.unparse(h.type) for h in node.handlers if h.type is not None)
        if caught in ("ImportError", "ModuleNotFoundError"):  # the Colab install cell
            continue
        if not any(isinstance(n, ast.Raise) for stmt in node.orelse for n in ast.walk(stmt)):
            bad.append(node.lineno)
    return bad


@pytest.mark.parametrize("stem", CHAPTERS)
def test_printed_comparisons_are_asserted(stem):
    problems = []
    for number, cell, erratum in cells(stem):
        missing = unasserted_prints("".join(cell["source"]), erratum)
        if missing:
            problems.append(f"code cell {number}: printed but not asserted: {missing}")
    assert not problems, f"{stem}:\n" + "\n".join(problems)


@pytest.mark.parametrize("stem", CHAPTERS)
def test_error_demonstrations_fail_when_no_error(stem):
    problems = []
    for number, cell, _ in cells(stem):
        source = "".join(cell["source"])
        tags = cell.get("metadata", {}).get("tags", [])
        if "raises-exception" in tags:
            if "# NBVAL_RAISES_EXCEPTION" not in source:
                problems.append(f"code cell {number}: raises-exception without the nbval marker")
            continue
        for line in silent_error_demos(source):
            problems.append(f"code cell {number}, line {line}: try/except without else: raise")
    assert not problems, f"{stem}:\n" + "\n".join(problems)


def test_the_checks_can_fail():
    """The two detectors flag the patterns issue 14 found (ch02 W_V, ch09 ValueErrors)."""
    printed_only = "M = 1\nprint('same?', np.allclose(x @ M, M @ x))\n"
    assert unasserted_prints(printed_only, erratum=False) == ["np.allclose(x @ M, M @ x)"]
    asserted = printed_only + "assert np.allclose(x @ M, M @ x)\n"
    assert unasserted_prints(asserted, erratum=False) == []
    shape_only = "print('a matrix:', (q.T @ k).shape)\n"
    assert unasserted_prints(shape_only, erratum=True) == ["(q.T @ k).shape"]
    assert unasserted_prints(shape_only, erratum=False) == []
    silent = "try:\n    f()\nexcept ValueError as err:\n    print(err)\n"
    assert silent_error_demos(silent) == [1]
    loud = silent + "else:\n    raise AssertionError('no error')\n"
    assert silent_error_demos(loud) == []
    colab = "try:\n    import attnlab\nexcept ImportError:\n    %pip install attnlab\n"
    assert silent_error_demos(colab) == []


#: Library internals a chapter may use only after saying, in its own prose, what they are.
EXPLAIN_BEFORE_USE = (
    "in_proj_weight",
    "in_proj_bias",
    "out_proj",
    # attnlab's own parameter names that a cell reaches into (chapters 08 and 09)
    "mix_logits",
    "rel_k",
    "rel_v",
)


def used_before_explained(stem: str) -> list[str]:
    """Names of ``EXPLAIN_BEFORE_USE`` that a code cell uses before any markdown cell names them."""
    nb = json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text(encoding="utf-8"))
    explained: set[str] = set()
    problems = []
    for cell in nb["cells"]:
        text = "".join(cell["source"])
        found = {name for name in EXPLAIN_BEFORE_USE if re.search(rf"\b{name}\b", text)}
        if cell["cell_type"] == "markdown":
            explained |= found
        else:
            problems += sorted(found - explained)
    return problems


@pytest.mark.parametrize("stem", CHAPTERS)
def test_packed_library_internals_are_explained_before_use(stem):
    """Issue 14: chapter 03 used ``in_proj_weight`` two chapters before chapter 05 explained it."""
    assert not used_before_explained(stem), f"{stem}: explain {used_before_explained(stem)} first"


#: A sentence about what PyTorch returns for a query whose keys are all masked.
FULLY_MASKED = re.compile(r"fully[- ]masked|all masked|attend to nothing", re.I)


def unversioned_safe_softmax_claims(stem: str) -> list[int]:
    """Markdown cells that say PyTorch returns zeros for a fully masked query without naming 2.5.

    ``F.scaled_dot_product_attention`` returns zeros there only since PyTorch 2.5 (pull requests
    131060 and 133882); before, it returned NaN. Issue 26 found the claim attributed to the pinned
    version (2.13) as if earlier versions had differed only recently, and stated with no version.
    """
    nb = json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text(encoding="utf-8"))
    bad = []
    for index, cell in enumerate(nb["cells"]):
        text = "".join(cell["source"])
        if cell["cell_type"] != "markdown" or "PyTorch" not in text:
            continue
        if FULLY_MASKED.search(text) and re.search(r"\bzeros?\b", text) and "2.5" not in text:
            bad.append(index)
    return bad


@pytest.mark.parametrize("stem", CHAPTERS)
def test_safe_softmax_claims_name_the_version(stem):
    bad = unversioned_safe_softmax_claims(stem)
    assert not bad, f"{stem}: cells {bad} give PyTorch's zeros for masked rows without 'since 2.5'"


#: Boxes that correct a source the reader cannot consult (the lecture notes 000, the article 002).
UNARCHIVED_ERRATUM = re.compile(r"^\((err-00[02]-[\w-]+)\)=", re.M)
QUOTATION = re.compile(r'"[^"\n]*(?:\n[^"\n]*)?\b\w+\b[^"]*"')


def unquoted_corrections(stem: str) -> list[str]:
    """Labels of erratum boxes about an unarchived source that correct it without quoting it.

    Issue 26: "Where the source is loose" boxes argued with lecture notes the reader cannot see.
    A box that calls the source loose must quote (in double quotes) what it corrects.
    """
    nb = json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text(encoding="utf-8"))
    bad = []
    for cell in nb["cells"]:
        text = "".join(cell["source"])
        label = UNARCHIVED_ERRATUM.search(text)
        if cell["cell_type"] != "markdown" or not label:
            continue
        after = text[label.end() :]  # the box, not the prose before its label
        if "loose" in after and not QUOTATION.search(after):
            bad.append(label.group(1))
    return bad


@pytest.mark.parametrize("stem", CHAPTERS)
def test_corrections_of_unarchived_sources_quote_them(stem):
    bad = unquoted_corrections(stem)
    assert not bad, f"{stem}: quote what {bad} corrects"


def test_the_bibliography_does_not_lean_on_file_numbers():
    """The bibliography used to describe two sources only as "source document 000 of this book"."""
    bib = (ROOT / "book" / "references.bib").read_text(encoding="utf-8")
    assert "source document" not in bib


def first_cell(cells: list[dict], kind: str, pattern: str) -> int:
    """Index of the first cell of ``kind`` whose source matches ``pattern`` (len(cells) if none)."""
    for index, cell in enumerate(cells):
        if cell["cell_type"] == kind and re.search(pattern, "".join(cell["source"])):
            return index
    return len(cells)


def test_chapter_01_defines_attention_before_using_it():
    """Issue 26: chapter 01 called ``softmax`` and showed the attention cost table before either
    was introduced; both now come after the prose that defines them."""
    nb = json.loads((ROOT / "notebooks" / "01_local_context.ipynb").read_text(encoding="utf-8"))
    cells = nb["cells"]
    defined = first_cell(cells, "markdown", r"\*\*softmax\*\*")
    assert first_cell(cells, "code", r"(?<![.\w])softmax\(") > defined
    learned = first_cell(cells, "markdown", r"\(sec-01-learned\)=")
    table = first_cell(cells, "markdown", r"\|\s*self-attention \(restricted\)")
    assert learned < table < len(cells)


def test_chapter_06_states_the_task_generators_own_settings():
    # §6.3 gives the colours, the pixel noise and the Dirichlet concentration in prose (a fresh
    # reader could not regenerate the task without them): they must be the generator's.
    import inspect

    from attnlab.data.images import TASK_COLOURS, colour_texture_task

    nb = json.loads((ROOT / "notebooks" / "06_attention_heads_on_images.ipynb").read_text("utf-8"))
    text = next(
        "".join(c["source"]) for c in nb["cells"]
        if c["cell_type"] == "markdown" and "(sec-06-task)=" in "".join(c["source"])
    )  # fmt: skip
    defaults = inspect.signature(colour_texture_task).parameters
    for rgb in TASK_COLOURS:
        assert "$(" + ", ".join(f"{v:g}" for v in rgb) + ")$" in text
    assert f"standard deviation ${defaults['noise'].default:g}$" in text
    assert f"concentration ${defaults['concentration'].default:g}$" in text
    assert f"$\\pm {defaults['amplitude'].default:g}$" in text
