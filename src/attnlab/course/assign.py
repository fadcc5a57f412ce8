"""Student versions of the chapter notebooks: solutions out, stubs and self-checks in.

Run it from the command line::

    python -m attnlab.assign notebooks/ --out student/          # every notebook in a folder
    python -m attnlab.assign notebooks/05_multi_head_attention.ipynb --out hw5/
    python -m attnlab.assign notebooks/ --list                  # the exercise inventory only

Self-check cells (``assert check("05.2", answer)``) are untouched: they now fail until the
student answers. The command refuses to write into a non-empty folder unless ``--force`` is
given, so running it twice never overwrites a student's work by accident.

One module per concept: the transform of one notebook (:func:`student_version`,
:func:`stub_source`, :func:`exercises_in`) is :mod:`attnlab.course.student`, re-exported here; this
module reads and writes the files (:func:`assign`) and is the command (:func:`main`).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import nbformat

from attnlab._cli import file_in_the_way, is_inside
from attnlab.course.student import *  # noqa: F403  (the transform, re-exported and documented here)
from attnlab.course.student import __all__ as _STUDENT_NAMES
from attnlab.course.student import exercises_in, student_version

__all__ = [*_STUDENT_NAMES, "read_notebook", "assign", "main"]

_SKIP_DIRS = {".ipynb_checkpoints", "__pycache__", "_build"}


def _notebooks(source: Path) -> list[Path]:
    """The notebooks of ``source`` (a notebook, or a folder searched recursively).

    Raises ``ValueError`` if ``source`` is a file that is not a notebook or a folder without
    any notebook (writing zero student versions would look like success).
    """
    if source.is_file():
        if source.suffix != ".ipynb":
            raise ValueError(f"{source} is not a notebook (.ipynb)")
        return [source]
    found = sorted(
        p
        for p in source.rglob("*.ipynb")
        if p.is_file() and not _SKIP_DIRS.intersection(p.relative_to(source).parts)
    )
    if not found:
        raise ValueError(f"no notebook (.ipynb) under {source}")
    # A notebook inside a folder named like one would be written below a folder that Jupyter
    # lists as a notebook (an empty such folder is just skipped, as any folder).
    for path in found:
        folders = [source.name, *path.relative_to(source).parts[:-1]]
        if any(part.endswith(".ipynb") for part in folders):
            raise ValueError(f"{path.parent} is a folder named like a notebook: rename it")
    return found


def read_notebook(path: str | Path) -> nbformat.NotebookNode:
    """The notebook at ``path`` (nbformat 4), or a one-line ``ValueError`` naming the file.

    Raises
    ------
    ValueError
        If the file is not valid JSON, or is JSON but not a notebook.
    OSError
        If the file cannot be read at all (missing, a folder, no permission).
    """
    try:
        return nbformat.read(path, as_version=4)
    except (ValueError, KeyError, TypeError, AttributeError, nbformat.ValidationError) as error:
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
        raise ValueError(f"{path}: not a valid notebook ({reason})") from None


def _student_versions(paths: list[Path]) -> list[nbformat.NotebookNode]:
    """The student version of every notebook, all read and checked before any is written."""
    versions = []
    for path in paths:
        try:
            versions.append(student_version(read_notebook(path), filename=path.name))
        except ValueError as error:
            message = str(error)
            prefixed = message if message.startswith(str(path)) else f"{path}: {message}"
            raise ValueError(prefixed) from None
    return versions


def assign(source: Path, out: Path, *, force: bool = False) -> list[Path]:
    """Write student versions of the notebook(s) in ``source`` into the folder ``out``.

    Other files in a source folder (data, images) are copied as they are, so relative links
    keep working. Returns the paths of the notebooks written.

    Raises
    ------
    FileNotFoundError
        If ``source`` does not exist.
    FileExistsError
        If ``out`` exists and is not empty, unless ``force`` is true.
    ValueError
        If ``out`` is ``source`` or lies inside it (the reference notebooks would be
        overwritten), if ``out`` or a folder above it is a file, if ``source`` holds no
        notebook or is a file that is not one, or if a notebook is not valid JSON or is
        malformed (see :func:`student_version`). Every notebook is read and checked before
        the first file is written, so a bad one leaves ``out`` untouched.
    """
    source, out = Path(source), Path(out)
    if not source.exists():
        raise FileNotFoundError(f"no notebook or folder at {source}")
    paths = _notebooks(source)
    root = source if source.is_dir() else source.parent
    if is_inside(out, root):
        raise ValueError(f"--out {out} is inside the source folder {root}: choose another folder")
    if out.suffix == ".ipynb":
        raise ValueError(f"--out names a folder, but {out} is named like a notebook file")
    blocker = out if out.exists() and not out.is_dir() else file_in_the_way(out)
    if blocker is not None:
        raise ValueError(f"--out must be a folder, but {blocker} is a file")
    if out.exists() and any(out.iterdir()) and not force:
        raise FileExistsError(
            f"{out} is not empty; a student's work there could be lost. "
            "Choose an empty folder or pass --force to overwrite files of the same name."
        )
    written = []
    for path, student in zip(paths, _student_versions(paths), strict=True):
        target = out / path.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(student, target)
        written.append(target)
    if source.is_dir():
        for path in sorted(source.rglob("*")):
            relative = path.relative_to(source)
            hidden = any(part.startswith(".") for part in relative.parts)
            if path.is_file() and path.suffix != ".ipynb" and not hidden:
                if not _SKIP_DIRS.intersection(relative.parts):
                    (out / relative).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(path, out / relative)
    return written


def _inventory(source: Path) -> str:
    if not source.exists():
        raise FileNotFoundError(f"no notebook or folder at {source}")
    paths = _notebooks(source)
    _student_versions(paths)  # the same checks as a real run
    rows = ["| notebook | exercises | code | written | with a check |", "|---|---|---|---|---|"]
    for path in paths:
        found = exercises_in(read_notebook(path))
        code = sum(e.kind == "code" for e in found)
        checked = sum(bool(e.check_ids) for e in found)
        rows.append(f"| {path.name} | {len(found)} | {code} | {len(found) - code} | {checked} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point: ``python -m attnlab.assign SOURCE --out DIR [--force]``."""
    parser = argparse.ArgumentParser(
        prog="python -m attnlab.assign",
        description="Write student versions of attnlab notebooks (solutions replaced by stubs).",
    )
    parser.add_argument("source", type=Path, help="a notebook or a folder of notebooks")
    parser.add_argument("--out", type=Path, help="folder for the student versions")
    parser.add_argument("--force", action="store_true", help="write into a non-empty --out")
    parser.add_argument(
        "--list", action="store_true", help="print the exercise inventory and write nothing"
    )
    args = parser.parse_args(argv)
    if args.out is None and not args.list:
        parser.error("--out is required (or --list)")
    try:
        if args.list:
            print(_inventory(args.source))
            return 0
        written = assign(args.source, args.out, force=args.force)
    except (FileNotFoundError, FileExistsError, ValueError) as error:
        print(f"attnlab.assign: {error}", file=sys.stderr)
        return 2
    print(f"wrote {len(written)} student notebook(s) to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
