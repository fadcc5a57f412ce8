"""The GRU encoder–decoder of chapter 07 with Luong global attention, and how to train it.

:class:`~attnlab.nn.luong.LuongSeq2Seq` is Luong et al.'s *global* attention model without
input feeding, built on :class:`~attnlab.nn.luong.LuongAttention`; the helpers turn a
:class:`~attnlab.data.SequenceTask` into tensors for teacher forcing
(:func:`~attnlab.nn.luong.task_tensors`), give the loss
(:func:`~attnlab.nn.luong.seq2seq_loss`) and the exact-match score
(:func:`~attnlab.nn.luong.exact_match`). Every name is re-exported (and documented) by
:mod:`attnlab.nn.luong`, whose command ``python -m attnlab.nn.luong`` runs
:func:`~attnlab.nn.luong.main`: a longer training run of every score on the date task.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnlab._cli import OneLineParser
from attnlab._validate import (
    check_int,
    require_nonempty,
    shape_of,
)
from attnlab.data import BOS_ID, PAD_ID, SequenceTask, date_task
from attnlab.nn.luong_attention import SCORES, LuongAttention
from attnlab.train import count_parameters, resolve_device

__all__ = ["LuongSeq2Seq", "task_tensors", "seq2seq_loss", "exact_match", "main"]


class LuongSeq2Seq(nn.Module):
    """GRU encoder–decoder with Luong global attention (no input feeding).

    For a source ``x_1..x_m`` the encoder GRU gives states ``h̄_1..h̄_m``; the decoder GRU,
    started from the encoder's last state, reads ``<bos> y_1 .. y_{n-1}`` and gives ``h_t``.
    Each ``h_t`` attends over the ``h̄_s`` (keys = values = encoder states) to get the context
    ``c_t``; the attentional state ``h̃_t = tanh(W_c [c_t; h_t])`` is mapped to logits over
    the target vocabulary.

    Parameters
    ----------
    src_vocab_size, tgt_vocab_size : int
        Vocabulary sizes (id 0 is padding on both sides).
    score : str
        The attention score: ``"dot"``, ``"scaled"``, ``"general"`` or ``"concat"``.
    hidden : int
        GRU state size (``d_q = d_k = d_v = hidden``).
    embed : int
        Token embedding size.

    Shapes
    ------
    ``src (B, m)``, ``src_lengths (B,)``, ``tgt_in (B, n)`` → ``logits (B, n, V_tgt)``,
    ``weights (B, n, m)``.

    Raises
    ------
    TypeError
        If a size is not an integer (a bool is not) or an input is not a tensor.
    ValueError
        If a size is not positive; in ``forward``, ``encode`` and ``greedy``: token ids that
        are not integer tensors of shape ``(B, m)``/``(B, n)`` or lie outside the vocabulary,
        lengths that are not ``(B,)`` integers in ``1..m`` (an empty source has nothing to
        attend to; a length above ``m`` would read past the padding), batch sizes that
        disagree, or ``steps < 1``. Ids and lengths are always checked, although that reads
        their values: an out-of-range id would otherwise be an ``IndexError`` on the CPU and
        a device-side assert, which ends the process, on a GPU.

    Examples
    --------
    >>> import torch
    >>> from attnlab.nn import LuongSeq2Seq
    >>> model = LuongSeq2Seq(10, 7, score="general", hidden=8, embed=4)
    >>> src = torch.tensor([[3, 4, 5], [6, 7, 0]])
    >>> logits, weights = model(src, torch.tensor([3, 2]), torch.ones(2, 4, dtype=torch.long))
    >>> tuple(logits.shape), tuple(weights.shape)
    ((2, 4, 7), (2, 4, 3))
    >>> weights[1, :, 2].abs().max().item()                 # the padded key gets no weight
    0.0
    """

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        score: str = "dot",
        hidden: int = 64,
        embed: int = 32,
    ) -> None:
        super().__init__()
        src_vocab_size = check_int(src_vocab_size, "src_vocab_size", minimum=PAD_ID + 1)
        tgt_vocab_size = check_int(tgt_vocab_size, "tgt_vocab_size", minimum=PAD_ID + 1)
        hidden, embed = check_int(hidden, "hidden"), check_int(embed, "embed")
        self.src_embed = nn.Embedding(src_vocab_size, embed, padding_idx=PAD_ID)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, embed, padding_idx=PAD_ID)
        self.encoder = nn.GRU(embed, hidden, batch_first=True)
        self.decoder = nn.GRU(embed, hidden, batch_first=True)
        self.attention = LuongAttention(score, hidden, hidden, hidden)
        self.combine = nn.Linear(2 * hidden, hidden)  # W_c in tanh(W_c [c_t; h_t]), plus a bias
        self.out = nn.Linear(hidden, tgt_vocab_size)

    @staticmethod
    def _check_ids(ids: Tensor, name: str, layout: str, vocab_size: int) -> None:
        """Token ids: an integer tensor ``(B, length)``, ``length >= 1``, ids in the vocabulary."""
        if not isinstance(ids, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor of token ids, got {type(ids).__name__}")
        if ids.dtype not in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
            raise ValueError(f"{name} must hold integer token ids, got dtype {ids.dtype}")
        if ids.dim() != 2:
            raise ValueError(f"{name} must have shape {layout}, got shape {shape_of(ids)}")
        require_nonempty({name: ids}, axis=1)
        if ids.is_meta or not ids.numel():  # a meta tensor has shapes only, no values
            return
        if int(ids.min()) < 0 or int(ids.max()) >= vocab_size:
            raise ValueError(
                f"{name} holds ids from {int(ids.min())} to {int(ids.max())}, outside the "
                f"vocabulary 0..{vocab_size - 1}"
            )

    def encode(self, src: Tensor, src_lengths: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Encoder states ``(B, m, H)``, the decoder's start state ``(1, B, H)``, the key mask."""
        self._check_ids(src, "src", "(B, m)", self.src_embed.num_embeddings)
        if not isinstance(src_lengths, Tensor):
            raise TypeError(f"src_lengths must be a torch.Tensor, got {type(src_lengths).__name__}")
        if src_lengths.dtype.is_floating_point or src_lengths.dtype == torch.bool:
            raise ValueError(f"src_lengths must hold integers, got dtype {src_lengths.dtype}")
        if src_lengths.shape != src.shape[:1]:
            raise ValueError(
                f"src must be (B, m) and src_lengths (B,), got src of shape {shape_of(src)} and "
                f"src_lengths of shape {shape_of(src_lengths)}"
            )
        src_lengths = src_lengths.to(device=src.device, dtype=torch.long)
        m = src.shape[1]
        has_values = src_lengths.numel() and not src_lengths.is_meta
        if has_values and (int(src_lengths.min()) < 1 or int(src_lengths.max()) > m):
            raise ValueError(
                f"src_lengths must lie in 1..m = 1..{m} (src has shape {shape_of(src)}), got "
                f"lengths from {int(src_lengths.min())} to {int(src_lengths.max())}; "
                "an empty source has no state to attend to"
            )
        states, _ = self.encoder(self.src_embed(src))
        # The GRU is causal, so the state at position length-1 has read exactly the real
        # tokens; the states over padding are masked out of the attention.
        rows = torch.arange(src.shape[0], device=src.device)
        last = states[rows, src_lengths - 1]  # (B, H)
        positions = torch.arange(m, device=src.device)
        key_mask = positions.unsqueeze(0) < src_lengths.unsqueeze(1)
        return states, last.unsqueeze(0).contiguous(), key_mask

    def _predict(
        self, dec_states: Tensor, enc_states: Tensor, key_mask: Tensor
    ) -> tuple[Tensor, Tensor]:
        """Attend, combine ``tanh(W_c [c_t; h_t])``, and map to logits ``(B, n, V_tgt)``."""
        context, weights = self.attention(dec_states, enc_states, enc_states, key_mask)
        attentional = torch.tanh(self.combine(torch.cat([context, dec_states], dim=-1)))
        return self.out(attentional), weights

    def forward(self, src: Tensor, src_lengths: Tensor, tgt_in: Tensor) -> tuple[Tensor, Tensor]:
        """Teacher forcing: logits for every target position given the previous true tokens."""
        enc_states, start, key_mask = self.encode(src, src_lengths)
        self._check_ids(tgt_in, "tgt_in", "(B, n)", self.tgt_embed.num_embeddings)
        if tgt_in.shape[0] != src.shape[0] or tgt_in.device != src.device:
            raise ValueError(
                f"tgt_in must have the batch size and device of src: src has shape "
                f"{shape_of(src)} on {src.device}, tgt_in has shape {shape_of(tgt_in)} on "
                f"{tgt_in.device}"
            )
        dec_states, _ = self.decoder(self.tgt_embed(tgt_in), start)
        return self._predict(dec_states, enc_states, key_mask)

    @torch.no_grad()
    def greedy(self, src: Tensor, src_lengths: Tensor, steps: int) -> tuple[Tensor, Tensor]:
        """Decode ``steps`` tokens, each time feeding back the most likely one.

        Returns the tokens ``(B, steps)`` and the attention weights ``(B, steps, m)``.
        """
        steps = check_int(steps, "steps")
        enc_states, state, key_mask = self.encode(src, src_lengths)
        token = torch.full((src.shape[0], 1), BOS_ID, dtype=torch.long, device=src.device)
        tokens, weights = [], []
        for _ in range(steps):
            dec_state, state = self.decoder(self.tgt_embed(token), state)
            logits, w = self._predict(dec_state, enc_states, key_mask)
            token = logits.argmax(dim=-1)
            tokens.append(token)
            weights.append(w)
        return torch.cat(tokens, dim=1), torch.cat(weights, dim=1)


def task_tensors(task: SequenceTask) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The task as long tensors ``(src, src_lengths, tgt_in, tgt_out)`` for teacher forcing.

    ``tgt_out`` is the target; ``tgt_in`` is the same shifted right by one with ``<bos>`` in
    front, so that the decoder predicts ``tgt_out[:, t]`` after reading ``tgt_in[:, : t + 1]``.

    Shapes
    ------
    ``src (N, m)``, ``src_lengths (N,)``, ``tgt_in (N, n)``, ``tgt_out (N, n)``.

    Examples
    --------
    >>> from attnlab.data import date_task
    >>> from attnlab.nn.luong import task_tensors
    >>> src, src_lengths, tgt_in, tgt_out = task_tensors(date_task(2, seed=0))
    >>> bool((tgt_in[:, 1:] == tgt_out[:, :-1]).all()), tgt_in[:, 0].tolist()
    (True, [1, 1])
    """
    tgt_out = torch.as_tensor(task.tgt, dtype=torch.long)
    tgt_in = torch.cat([torch.full_like(tgt_out[:, :1], BOS_ID), tgt_out[:, :-1]], dim=1)
    return (
        torch.as_tensor(task.src, dtype=torch.long),
        torch.as_tensor(task.src_lengths, dtype=torch.long),
        tgt_in,
        tgt_out,
    )


def seq2seq_loss(model: LuongSeq2Seq, batch: tuple[Tensor, ...]) -> Tensor:
    """Mean cross-entropy of the next target token under teacher forcing, padding ignored.

    Shapes
    ------
    ``batch = (src (B, m), src_lengths (B,), tgt_in (B, n), tgt_out (B, n))`` → scalar.
    """
    src, src_lengths, tgt_in, tgt_out = batch
    logits, _ = model(src, src_lengths, tgt_in)
    return nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1), ignore_index=PAD_ID
    )


def exact_match(model: LuongSeq2Seq, task: SequenceTask) -> float:
    """Fraction of examples whose greedy decoding equals the whole target (a float in [0, 1]).

    Decodes as many steps as the target is long; positions that are padding in the target
    are not compared.
    """
    parameters = list(model.parameters()) if isinstance(model, nn.Module) else []
    device = parameters[0].device if parameters else torch.device("cpu")
    src, src_lengths, _, tgt_out = (t.to(device) for t in task_tensors(task))
    tokens, _ = model.greedy(src, src_lengths, steps=tgt_out.shape[1])
    correct = ((tokens == tgt_out) | (tgt_out == PAD_ID)).all(dim=1)
    return correct.float().mean().item()


#: Defaults of ``python -m attnlab.nn.luong`` (chapter 07 quotes them).
CLI_EXAMPLES, CLI_HIDDEN = 20000, 64


def _positive_int(text: str) -> int:
    """An argparse type: a whole number >= 1 (argparse turns the ValueError into its error)."""
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


def main(argv: list[str] | None = None) -> None:  # pragma: no cover - a long run, by hand
    """Train :class:`LuongSeq2Seq` with every score on the date task; print a table.

    The command ``python -m attnlab.nn.luong [--epochs 10] [--device auto] ...``; ``argv``
    defaults to the command line. Prints one Markdown row per score: parameters and the exact
    match on 1,000 held-out dates.
    """
    from attnlab.train import tensor_batches, train

    parser = OneLineParser(
        prog="python -m attnlab.nn.luong", description="Train LuongSeq2Seq on the date task."
    )
    parser.add_argument("--epochs", type=_positive_int, default=10)
    parser.add_argument("--examples", type=_positive_int, default=CLI_EXAMPLES)
    parser.add_argument("--hidden", type=_positive_int, default=CLI_HIDDEN)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--threads", type=_positive_int, default=1, help="torch threads (small models: 1)"
    )
    parser.add_argument(
        "--device", default="cpu", help='"cpu" (default), "cuda", or "auto" (cuda if available)'
    )
    args = parser.parse_args(argv)
    try:  # before any data is made: one line, not a traceback after minutes
        device = resolve_device(args.device)
    except ValueError as error:
        parser.error(f"--device: {error}")
    torch.set_num_threads(args.threads)
    train_set, test_set = date_task(args.examples + 1000, seed=args.seed).split(1000)
    print("| score | parameters | exact match |\n|---|---|---|")
    for score in SCORES:
        torch.manual_seed(args.seed)
        model = LuongSeq2Seq(
            len(train_set.src_vocab), len(train_set.tgt_vocab), score, hidden=args.hidden
        ).to(device)
        data = tuple(t.to(device) for t in task_tensors(train_set))
        train(
            model,
            lambda epoch, data=data: tensor_batches(*data, batch_size=64, seed=epoch),
            seq2seq_loss,
            epochs=args.epochs,
            seed=args.seed,
            desc=score,
        )
        print(f"| {score} | {count_parameters(model)} | {exact_match(model, test_set):.3f} |")
