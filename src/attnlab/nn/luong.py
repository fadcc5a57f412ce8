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
from attnlab.nn.seq2seq import LuongSeq2Seq, exact_match, main, seq2seq_loss, task_tensors
from attnlab.train import resolve_device

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

if __name__ == "__main__":  # pragma: no cover - a long run, exercised by hand
    main()
