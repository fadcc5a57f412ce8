"""The study's finished results, shipped inside the package (chapter 10 reads only these).

``make study`` runs ``python -m attnlab.study --grid full --out src/attnlab/study/results``, so
the committed ``results.csv``, ``summary.md``, ``timing.md`` and figures are the package data
that a wheel installs; chapter 10 reads them here, with no path into the repository.
"""

from __future__ import annotations

from attnlab.resources import STUDY_RESULTS, packaged_file
from attnlab.study.runner import parse_results


def packaged_results() -> list[dict[str, str]]:
    """The rows of the packaged ``results.csv`` (the full grid behind chapter 10).

    Raises
    ------
    FileNotFoundError
        If the installed package lacks its ``results.csv``.
    ValueError
        If the packaged file is not a results CSV of the study.

    Examples
    --------
    >>> len(packaged_results()) > 0
    True
    """
    text = packaged_file(STUDY_RESULTS, "results.csv").read_text(encoding="utf-8")
    return parse_results(text, f"the packaged {STUDY_RESULTS}/results.csv")


def packaged_text(name: str) -> str:
    """The text of a packaged report file of the study (``"timing.md"``, ``"summary.md"``).

    Raises
    ------
    ValueError
        If ``name`` does not end in ``.md`` or ``.csv`` (and as
        :func:`attnlab.resources.packaged_file`).
    FileNotFoundError
        If the installed package lacks the file.

    Examples
    --------
    >>> packaged_text("timing.md").startswith("# Timing of the study")
    True
    """
    if isinstance(name, str) and not name.endswith((".md", ".csv")):
        raise ValueError(f"name must be a text file of the study (.md or .csv), got {name!r}")
    return packaged_file(STUDY_RESULTS, name).read_text(encoding="utf-8")
