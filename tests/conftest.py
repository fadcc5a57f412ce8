"""Fixtures shared by the test modules."""

import pytest


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
