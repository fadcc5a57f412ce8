"""The grid on Dask distributed: one writer of the CSV, workers that die, a second driver.

Every cluster here is a ``LocalCluster`` on 127.0.0.1 started by :func:`dask_executor` and
closed when its ``with`` block ends; each test is bounded by an alarm, so a hang fails the
test instead of the suite.
"""

from __future__ import annotations

import csv
import functools
import os
import signal
import sys
import threading
import time
from pathlib import Path

import cloudpickle
import pytest
import torch
from _timeouts import hang_guard

from attnlab.study import RunConfig, read_results, run_one
from attnlab.study.__main__ import main
from attnlab.study.engine import (
    FAILURE_COLUMNS,
    FAILURES_NAME,
    DriverLock,
    GridLocked,
    dask_executor,
    run_grid,
)

pytest.importorskip("distributed")
# The runners below are defined in this test module, which Dask's worker processes cannot
# import: send them by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(autouse=True)
def bounded_in_time():
    """Fail a test (instead of hanging the suite) after five minutes (see tests/_timeouts.py)."""
    with hang_guard(300):
        yield


def _tiny(seed: int, attention: str = "sdpa") -> RunConfig:
    return RunConfig(
        task="shift", attention=attention, positions="abs", seed=seed, steps=4, batch_size=8,
        lr=3e-3, d=8, h=2, layers=1,
    )  # fmt: skip


def _stored(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _slow_run(config: RunConfig, markers: str) -> dict[str, str]:
    """Leave a marker naming this worker's pid, then train slowly (time to be killed)."""
    marker = Path(markers, f"{config.seed}-{time.monotonic_ns()}")
    marker.with_suffix(".tmp").write_text(str(os.getpid()))
    marker.with_suffix(".tmp").rename(marker.with_suffix(".pid"))  # whole, never half-written
    time.sleep(2.0)
    return run_one(config, chunk=4)


def _suicide(config: RunConfig) -> dict[str, str]:
    """A run that kills its own worker process whenever it is tried (seed 1 only)."""
    if config.seed == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    return run_one(config, chunk=4)


def test_a_worker_killed_inside_a_run_loses_no_row_and_writes_none_twice(tmp_path):
    from distributed import default_client

    markers = tmp_path / "markers"
    markers.mkdir()
    configs = [_tiny(seed) for seed in range(4)]
    killed: list[int] = []
    problems: list[str] = []

    def kill_the_first_runner() -> None:
        deadline = time.monotonic() + 90
        try:
            while time.monotonic() < deadline and not killed:
                found = sorted(markers.glob("*.pid"))
                if found:
                    pid = int(found[0].read_text())
                    workers = set(default_client().run(os.getpid).values())
                    if pid not in workers:
                        problems.append(f"pid {pid} is not a worker's ({sorted(workers)})")
                        return
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                time.sleep(0.05)
        except Exception as error:  # reported by the assertion below, not lost in the thread
            problems.append(repr(error))

    with dask_executor(workers=2) as executor:
        killer = threading.Thread(target=kill_the_first_runner, daemon=True)
        killer.start()
        rows = run_grid(
            configs, tmp_path / "results.csv", progress=False, executor=executor,
            runner=functools.partial(_slow_run, markers=str(markers)), in_flight=4,
        )  # fmt: skip
        killer.join(timeout=5)
    assert killed, f"no worker was killed, so the test tested nothing: {problems}"
    stored = _stored(tmp_path / "results.csv")
    assert sorted(r["seed"] for r in stored) == ["0", "1", "2", "3"], "every row exactly once"
    assert [r["seed"] for r in rows] == ["0", "1", "2", "3"]
    assert len(list(markers.glob("*.pid"))) >= 5, "the killed run was started again elsewhere"
    assert not (tmp_path / FAILURES_NAME).exists()


def test_a_run_that_kills_its_worker_three_times_becomes_a_failure_row(tmp_path):
    configs = [_tiny(0), _tiny(1), _tiny(2)]
    with dask_executor(workers=2) as executor:
        rows = run_grid(configs, tmp_path / "results.csv", progress=False, executor=executor,
                        runner=_suicide, in_flight=3)  # fmt: skip
    assert [r["seed"] for r in rows] == ["0", "2"]
    failures = _stored(tmp_path / FAILURES_NAME)
    assert len(failures) == 1 and tuple(failures[0]) == FAILURE_COLUMNS
    assert failures[0]["seed"] == "1" and failures[0]["error"] == "KilledWorker"
    assert sorted(r["seed"] for r in read_results(tmp_path / "results.csv")) == ["0", "2"]


def test_a_second_driver_on_the_same_folder_is_refused(tmp_path):
    run_grid([_tiny(0)], tmp_path / "results.csv", progress=False,
             runner=functools.partial(run_one, chunk=4))  # fmt: skip
    before = (tmp_path / "results.csv").read_bytes()
    with DriverLock(tmp_path):
        with pytest.raises(GridLocked, match=f"pid {os.getpid()}"):
            run_grid([_tiny(1)], tmp_path / "results.csv", progress=False)
    assert (tmp_path / "results.csv").read_bytes() == before
    with DriverLock(tmp_path):  # released on leaving: a later driver may run
        pass


def test_the_command_refuses_a_second_driver_in_one_line(tmp_path, capsys):
    with DriverLock(tmp_path):
        with pytest.raises(SystemExit) as stop:
            main(["--grid", "reduced", "--out", str(tmp_path), "--workers", "0",
                  "--timing-rounds", "0"])  # fmt: skip
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "another driver is running a grid" in err
    assert not (tmp_path / "results.csv").exists()


def test_the_command_runs_a_grid_on_a_local_cluster_as_this_process_would(
    tmp_path, monkeypatch, capsys
):
    configs = [_tiny(seed) for seed in range(4)]
    torch.set_num_threads(1)  # as each worker runs (and as the command sets with --threads 1)
    here = run_grid(configs, tmp_path / "here" / "results.csv", progress=False,
                    runner=functools.partial(run_one, device="cpu"))  # fmt: skip
    monkeypatch.setattr("attnlab.study.__main__.grid", lambda name: configs)
    out = tmp_path / "dask"
    main(["--grid", "reduced", "--out", str(out), "--workers", "2", "--timing-rounds", "0"])
    assert "running on a local Dask cluster of 2 worker(s)" in capsys.readouterr().out
    there = read_results(out / "results.csv")
    assert sorted(r["seed"] for r in there) == ["0", "1", "2", "3"]
    # One torch thread per worker and the same seeds: the same training, bit for bit.
    there = sorted(there, key=lambda r: int(r["seed"]))
    for a, b in zip(here, there, strict=True):
        assert (a["test_accuracy"], a["curve"]) == (b["test_accuracy"], b["curve"])


def test_the_command_runs_a_grid_on_a_given_scheduler(tmp_path, monkeypatch, capsys):
    from distributed import LocalCluster

    monkeypatch.setattr("attnlab.study.__main__.grid", lambda name: [_tiny(0), _tiny(1)])
    # No dashboard, and its HTTP server (which the scheduler starts anyway) on a free port
    # instead of 8787: tests in parallel, and the grid's own cluster, may hold that one.
    free_port = {"dashboard_address": "127.0.0.1:0"}
    with LocalCluster(n_workers=1, threads_per_worker=1, host="127.0.0.1", dashboard_address=None,
                      scheduler_kwargs=free_port) as cluster:  # fmt: skip
        address = cluster.scheduler_address
        main(["--grid", "reduced", "--out", str(tmp_path), "--scheduler", address,
              "--timing-rounds", "0"])  # fmt: skip
    assert f"running on {address}" in capsys.readouterr().out
    assert sorted(r["seed"] for r in read_results(tmp_path / "results.csv")) == ["0", "1"]


@pytest.mark.parametrize("args, message", [
    (["--workers", "-1"], "--workers must be a non-negative integer"),
    (["--workers", "100000"], "--workers must be at most"),
    (["--workers", "two"], "invalid int value"),
    (["--scheduler", " "], "--scheduler must be an address"),
])  # fmt: skip
def test_bad_engine_arguments_are_one_line_errors(tmp_path, capsys, args, message):
    with pytest.raises(SystemExit) as stop:
        main(["--grid", "reduced", "--out", str(tmp_path), *args])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and message in err


def test_an_unreachable_scheduler_is_a_value_error():
    with pytest.raises(ValueError, match="cannot reach the Dask scheduler at tcp://127.0.0.1:9"):
        with dask_executor(scheduler="tcp://127.0.0.1:9", timeout=2):
            pass


@pytest.mark.parametrize("workers", [0, -2, 1.5, True, "2"])
def test_dask_executor_refuses_a_bad_worker_count(workers):
    with pytest.raises(ValueError, match="workers must be a positive integer"):
        with dask_executor(workers=workers):
            pass
