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
