"""Files shipped inside the package: the book's measured figures and chapter 10's study results.

A chapter reads what it needs through these loaders, never through a path into the
repository, so a notebook copied alone into an empty folder (Colab, a laptop) finds the same
bytes with ``attnlab`` installed from its wheel. The loaders use ``importlib.resources``:
they work from a wheel, an editable install or a source tree on ``PYTHONPATH``.

Who writes the files (``make bench`` and ``make study`` write the packaged copies):

- ``figures/gam_scaling.png``: ``benchmarks/bench_gam.py`` (chapter 08, the Performance page);
- ``study/results/``: ``python -m attnlab.study --out src/attnlab/study/results``
  (``results.csv``, ``summary.md``, ``timing.md`` and the study's PNG figures, chapter 10).
"""

from __future__ import annotations

from importlib.resources import files
from importlib.resources.abc import Traversable

#: The package's folder of measured figures (PNG), relative to ``attnlab``.
FIGURES = "figures"
#: The folder of chapter 10's study results, relative to ``attnlab``.
STUDY_RESULTS = "study/results"


def packaged_file(folder: str, name: str) -> Traversable:
    """The packaged file ``name`` of ``folder`` (``FIGURES`` or ``STUDY_RESULTS``).

    Parameters
    ----------
    folder : str
        ``FIGURES`` or ``STUDY_RESULTS``.
    name : str
        A file name in that folder, without any folder part (``"results.csv"``).

    Returns
    -------
    importlib.resources.abc.Traversable
        The file, to ``read_bytes()`` or ``read_text()``.

    Raises
    ------
    TypeError
        If ``folder`` or ``name`` is not a string.
    ValueError
        If ``folder`` is not one of the two folders, or ``name`` is empty or holds a path.
    FileNotFoundError
        If the installed package has no such file (an install without its package data).

    Examples
    --------
    >>> packaged_file(FIGURES, "gam_scaling.png").read_bytes()[:4]
    b'\\x89PNG'
    """
    for label, value in (("folder", folder), ("name", name)):
        if not isinstance(value, str):
            raise TypeError(f"{label} must be a string, got {type(value).__name__}")
    if folder not in (FIGURES, STUDY_RESULTS):
        raise ValueError(f"folder must be {FIGURES!r} or {STUDY_RESULTS!r}, got {folder!r}")
    if not name or "/" in name or "\\" in name or name in (".", ".."):
        raise ValueError(f"name must be a file name without a folder part, got {name!r}")
    resource = files("attnlab").joinpath(*folder.split("/"), name)
    if not resource.is_file():
        raise FileNotFoundError(
            f"attnlab ships no file {folder}/{name}: the installed package lacks its data "
            "(reinstall attnlab from its wheel, or run `make bench` / `make study` in a checkout)"
        )
    return resource


def figure_png(name: str) -> bytes:
    """The bytes of the packaged figure ``name`` (a PNG of ``FIGURES``).

    Display it in a notebook with ``IPython.display.Image(figure_png(name))``.

    Raises
    ------
    ValueError
        If ``name`` does not end in ``.png`` (and as :func:`packaged_file`).
    FileNotFoundError
        As :func:`packaged_file`.

    Examples
    --------
    >>> len(figure_png("gam_scaling.png")) > 1000
    True
    """
    if isinstance(name, str) and not name.endswith(".png"):
        raise ValueError(f"name must be a PNG file name ending in .png, got {name!r}")
    return packaged_file(FIGURES, name).read_bytes()
