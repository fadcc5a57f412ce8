"""The submissions folder, read defensively; the CSV, written safely.

Nothing here follows a symbolic link or opens anything but a regular file: dangling links,
link loops, fifos, sockets and devices are reported, never read. Folder names that are not
UTF-8 are shown with replacement characters; CSV cells that a spreadsheet would read as a
formula (starting with ``=``, ``+``, ``-``, ``@``, tab or carriage return) are neutralised
with a leading apostrophe (OWASP's advice on CSV injection); the CSV is written to a
temporary file and renamed, so a reader never sees half of it.
"""

from __future__ import annotations

import csv
import os
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SKIP_DIRS = {".ipynb_checkpoints", "__pycache__"}
MAX_DEPTH = 12
MAX_ENTRIES = 20_000
MAX_NOTEBOOK_BYTES = 20 * 2**20
MAX_FILE_BYTES = 50 * 2**20
MAX_FOLDER_BYTES = 200 * 2**20
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


@dataclass(frozen=True)
class Submission:
    """One notebook to grade: who submitted it, where it is, its name for the CSV.

    ``own_folder`` is true when the notebook sits in the student's own folder (``folder``),
    whose other files the notebook may read. ``problem`` says why the entry cannot be
    graded (not a regular file, too large), or is ``None``. ``student_id`` is the id of the
    roster or the LMS (empty if unknown); ``flags`` are notes for the instructor (a renamed
    copy, a late submission) that go into the ``flags`` column.
    """

    student: str
    path: Path
    notebook: str
    own_folder: bool = True
    folder: Path | None = None
    problem: str | None = None
    student_id: str = ""
    flags: tuple[str, ...] = ()


def display(name: str) -> str:
    """A file name as text: undecodable bytes become U+FFFD."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def kind_of(mode: int) -> str:
    """In words, what kind of file a ``st_mode`` describes."""
    for test, word in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a fifo"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a device"),
        (stat.S_ISBLK, "a device"),
        (stat.S_ISDIR, "a folder"),
    ):
        if test(mode):
            return word
    return "a regular file"


def _walk(folder: Path, depth: int = 0) -> Iterator[tuple[Path, os.stat_result]]:
    """Entries named ``*.ipynb`` under ``folder``, links never followed, with their lstat."""
    if depth > MAX_DEPTH:
        return
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)[:MAX_ENTRIES]
    except OSError:
        return
    for entry in entries:
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode):
            if entry.name not in SKIP_DIRS:
                yield from _walk(Path(entry.path), depth + 1)
        elif entry.name.endswith(".ipynb"):
            yield Path(entry.path), info


def _problem(info: os.stat_result) -> str | None:
    if not stat.S_ISREG(info.st_mode):
        return f"not graded: {kind_of(info.st_mode)}, not a regular file"
    if info.st_size > MAX_NOTEBOOK_BYTES:
        return f"not graded: {info.st_size} bytes, over the {MAX_NOTEBOOK_BYTES} byte limit"
    return None


def find_submissions(folder: Path) -> tuple[list[Submission], list[Submission]]:
    """``(notebooks, other entries)`` under ``folder``; each student is a first-level folder.

    A notebook lying directly in ``folder`` is graded under its own name as the student.
    First-level entries that are neither folders nor notebooks (a link, a fifo) come back
    in the second list, each with its ``problem``, so that they still get a row.

    Examples
    --------
    >>> root = Path(tempfile.mkdtemp())
    >>> (root / "bob").mkdir()
    >>> _ = (root / "bob" / "05_heads.ipynb").write_text("{}")
    >>> _ = (root / "zoe.ipynb").write_text("{}")
    >>> [(s.student, s.notebook) for s in find_submissions(root)[0]]
    [('bob', '05_heads.ipynb'), ('zoe', 'zoe.ipynb')]
    """
    found: list[Submission] = []
    odd: list[Submission] = []
    for entry in sorted(os.scandir(folder), key=lambda e: e.name)[:MAX_ENTRIES]:
        path, name = Path(entry.path), display(entry.name)
        info = entry.stat(follow_symlinks=False)
        if stat.S_ISDIR(info.st_mode):
            if entry.name in SKIP_DIRS:
                continue
            for notebook, nb_info in _walk(path):
                relative = display(notebook.relative_to(path).as_posix())
                found.append(Submission(name, notebook, relative, True, path, _problem(nb_info)))
        elif entry.name.endswith(".ipynb") and not stat.S_ISDIR(info.st_mode):
            found.append(Submission(name[: -len(".ipynb")], path, name, False, None,
                                    _problem(info)))
        elif not stat.S_ISREG(info.st_mode):
            problem = f"not graded: {kind_of(info.st_mode)}, not a student folder"
            odd.append(Submission(name, path, "", False, None, problem))
    return found, odd


def copy_folder(source: Path, target: Path) -> list[str]:
    """Copy the regular files and folders of ``source`` (no notebooks) into ``target``.

    Links, fifos and devices are skipped, as are files past the size limits. Returns what
    was left out, in words.
    """
    skipped: list[str] = []
    budget = [MAX_FOLDER_BYTES, MAX_ENTRIES]

    def copy(src: Path, dst: Path, depth: int) -> None:
        dst.mkdir(mode=0o755, exist_ok=True)
        try:
            entries = sorted(os.scandir(src), key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            budget[1] -= 1
            if budget[1] < 0:
                skipped.append("files past the count limit")
                return
            info = entry.stat(follow_symlinks=False)
            here = dst / entry.name
            if stat.S_ISDIR(info.st_mode) and depth < MAX_DEPTH:
                if entry.name not in SKIP_DIRS:
                    copy(Path(entry.path), here, depth + 1)
            elif not stat.S_ISREG(info.st_mode):
                skipped.append(f"{display(entry.name)} ({kind_of(info.st_mode)})")
            elif entry.name.endswith(".ipynb"):
                continue
            elif info.st_size > min(MAX_FILE_BYTES, budget[0]):
                skipped.append(f"{display(entry.name)} (too large)")
            else:
                budget[0] -= info.st_size
                _copy_file(Path(entry.path), here)

    copy(source, target, 0)
    return skipped


def _copy_file(src: Path, dst: Path) -> None:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(src, flags)
    except OSError:
        return
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return
        data = handle.read(MAX_FILE_BYTES + 1)[:MAX_FILE_BYTES]
    dst.write_bytes(data)


def read_notebook_bytes(path: Path) -> bytes:
    """The bytes of a regular file, never following a link nor blocking on a fifo."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise OSError("not a regular file")
        return handle.read(MAX_NOTEBOOK_BYTES + 1)


def safe_cell(value: object) -> str:
    """A CSV cell: one line, and never a spreadsheet formula.

    Examples
    --------
    >>> safe_cell('=2+3*HYPERLINK("http://x")')
    '\\'=2+3*HYPERLINK("http://x")'
    >>> safe_cell("alice")
    'alice'
    """
    text = " ".join(display(str(value)).split()) if value is not None else ""
    return "'" + text if text.startswith(_FORMULA_START) else text


def write_csv(rows: list[dict[str, str]], columns: list[str], out: Path) -> None:
    """Write ``rows`` to ``out`` atomically (temporary file in the same folder, then rename).

    The file gets mode 0644.
    """
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".grades-", suffix=".csv", dir=out.parent)
    try:
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=columns)
            writer.writeheader()
            writer.writerows({k: safe_cell(row.get(k, "")) for k in columns} for row in rows)
        os.chmod(tmp, 0o644)  # grades are handed on: readable by all, like any report
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
