"""Chapter 09's parameter tables name every parameter of the torch modules, with its shape.

Issue 26: the chapter gives, for each position module it uses, a table of parameter name,
shape, meaning and initialisation. The notebook checks its own copy of each table in a cell;
this test reads the markdown tables themselves and compares them with ``named_parameters()``
of the modules at two sizes, so that a parameter added, renamed or reshaped in the code, or a
table edited by hand, fails here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from attnlab.nn import GAMRelativeAttention, RotaryEmbedding, ShawRelativeAttention  # noqa: E402

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "09_positions.ipynb"
MODULES = ("ShawRelativeAttention", "RotaryEmbedding", "GAMRelativeAttention")


def parse_table(markdown: str) -> dict[str, tuple[int, ...] | str]:
    """``{parameter name: shape expression}`` of the table whose header is ``| parameter | shape``.

    A name written ``.bias`` after ``content.value.weight`` is ``content.value.bias``; one shape
    for several names is each name's shape; ``as `x`, `y``` takes the shapes of ``x`` and ``y``.
    The shapes stay LaTeX strings here (:func:`evaluate` turns them into tuples).
    """
    lines = markdown.splitlines()
    start = next(k for k, line in enumerate(lines) if line.startswith("| parameter | shape"))
    rows: dict[str, str] = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        name_cell, shape_cell = (cell.strip() for cell in line.strip("|").split("|")[:2])
        names, previous = [], None
        for token in re.findall(r"`([^`]+)`", name_cell):
            if token.startswith(".") and previous:
                token = previous.rsplit(".", 1)[0] + token
            names.append(token)
            previous = token
        if not names:
            assert name_cell == "none", f"a row without a parameter name: {line!r}"
            continue
        if shape_cell.startswith("as "):
            shapes = [rows[ref] for ref in re.findall(r"`([^`]+)`", shape_cell)]
        else:
            shapes = re.findall(r"\$([^$]+)\$", shape_cell)
        if len(shapes) == 1:
            shapes *= len(names)
        assert len(shapes) == len(names), f"{len(names)} names, {len(shapes)} shapes: {line!r}"
        rows.update(zip(names, shapes, strict=True))
    return rows


def evaluate(shape: str, sizes: dict[str, int]) -> tuple[int, ...]:
    """The tuple of a LaTeX shape such as ``(2k_{\\max}+1, d_k)`` at the given sizes."""
    text = shape.replace(r"k_{\max}", "k_max").replace("N_B", "n_b").replace(" ", "")
    text = re.sub(r"(\d)([a-z])", r"\1*\2", text)  # 2k_max -> 2*k_max
    value = eval(text, {"__builtins__": {}}, dict(sizes))  # noqa: S307 (names and integers only)
    return tuple(value)


def tables() -> dict[str, dict[str, str]]:
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    found = {}
    for cell in cells:
        text = "".join(cell["source"])
        if cell["cell_type"] != "markdown" or "| parameter | shape" not in text:
            continue
        named = [m for m in MODULES if m in text]
        assert len(named) == 1, f"a parameter table must name one module, this names {named}"
        found[named[0]] = parse_table(text)
    return found


def built(name: str, sizes: dict[str, int]) -> torch.nn.Module:
    if name == "ShawRelativeAttention":
        return ShawRelativeAttention(d=sizes["d"], h=sizes["h"], k_max=sizes["k_max"])
    if name == "RotaryEmbedding":
        return RotaryEmbedding(sizes["d_k"])
    return GAMRelativeAttention(d=sizes["d"], n=sizes["n"], h=sizes["h"], n_brains=sizes["n_b"])


SIZES = [
    {"d": 8, "h": 2, "d_k": 4, "k_max": 3, "n": 6, "n_b": 2},
    {"d": 12, "h": 3, "d_k": 4, "k_max": 1, "n": 5, "n_b": 4},
]


def test_every_module_has_its_table():
    assert sorted(tables()) == sorted(MODULES)


@pytest.mark.parametrize("sizes", SIZES, ids=["small", "other"])
@pytest.mark.parametrize("name", MODULES)
def test_table_matches_named_parameters(name, sizes):
    table = {key: evaluate(shape, sizes) for key, shape in tables()[name].items()}
    code = {key: tuple(t.shape) for key, t in built(name, sizes).named_parameters()}
    assert table == code


def test_the_comparison_can_fail():
    """A table with a wrong shape, or one that misses a parameter, differs from the code."""
    text = (
        "| parameter | shape | in the equations | initialised |\n|---|---|---|---|\n"
        "| `w_q.weight`, `w_k.weight`, `w_v.weight` | $(d, d)$ | | |\n"
        "| `w_o.weight` | $(d, d)$ | | |\n"
        "| `rel_k.weight`, `rel_v.weight` | $(2k_{\\max}, d_k)$ | | |\n"
    )
    sizes = SIZES[0]
    code = {k: tuple(t.shape) for k, t in built("ShawRelativeAttention", sizes).named_parameters()}
    wrong = {key: evaluate(shape, sizes) for key, shape in parse_table(text).items()}
    assert wrong["rel_k.weight"] == (6, 4) and wrong != code
    missing = parse_table(text.replace("`w_o.weight`", "none"))
    assert "w_o.weight" not in missing
    suffix = parse_table(
        "| parameter | shape |\n|---|---|\n| `content.value.weight`, `.bias` | $(d, d)$, $(d,)$ |\n"
    )
    assert {k: evaluate(v, sizes) for k, v in suffix.items()} == {
        "content.value.weight": (8, 8),
        "content.value.bias": (8,),
    }
