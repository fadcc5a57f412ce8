"""Fixtures shared by the test modules, and how pytest-xdist shares the tests out."""

import functools
import os
import re
import sys
from pathlib import Path

import pytest


def pytest_configure(config):
    """Under pytest-xdist, give each worker's torch its share of the cores (at least one).

    With torch's default of a thread per core in each worker, the cores are oversubscribed,
    and small models run many times slower (OpenMP threads waiting for one another): the three
    training smoke tests of ``test_nn_positions`` took 44.5 s on 2 threads and 3.3 s on 1 on
    this 2-core machine at load 11. ``ATTNLAB_TEST_THREADS`` sets another count.
    """
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
    if os.environ.get("PYTEST_XDIST_WORKER") and workers > 1:
        import torch

        from attnlab._cli import usable_cores

        threads = os.environ.get("ATTNLAB_TEST_THREADS") or max(1, usable_cores() // workers)
        torch.set_num_threads(int(threads))


@pytest.fixture(autouse=True)
def _torch_threads_restored():
    """Give torch's thread count back as each test found it.

    In-process runs of the commands (``main([...])`` of attnlab.study, attnlab.lm, ...) set it
    for the whole process, as the command should. Without this, every later test on the same
    worker would run with that count, and which tests come later depends on how pytest-xdist
    shared them out: ``test_lookup``'s check that training leaves the count alone could pass
    only because an earlier test had already set the count training sets.
    """
    torch = sys.modules.get("torch")
    before = torch.get_num_threads() if torch is not None else None
    yield
    torch = sys.modules.get("torch")
    if torch is not None and before is not None and torch.get_num_threads() != before:
        torch.set_num_threads(before)


@pytest.fixture
def corpus_forbidden(monkeypatch):
    """Make ``attnlab.lm.corpus.load_corpus`` fail: a refusal must come before any work."""
    import attnlab.lm.corpus

    def no_corpus():
        raise AssertionError("the corpus was loaded before the arguments were checked")

    monkeypatch.setattr(attnlab.lm.corpus, "load_corpus", no_corpus)


@pytest.fixture
def one_torch_thread():
    """Run the test on one torch thread, then restore the count.

    Tiny models train fastest, and reproducibly, on one thread, and do not fight other
    processes for the cores.
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def train_date_seq2seq():
    """A function that trains a small ``LuongSeq2Seq`` on the date task: ``(history, model)``.

    ``train_date_seq2seq(examples, score, batch_size=..., epochs=..., seed=...)`` trains a
    model of hidden size 16 and embedding 8 on ``date_task(examples, seed=0)`` with
    ``attnlab.train.train`` (Adam, lr 3e-2); ``seed`` seeds the initial weights and the loop,
    and the batches are reshuffled each epoch (``seed=epoch``).
    """
    import torch

    from attnlab.data import date_task
    from attnlab.nn import LuongSeq2Seq
    from attnlab.nn.luong import seq2seq_loss, task_tensors
    from attnlab.train import tensor_batches, train

    def run(examples: int, score: str, *, batch_size: int, epochs: int, seed: int = 0):
        task = date_task(examples, seed=0)
        data = task_tensors(task)
        torch.manual_seed(seed)
        model = LuongSeq2Seq(len(task.src_vocab), len(task.tgt_vocab), score, hidden=16, embed=8)
        history = train(
            model,
            lambda epoch: tensor_batches(*data, batch_size=batch_size, seed=epoch),
            seq2seq_loss,
            epochs=epochs,
            lr=3e-2,
            seed=seed,
            progress=False,
        )
        return history, model

    return run


# ---- pytest-xdist: make test runs the unit stage with -n N --dist loadgroup ------------------
#: Modules that run the grader's real sandbox (bubblewrap, or a user id per notebook as root).
#: They form one work unit, run by one worker, one test after the other: the grader picks a
#: sandbox user id (``attnlab.course.grade._claimed_uid``, a socket name per id, so two graders
#: never share one) and kills that user's processes before and after each notebook; the
#: hog's, the herd's and the crowd's process and memory limits count per machine, and one
#: grader at a time keeps their timings meaningful.
SANDBOX_MODULES = frozenset({
    "test_cli_grade.py", "test_course_grade.py", "test_course_lms.py",
    "test_course_rootless.py", "test_course_sandbox.py", "test_grade.py",
})  # fmt: skip
#: A fixture of the module's own that outlives one test: built once per worker that runs any
#: of the module's tests, so the module is one work unit (as in one process, built once).
_SHARED_FIXTURE = re.compile(r"@pytest\.fixture\([^)]*scope=[\"'](?:module|package|session)")


@functools.cache
def _work_unit(module: str, root: str) -> str | None:
    """The work unit of every test of ``module`` (a path below ``root``), or None: each its own."""
    if module.rsplit("/", 1)[-1] in SANDBOX_MODULES:
        return "sandbox"
    try:
        text = (Path(root) / module).read_text(encoding="utf-8")
    except OSError:
        return None
    return module if _SHARED_FIXTURE.search(text) else None


@pytest.hookimpl(optionalhook=True)  # pytest without pytest-xdist runs these tests too
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup`` with the work units above: every other test is a unit of its own
    (as under ``--dist load``), given to whichever worker is free; the largest units first.

    xdist 3.8's own ``loadgroup`` reads ``xdist_group`` marks through ``item._nodeid``, which
    pytest 9.2 no longer uses for the node id: the marks would be ignored, silently.
    """
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    root = str(config.rootpath)

    class Units(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _work_unit(nodeid.split("::", 1)[0], root) or nodeid

    return Units(config, log)
