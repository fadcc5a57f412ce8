"""Run one notebook inside the sandbox, then the grader's call of its answers (for the grader).

``python -m attnlab.course.runner TIMEOUT CELL_TIMEOUT STARTUP OUTPUT_LIMIT SUBMITTED WORK IO``

The request comes on standard input, read whole before any kernel starts: the notebook and
the grader's inputs of every exercise (with the name the answer must have). The student's
folder (read-only at ``SUBMITTED``) is copied to the writable ``WORK`` folder and the
notebook runs there top to bottom in a fresh kernel, every cell allowed to fail:

* a cell that runs past ``CELL_TIMEOUT`` is interrupted and the run goes on; one that ignores
  the interrupt, or kills the kernel, is skipped in a fresh kernel that re-runs the others
  (at most ``_MAX_RESTARTS`` times, each run with the whole ``TIMEOUT``);
* output past ``OUTPUT_LIMIT`` bytes is dropped (the cells that printed it are named);
* only after the last cell are the inputs written, to a folder of a fresh random name, and
  one more cell, the grader's, calls each answer by name on them in a forked child with its
  own time limit (:mod:`attnlab.course.capture`).

The runner prints one JSON document: how the run went, the first error of each cell, and
the results (base64 ``.npz``). Files that the notebook left in the documented results folder
(``IO/outputs``) are listed and never read. The kernel cannot read the request (the runner is
not dumpable, so its ``/proc`` entries are closed to it) nor write this stdout; the grader
treats everything here as untrusted and decides pass or fail itself.
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
from nbclient.util import run_sync

from attnlab.course.check import CAPTURE_ENV

_PER_RESULT = 16 * 2**20
_MAX_RESTARTS = 3
_PROBE_SECONDS = 5  # an interrupted kernel answers `pass` at once; one that does not is restarted
_KEPT = ("error",)  # output types kept past the output limit


class _Client(NotebookClient):
    """A NotebookClient that drops cell output past ``output_limit`` bytes (errors kept)."""

    def __init__(self, *args: Any, output_limit: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._budget = output_limit
        self.truncated: set[int] = set()

    def output(self, outs, msg, display_id, cell_index):  # type: ignore[no-untyped-def]
        self._budget -= len(json.dumps(msg.get("content", {}), default=str))
        if self._budget < 0 and msg.get("msg_type") not in _KEPT:
            self.truncated.add(int(cell_index))
            return None
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


def _first_error(cell: nbformat.NotebookNode) -> str | None:
    for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
        if output.get("output_type") == "error":
            return f"{output.get('ename', 'Error')}: {str(output.get('evalue', ''))[:2000]}"
    return None


def _results(folder: Path, wanted: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for exercise_id in wanted:
        path = folder / f"{exercise_id}.npz"
        if path.is_file() and not path.is_symlink() and path.stat().st_size <= _PER_RESULT:
            found[exercise_id] = base64.b64encode(path.read_bytes()).decode("ascii")
    return found


def _planted(io: Path) -> list[str]:
    """What the notebook left in the documented results folder (never read, only named)."""
    folder = io / "outputs"
    try:
        return sorted(p.name for p in folder.iterdir())[:50] if folder.is_dir() else []
    except OSError:
        return ["(unreadable)"]


class _Run:
    """One attempt: a fresh kernel running every cell not in ``skip``, then the evaluation."""

    def __init__(self, nb, state: dict[str, Any], env: dict[str, str], work: Path) -> None:
        self.nb, self.state, self.env, self.work = nb, state, env, work
        self.limit: float = state["cell_timeout"]

    def _timeout(self, cell: nbformat.NotebookNode) -> int:
        left = self.state["deadline"] - time.monotonic()
        return max(1, int(min(self.limit, left) + 0.999))

    def client(self) -> _Client:
        return _Client(
            self.nb, timeout_func=self._timeout, startup_timeout=int(self.state["startup"]),
            kernel_name="python3", allow_errors=True, interrupt_on_timeout=False,
            resources={"metadata": {"path": str(self.work)}},
            output_limit=self.state["output_limit"],
        )

    def execute(self, skip: dict[int, str], evaluation: str) -> tuple[str, int | None]:
        """``("done", None)``, or ``("restart", cell)`` when cell ``cell`` must be skipped."""
        client = self.client()
        self.state["client"] = client
        with client.setup_kernel(env=self.env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL):
            client.wait_for_reply(client.kc.kernel_info())  # iopub is connected after this
            # Each run of the notebook (a re-run after a skipped cell too) gets the whole
            # notebook limit from its first cell on: a skipped cell costs only itself.
            self.state["deadline"] = time.monotonic() + self.state["timeout"]
            for index, cell in enumerate(self.nb.cells):
                if cell.cell_type != "code" or index in skip:
                    continue
                if time.monotonic() >= self.state["deadline"]:
                    self.state["stopped_at"] = index
                    break
                self.limit = self.state["cell_timeout"]
                try:
                    client.execute_cell(cell, index)
                except DeadKernelError:
                    return "restart", index
                except CellTimeoutError:
                    self.state["timeouts"].add(index)
                    if not self._recovers(client, index):
                        return "restart", index
            self.state["planted"] = _planted(self.state["io"])
            self.state["results"] = self._evaluate(client, evaluation)
        return "done", None

    def _recovers(self, client: _Client, index: int) -> bool:
        """Interrupt the kernel; whether it answers a trivial cell soon after."""
        try:
            run_sync(client.km.interrupt_kernel)()
            self.limit = _PROBE_SECONDS
            probe = nbformat.v4.new_code_cell("pass")
            timed_out = self.nb.cells[index]
            client.execute_cell(probe, index)
            self.nb.cells[index] = timed_out
            return True
        except (CellTimeoutError, DeadKernelError):
            return False

    def _evaluate(self, client: _Client, source: str) -> dict[str, str]:
        """Write the inputs (only now), run the grader's cell, collect the results."""
        inputs: dict[str, str] = self.state["inputs"]
        if not inputs:
            return {}
        try:
            folder = Path(tempfile.mkdtemp(prefix="eval-", dir=self.state["io"]))
            (folder / "inputs").mkdir()
            (folder / "outputs").mkdir()
            for exercise_id, blob in inputs.items():
                (folder / "inputs" / f"{exercise_id}.npz").write_bytes(base64.b64decode(blob))
        except OSError as error:  # the notebook filled or broke its scratch space
            self.state["evaluation"] = f"the grader could not write its inputs ({error.strerror})"
            return {}
        self.limit = self.state["evaluation_timeout"]
        self.state["deadline"] = time.monotonic() + self.limit + 1
        cell = nbformat.v4.new_code_cell(source.format(folder=str(folder)))
        self.nb.cells.append(cell)
        try:
            client.execute_cell(cell, len(self.nb.cells) - 1)
        except (CellTimeoutError, DeadKernelError) as error:
            why = type(error).__name__
            self.state["evaluation"] = f"the grader's evaluation did not finish ({why})"
        finally:
            self.nb.cells.pop()
        return _results(folder / "outputs", sorted(inputs))


#: The line the runner writes on stderr once it has started (before any student code runs).
STARTED = "attnlab-runner: started"
EVALUATION = "__import__('attnlab.course.capture', fromlist=['_']).evaluate({folder!r})"


def run(request: dict[str, Any], timeout: float, cell_timeout: float, startup: float,
        output_limit: int, submitted: Path, work: Path, io: Path) -> dict[str, Any]:
    """Execute the request's notebook in ``work`` (a copy of ``submitted``); the report."""
    original = nbformat.reads(request["notebook"], as_version=4)
    inputs = {str(k): str(v) for k, v in dict(request.get("inputs", {})).items()}
    _copy_folder(submitted, work)
    state: dict[str, Any] = {
        "deadline": None, "timeout": timeout, "cell_timeout": cell_timeout,
        "startup": startup, "output_limit": output_limit, "io": io, "inputs": inputs,
        "evaluation_timeout": float(request.get("evaluation_timeout", 60.0)),
        "timeouts": set(), "planted": [], "results": {}, "run": "completed",
    }
    env = {**os.environ, CAPTURE_ENV: str(io)}
    os.environ["JUPYTER_PATH"] = env["JUPYTER_PATH"] = _kernel_spec()
    skip: dict[int, str] = {}
    nb = original
    for attempt in range(_MAX_RESTARTS + 1):
        nb = nbformat.from_dict(json.loads(json.dumps(original)))
        for index in skip:
            nb.cells[index].outputs = []
        state["timeouts"] = set()
        runner = _Run(nb, state, env, work)
        try:
            outcome, cell = runner.execute(skip, EVALUATION)
        except Exception as error:  # the kernel failed to start, or nbclient itself failed
            state["run"] = f"not run ({type(error).__name__}: {str(error)[:120]})"
            break
        if outcome == "done":
            break
        hung = cell in state["timeouts"]
        skip[cell] = "ignored the interrupt after its time limit" if hung else "killed the kernel"
        state["run"] = "completed"
        if attempt == _MAX_RESTARTS:
            state["run"] = f"stopped: {len(skip)} cells killed or hung the kernel"
            break
    client = state.get("client")
    errors = {str(i): e for i, c in enumerate(nb.cells) if (e := _first_error(c)) is not None}
    timeouts = sorted(state["timeouts"] | {i for i, why in skip.items() if "interrupt" in why})
    return {
        "run": state["run"], "errors": errors, "timeouts": timeouts,
        "skipped": {str(i): why for i, why in skip.items()},
        "truncated": sorted(client.truncated) if client is not None else [],
        "planted": state["planted"], "results": state["results"],
        "evaluation": state.get("evaluation", ""), "stopped_at": state.get("stopped_at"),
    }


def main(argv: list[str]) -> int:
    """Entry point inside the sandbox; reads the request on stdin, prints one JSON line."""
    _not_dumpable()
    request = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    sys.stderr.write(STARTED + "\n")  # before any student code: the grader knows we ran
    sys.stderr.flush()
    null = os.open(os.devnull, os.O_RDONLY)  # the kernel inherits nothing of the request
    os.dup2(null, 0)
    os.close(null)
    timeout, cell_timeout, startup, output_limit, submitted, work, io = argv
    report = run(request, float(timeout), float(cell_timeout), float(startup),
                 int(output_limit), Path(submitted), Path(work), Path(io))
    sys.stdout.write(json.dumps(report) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
