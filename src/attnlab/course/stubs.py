"""The stub of one solution code cell: what a student sees in place of the answer.

:func:`stub_source` keeps a cell's imports and, for each function or class it defines, the
header and docstring, and replaces every body with ``# YOUR CODE HERE`` and
``raise NotImplementedError``. Nothing of the answer may survive, so the header and the
docstring are cleaned first: a default value that computes something (a lambda, a call) becomes
``...``, a decorator that is more than a plain name (or a call of one with constant arguments)
is dropped, and a docstring loses its doctest examples and any ``Solution``/``Answer`` section.
:mod:`attnlab.course.student` applies it to every solution cell of a notebook.
"""

from __future__ import annotations

import ast
import copy
import io
import re
import tokenize

__all__ = ["STUB_COMMENT", "STUB_RAISE", "stub_source"]

STUB_COMMENT = "# YOUR CODE HERE"
STUB_RAISE = "raise NotImplementedError"


# ---- code cells -----------------------------------------------------------------------------
def _python_view(source: str) -> str:
    """``source`` with IPython magics turned into Python (same lines where possible)."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:  # pragma: no cover - IPython comes with every Jupyter install
        return source
    return TransformerManager().transform_cell(source)


def _header_end(lines: list[str], def_line: int) -> tuple[int, int]:
    """(line, column), 1-based line, of the ``:`` that ends the ``def``/``class`` header."""
    text = "\n".join(lines[def_line - 1 :]) + "\n"
    depth = 0
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type != tokenize.OP:
            continue
        if tok.string in "([{":
            depth += 1
        elif tok.string in ")]}":
            depth -= 1
        elif tok.string == ":" and depth == 0:
            return def_line + tok.start[0] - 1, tok.start[1]
    raise ValueError(f"no ':' ends the header on line {def_line}")  # pragma: no cover


def _docstring_node(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> ast.Expr | None:
    first = node.body[0]
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        return first
    return None


def _is_dotted(node: ast.expr) -> bool:
    """``name`` or ``name.attr.attr``: it names something, it computes nothing."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def _is_literal(node: ast.expr) -> bool:
    """A constant (``None``, ``2``, ``-1.5``, ``"mean"``) or a tuple/list of constants."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        node = node.operand
    if isinstance(node, ast.Tuple | ast.List):
        return all(_is_literal(e) for e in node.elts)
    return isinstance(node, ast.Constant)


def _plain_default(node: ast.expr | None) -> bool:
    return node is None or _is_literal(node) or _is_dotted(node)


def _plain_decorator(node: ast.expr) -> bool:
    """``@name``, ``@mod.name`` or such a call with constant arguments (``@lru_cache(8)``)."""
    if isinstance(node, ast.Call):
        arguments = list(node.args) + [k.value for k in node.keywords]
        return _is_dotted(node.func) and all(_is_literal(a) for a in arguments)
    return _is_dotted(node)


def _safe_header(
    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, lines: list[str]
) -> list[str]:
    """Decorators and header of ``node`` without anything that could carry a solution.

    A default value that computes something (a lambda, a call, an expression) becomes
    ``...`` and a decorator that is not a plain name, or a call of one with constant
    arguments, is dropped; a header with neither keeps its own lines and layout.
    """
    defaults: list[ast.expr | None] = []
    if not isinstance(node, ast.ClassDef):
        defaults = [*node.args.defaults, *node.args.kw_defaults]
    plain = all(map(_plain_default, defaults)) and all(map(_plain_decorator, node.decorator_list))
    if plain:
        start = min([node.lineno] + [d.lineno for d in node.decorator_list])
        colon_line, colon_col = _header_end(lines, node.lineno)
        return lines[start - 1 : colon_line - 1] + [lines[colon_line - 1][: colon_col + 1]]
    header = copy.deepcopy(node)
    header.decorator_list = [d for d in node.decorator_list if _plain_decorator(d)]
    header.body = [ast.Pass()]
    if not isinstance(header, ast.ClassDef):
        blank = ast.Constant(value=...)
        args = header.args
        args.defaults = [d if _plain_default(d) else blank for d in args.defaults]
        args.kw_defaults = [d if _plain_default(d) else blank for d in args.kw_defaults]
    text = ast.unparse(ast.fix_missing_locations(header)).splitlines()[:-1]  # drop the pass
    return [" " * node.col_offset + line for line in text]


#: A docstring section that gives an answer away: ``Solution``, ``Answer`` or
#: ``Implementation`` as a numpydoc heading (underlined) or a line of its own ending in ``:``.
_ANSWER_SECTION = re.compile(r"^\s*(solution|answer|implementation)\s*:?\s*$", re.IGNORECASE)
_SECTION_RULE = re.compile(r"^\s*-{3,}\s*$")


def _student_docstring(text: str) -> str:
    """``text`` without doctest examples (code) and without a Solution/Answer section."""
    lines = text.splitlines()
    kept: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if _ANSWER_SECTION.match(line):  # skip to the next numpydoc heading, or the end
            i += 1
            while i < len(lines) and not (
                i + 1 < len(lines) and _SECTION_RULE.match(lines[i + 1]) and lines[i].strip()
            ):
                i += 1
            continue
        if line.lstrip().startswith(">>>"):  # a doctest: its lines and its output
            while i < len(lines) and lines[i].strip():
                i += 1
            continue
        kept.append(line)
        i += 1
    while kept and not kept[-1].strip():
        kept.pop()
    return "\n".join(kept)


def _docstring_lines(doc: ast.Expr, lines: list[str]) -> list[str]:
    """The docstring's own lines, or a rewritten docstring if it held part of an answer."""
    text = doc.value.value
    cleaned = _student_docstring(text)
    if cleaned == text.rstrip() or cleaned == text:
        return lines[doc.lineno - 1 : doc.end_lineno]
    indent = " " * doc.col_offset
    body = cleaned.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    return (indent + '"""' + body + "\n" + indent + '"""').splitlines()


def _header_and_docstring(
    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, lines: list[str]
) -> tuple[list[str], str]:
    """The source lines of decorators, header and docstring of ``node``, and the body indent."""
    colon_line, _ = _header_end(lines, node.lineno)
    kept = _safe_header(node, lines)
    body_indent = " " * (node.col_offset + 4)
    doc = _docstring_node(node)
    if doc is not None and doc.lineno > colon_line:
        kept += _docstring_lines(doc, lines)
        body_indent = " " * doc.col_offset
    elif node.body[0].lineno > colon_line:
        body_indent = " " * node.body[0].col_offset
    return kept, body_indent


def _stub_function(node: ast.FunctionDef | ast.AsyncFunctionDef, lines: list[str]) -> list[str]:
    kept, indent = _header_and_docstring(node, lines)
    return kept + [indent + STUB_COMMENT, indent + STUB_RAISE]


def _stub_class(node: ast.ClassDef, lines: list[str]) -> list[str]:
    kept, indent = _header_and_docstring(node, lines)
    members: list[list[str]] = []
    for child in node.body:
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            members.append(_stub_function(child, lines))
        elif isinstance(child, ast.ClassDef):
            members.append(_stub_class(child, lines))
    if not members:
        return kept + [indent + STUB_COMMENT, indent + "pass"]
    for member in members:
        kept += [""] + member if kept[-1].strip() else member
    return kept


def _assigned_names(node: ast.stmt) -> list[str]:
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, ast.AnnAssign | ast.AugAssign):
        targets = [node.target]
    names: list[str] = []
    for target in targets:
        names += [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]
    return names


def stub_source(source: str) -> str:
    """The student's stub for the source of one solution cell.

    Imports stay; each top-level function keeps its decorators, signature and docstring and
    gets the body ``# YOUR CODE HERE`` / ``raise NotImplementedError``; each class keeps its
    header and docstring and gets stubs of its methods. Everything else goes. A cell that
    defines no function or class becomes the stub alone, naming the variables the solution
    assigned, so the student knows what to define.

    Examples
    --------
    >>> print(stub_source('def double(x: float) -> float:\\n    \"\"\"Twice x.\"\"\"\\n'
    ...                   '    return 2 * x\\n\\nprint(double(3))'))
    def double(x: float) -> float:
        \"\"\"Twice x.\"\"\"
        # YOUR CODE HERE
        raise NotImplementedError
    >>> print(stub_source("import numpy as np\\nanswer = np.sqrt(2)"))
    import numpy as np
    <BLANKLINE>
    # YOUR CODE HERE (define: answer)
    raise NotImplementedError
    """
    try:
        tree = ast.parse(_python_view(source))
    except SyntaxError:
        tree = ast.Module(body=[], type_ignores=[])
    lines = source.splitlines()
    imports: list[str] = []
    definitions: list[list[str]] = []
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            imports += lines[node.lineno - 1 : node.end_lineno]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            definitions.append(_stub_function(node, lines))
        elif isinstance(node, ast.ClassDef):
            definitions.append(_stub_class(node, lines))
        else:
            names += [n for n in _assigned_names(node) if n not in names]
    if not definitions:
        comment = STUB_COMMENT + (f" (define: {', '.join(names)})" if names else "")
        definitions.append([comment, STUB_RAISE])
    blocks = ["\n".join(imports)] if imports else []
    blocks += ["\n".join(d) for d in definitions]
    separator = "\n\n\n" if len(definitions) > 1 else "\n\n"
    return separator.join(blocks)
