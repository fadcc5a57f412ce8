"""What was assigned: the exercises, answer names and check modules of ``--source``.

The grader reads the instructor's notebooks (the chapters or their student versions) and
check modules, never a student's copy: the check cells say which exercises a notebook must
answer and under which name (``check("05.1", concat_heads)``).
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterable
from pathlib import Path

from attnlab.course.assign import read_notebook
from attnlab.course.student import check_ids_in


def load_checks(paths: Iterable[Path]) -> list[str]:
    """Import the instructor's check modules (``*.py`` files); the names imported."""
    names = []
    for path in paths:
        name = f"attnlab_instructor_{Path(path).stem}"
        module_spec = importlib.util.spec_from_file_location(name, path)
        if module_spec is None or module_spec.loader is None:
            raise ValueError(f"cannot import check module {path}")
        module = importlib.util.module_from_spec(module_spec)
        try:
            module_spec.loader.exec_module(module)
        except Exception as error:  # the instructor's code: say which file, in one line
            reason = (str(error).strip().splitlines() or [""])[0][:200]
            raise ValueError(
                f"check module {path} does not import: {type(error).__name__}: {reason}"
            ) from None
        names.append(name)
    return names


def _source_paths(source: Path) -> list[Path]:
    paths = [source] if source.is_file() else sorted(source.rglob("*.ipynb"))
    return [p for p in paths
            if p.is_file() and not {".ipynb_checkpoints", "_build"}.intersection(p.parts)]


def expected_exercises(source: Path | None) -> dict[str, list[str]]:
    """Notebook file name → the exercise ids its self-check cells call (from ``source``)."""
    if source is None:
        return {}
    expected = {}
    for path in _source_paths(source):
        nb = read_notebook(path)
        ids = [i for c in nb.cells if c.cell_type == "code" for i in check_ids_in(c.source)]
        expected[path.name] = list(dict.fromkeys(ids))
    return expected


_NAMED_CHECK = re.compile(r"\bcheck\(\s*['\"](?P<id>\d{2}\.\d+)['\"]\s*,\s*(?P<name>[A-Za-z_]\w*)")


def checked_names(cells: Iterable[str]) -> dict[str, str]:
    """Exercise id → the name a ``check("NN.k", name)`` call passes (first call wins).

    Examples
    --------
    >>> checked_names(['assert check("05.1", concat_heads)', 'check("05.1", other)'])
    {'05.1': 'concat_heads'}
    """
    found: dict[str, str] = {}
    for source in cells:
        for match in _NAMED_CHECK.finditer(source):
            found.setdefault(match["id"], match["name"])
    return found


def source_names(source: Path | None) -> dict[str, dict[str, str]]:
    """Notebook file name → ``{exercise id: name checked}`` in the assigned notebooks."""
    if source is None:
        return {}
    return {path.name: checked_names(c.source for c in read_notebook(path).cells
                                     if c.cell_type == "code")
            for path in _source_paths(source)}
