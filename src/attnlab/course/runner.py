"""Execute one notebook inside the sandbox and report on stdout (run by the grader).

``python -m attnlab.course.runner NOTEBOOK TIMEOUT STARTUP OUTPUT_LIMIT SUBMITTED WORK IO``

The student's folder (read-only at ``SUBMITTED``) is copied to the writable ``WORK`` folder,
the notebook runs there top to bottom in a fresh kernel with every cell allowed to fail, and
``check`` calls store the answers' results on the grader's inputs (``$ATTNLAB_CAPTURE``).
The runner then prints one JSON document: how the run ended, the first error of each cell
and the stored results (base64 ``.npz``). The kernel cannot write to this stdout (its own
output goes to ``/dev/null`` and the runner is not dumpable); the grader treats everything
it reads here as untrusted data and decides pass or fail itself.
"""

from __future__ import annotations

import base64
import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError

from attnlab.course.check import CAPTURE_ENV

_PER_RESULT = 16 * 2**20


class OutputLimit(Exception):
    """The notebook printed more than the grader allows."""


class _LimitedClient(NotebookClient):
    """A NotebookClient that stops the run once cell outputs exceed ``output_limit`` bytes."""

    def __init__(self, *args: Any, output_limit: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._budget = output_limit
        self._limit = output_limit

    def output(self, outs, msg, display_id, cell_index):  # type: ignore[no-untyped-def]
        self._budget -= len(json.dumps(msg.get("content", {}), default=str))
        if self._budget < 0:
            raise OutputLimit(f"output limit of {self._limit // 1024} KiB exceeded")
        return super().output(outs, msg, display_id, cell_index)


def _not_dumpable() -> None:
    """Keep processes of the same user (the kernel) out of ``/proc/<runner>/fd``."""
    try:
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    except (OSError, AttributeError):
        pass


def _copy_folder(source: Path, target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)


def _kernel_spec() -> str:
    """A ``JUPYTER_PATH`` folder whose ``python3`` kernel is this interpreter.

    Other kernelspecs installed on the host (pointing anywhere) are thereby never used.
    """
    folder = Path(tempfile.mkdtemp(prefix="attnlab-kernels-"))
    spec = folder / "kernels" / "python3"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    kernel = {"argv": argv, "display_name": "Python 3", "language": "python"}
    (spec / "kernel.json").write_text(json.dumps(kernel))
    return str(folder)


def _errors(nb: nbformat.NotebookNode) -> dict[str, str]:
    errors = {}
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if output.get("output_type") == "error":
                errors[str(index)] = f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"
                break
    return errors


def _results(capture: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    folder = capture / "outputs"
    for path in sorted(folder.glob("*.npz")) if folder.is_dir() else []:
        if path.is_file() and path.stat().st_size <= _PER_RESULT:
            found[path.stem] = base64.b64encode(path.read_bytes()).decode("ascii")
    return found


def run(
    notebook: Path, timeout: float, startup: float, output_limit: int, submitted: Path,
    work: Path, capture: Path,
) -> dict[str, Any]:
    """Execute ``notebook`` in ``work`` (a copy of ``submitted``); the grader's report."""
    nb = nbformat.read(notebook, as_version=4)
    _copy_folder(submitted, work)
    current = {"cell": -1}
    deadline: list[float] = []

    def remaining(cell: nbformat.NotebookNode) -> int:
        if not deadline:
            deadline.append(time.monotonic() + timeout)
        return max(1, int(deadline[0] - time.monotonic() + 0.999))

    def on_cell_start(**kwargs: Any) -> None:
        current["cell"] = int(kwargs.get("cell_index", -1))

    client = _LimitedClient(
        nb,
        timeout_func=remaining,
        startup_timeout=int(startup),
        kernel_name="python3",
        allow_errors=True,
        interrupt_on_timeout=False,
        resources={"metadata": {"path": str(work)}},
        on_cell_start=on_cell_start,
        output_limit=output_limit,
    )
    run_state = "completed"
    env = {**os.environ, CAPTURE_ENV: str(capture)}
    os.environ["JUPYTER_PATH"] = env["JUPYTER_PATH"] = _kernel_spec()
    try:
        client.execute(env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except CellTimeoutError:
        run_state = f"timeout in cell {current['cell'] + 1} (limit {timeout:g} s)"
    except DeadKernelError:
        run_state = f"kernel died in cell {current['cell'] + 1}"
    except OutputLimit as error:
        run_state = f"stopped in cell {current['cell'] + 1}: {error}"
    except Exception as error:  # the kernel failed to start, or nbclient itself failed
        run_state = f"not run ({type(error).__name__}: {str(error)[:120]})"
    return {"run": run_state, "errors": _errors(nb), "results": _results(capture)}


def main(argv: list[str]) -> int:
    """Entry point inside the sandbox; prints the report as one JSON line."""
    _not_dumpable()
    notebook, timeout, startup, output_limit, submitted, work, capture = argv
    report = run(
        Path(notebook), float(timeout), float(startup), int(output_limit), Path(submitted),
        Path(work), Path(capture),
    )
    sys.stdout.write(json.dumps(report) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
