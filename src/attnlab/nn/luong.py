"""Luong attention in PyTorch and the small GRU encoder–decoder of chapter 07.

:class:`LuongAttention` scores every (query, key) pair with one of Luong et al.'s scores
(``"dot"``, ``"scaled"``, ``"general"``, ``"concat"``), normalises over the keys and averages
the values. It is batched and uses the row convention of torch (``batch_first``): queries
``(B, n, d_q)``, keys ``(B, m, d_k)``, weights ``(B, n, m)``. :meth:`LuongAttention.column_weights`
returns its parameters in the form that :func:`attnlab.luong.luong_attention` (column
convention) takes.

:class:`LuongSeq2Seq` is the encoder–decoder of Luong et al.'s *global* attention model
without input feeding: a GRU encoder, a GRU decoder, attention of each decoder state over all
encoder states, and the attentional state ``tanh(W_c [c_t; h_t])`` that predicts the next
token.

Run ``python -m attnlab.nn.luong`` for a longer training run of every score on the date task
(with a progress bar); ``--device auto`` trains on a GPU if there is one.

One module per concept, both re-exported here: the attention in
:mod:`attnlab.nn.luong_attention`, the encoder–decoder and its training helpers in
:mod:`attnlab.nn.seq2seq`.
"""

from attnlab.nn.luong_attention import SCORES, LuongAttention
from attnlab.nn.seq2seq import (
    LuongSeq2Seq,
    exact_match,
    main,
    resolve_device,
    seq2seq_loss,
    task_tensors,
)

__all__ = [
    "SCORES",
    "LuongAttention",
    "LuongSeq2Seq",
    "task_tensors",
    "seq2seq_loss",
    "exact_match",
    "resolve_device",
    "main",
]

_PROG = "python -m attnlab.nn.luong"


def _refusal(argv: list[str]) -> str | None:
    """Why the command line ``argv`` cannot run (one line), checked before any data is made.

    ``main`` (in :mod:`attnlab.nn.seq2seq`) reports a bad ``--device`` or size only after it
    has built the date task, and CUDA's absence only as torch's error at the first ``.to``;
    this checks both up front. Options it does not know are left to ``main``'s parser.
    """
    import argparse

    import torch

    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--device", default="cpu")
    for name in ("--epochs", "--examples", "--hidden", "--threads"):
        parser.add_argument(name, type=int, default=1)
    try:
        known, _ = parser.parse_known_args(argv)
    except SystemExit:  # a non-integer size: main's parser says which
        return None
    for name in ("epochs", "examples", "hidden", "threads"):
        if getattr(known, name) < 1:
            return f"--{name} must be a positive integer, got {getattr(known, name)}"
    try:
        device = resolve_device(known.device)
    except ValueError as error:
        return f"--device: {error}"
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        return f"--device {known.device}: torch finds no such CUDA device"
    return None


def _command(argv: list[str] | None = None) -> int:
    """``python -m attnlab.nn.luong``: ``main`` after a one-line refusal of bad options."""
    import sys

    argv = sys.argv[1:] if argv is None else argv
    problem = _refusal(argv)
    if problem is not None:
        print(f"{_PROG}: error: {problem}", file=sys.stderr)
        return 2
    main(argv)
    return 0


if __name__ == "__main__":  # pragma: no cover - a long run, exercised by hand
    raise SystemExit(_command())
