"""``python -m attnlab.lm train``: train chapter 11's character transformer from the shell.

Writes three files into ``--out``: ``model.pt`` (the config and the float32 weights),
``log.csv`` (one row per step: training and validation bits per character) and
``config.json`` (the model's config, the training options, the corpus, the test bits per
character of the trained model, and the wall time). Bad arguments end in one line on
standard error with exit status 2, and an ``--out`` that already holds one of those files is
refused before anything is trained: nothing is ever overwritten. ``--text FILE`` trains on
any UTF-8 text (plain or ``.xz``) instead of the packaged Shakespeare, split by the same
interleaved rule with blocks of ``--block`` characters.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import math
import platform
import time
from collections.abc import Sequence

from attnlab._cli import OneLineParser, fail, out_folder, usable_cores

PROG = "python -m attnlab.lm"
RESULT_FILES = ("model.pt", "log.csv", "config.json")
LOG_FIELDS = ("step", "chars", "lr", "train_bpc", "valid_bpc")


def _positive(name: str, value: int) -> None:
    if value < 1:
        fail(PROG, f"{name} must be a positive integer, got {value}")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse and check every argument; each problem ends in one line and status 2."""
    parser = OneLineParser(prog=PROG, description="Chapter 11's character-level language model.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("train", help="train a model on the packaged corpus (or --text)")
    p.prog = f"{PROG} train"
    p.error = lambda message: fail(PROG, message)  # one line from the sub-parser too
    p.add_argument("--out", required=True, help="folder for model.pt, log.csv, config.json")
    p.add_argument("--width", type=int, default=64, help="model width d (default 64)")
    p.add_argument("--depth", type=int, default=2, help="blocks L (default 2)")
    p.add_argument("--heads", type=int, default=4, help="heads per block (default 4)")
    p.add_argument("--context", type=int, default=128, help="characters of context (128)")
    p.add_argument(
        "--positions", choices=("learned", "sinusoidal", "rotary"), default="learned"
    )
    p.add_argument("--norm", choices=("layernorm", "rmsnorm"), default="layernorm")
    p.add_argument("--mlp", choices=("gelu", "swiglu"), default="gelu")
    p.add_argument("--mlp-hidden", type=int, default=None,
                   help="the MLP's hidden width (default 4d for gelu, 8d/3 for swiglu)")
    p.add_argument("--attention", choices=("book", "sdpa"), default="sdpa",
                   help="book: attnlab's boolean mask; sdpa: F.sdpa(is_causal=True)")
    p.add_argument("--steps", type=int, default=1000, help="optimisation steps (1000)")
    p.add_argument("--batch", type=int, default=32, help="windows per step (32)")
    p.add_argument("--lr", type=float, default=3e-3, help="peak learning rate (3e-3)")
    p.add_argument("--warmup", type=int, default=50, help="warm-up steps (50)")
    p.add_argument("--eval-every", type=int, default=100, help="steps between validations")
    p.add_argument("--seed", type=int, default=0, help="seed of weights and windows (0)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--text", help="a UTF-8 text file (.xz or plain) instead of Shakespeare")
    p.add_argument("--block", type=int, default=65_536,
                   help="characters per block of the interleaved split (65536)")
    args = parser.parse_args(argv)
    for name in ("width", "depth", "heads", "context", "steps", "batch", "threads", "block"):
        _positive(f"--{name}", getattr(args, name))
    if args.mlp_hidden is not None:
        _positive("--mlp-hidden", args.mlp_hidden)
    if args.warmup < 0 or args.eval_every < 0:
        fail(PROG, "--warmup and --eval-every must be >= 0")
    if args.seed < 0:
        fail(PROG, f"--seed must be >= 0, got {args.seed}")
    if not (math.isfinite(args.lr) and args.lr > 0):
        fail(PROG, f"--lr must be a positive finite number, got {args.lr}")
    if args.threads > usable_cores():
        fail(PROG, f"--threads must be at most {usable_cores()} (this machine's cores)")
    if args.width % args.heads:
        fail(PROG, f"--heads={args.heads} must divide --width={args.width}")
    if args.positions == "rotary" and (args.width // args.heads) % 2:
        fail(PROG, f"rotary positions need an even width/heads, got {args.width // args.heads}")
    if args.positions == "sinusoidal" and args.width % 2:
        fail(PROG, f"sinusoidal positions need an even --width, got {args.width}")
    args.corpus_text = None if args.text is None else _read_corpus(args)
    out = out_folder(PROG, args.out)
    taken = [name for name in RESULT_FILES if (out / name).exists()]
    if taken:
        fail(PROG, f"--out {out} already holds {', '.join(taken)}: refusing to overwrite")
    args.out = out
    return args


def _read_corpus(args: argparse.Namespace) -> str:
    """``--text``'s content, refused in one line if unreadable or too short to split."""
    from attnlab.lm.corpus import PERIOD, read_text, split_blocks

    try:
        text = read_text(args.text)
    except (OSError, ValueError) as err:
        fail(PROG, f"--text {args.text!r} cannot be read: {err}")
    parts = split_blocks(text, block=args.block)
    if len(parts["test"]) < 2 or len(parts["train"]) <= args.context:
        fail(
            PROG,
            f"--text has {len(text):,} characters: too few for a test block with --block "
            f"{args.block} ({PERIOD} blocks make one period); give a smaller --block",
        )
    return text


def train_command(args: argparse.Namespace) -> dict:
    """Train, evaluate on the test split and write the three result files."""
    import torch

    from attnlab.lm.corpus import SOURCE, load_corpus
    from attnlab.lm.model import CharTransformer, LMConfig
    from attnlab.lm.training import bits_per_char, train_lm

    torch.set_num_threads(args.threads)
    text = getattr(args, "corpus_text", None)
    corpus = load_corpus(text, block=args.block)
    config = LMConfig(
        vocab_size=corpus.vocab.size, d=args.width, layers=args.depth, heads=args.heads,
        context=args.context, positions=args.positions, norm=args.norm, mlp=args.mlp,
        attention=args.attention, mlp_hidden=args.mlp_hidden,
    )  # fmt: skip
    torch.manual_seed(args.seed)
    model = CharTransformer(config)
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with open(args.out / "log.csv", "x", newline="") as f:  # "x": never overwrite
        writer = csv.DictWriter(f, fieldnames=LOG_FIELDS)
        writer.writeheader()
        log = train_lm(
            model, corpus.train, steps=args.steps, batch=args.batch, lr=args.lr,
            warmup=min(args.warmup, args.steps), seed=args.seed, valid_ids=corpus.valid,
            eval_every=args.eval_every, progress=not args.no_progress,
            on_step=lambda row: (writer.writerow(row), f.flush()),
        )  # fmt: skip
    seconds = time.perf_counter() - start
    results = {
        "valid_bpc": bits_per_char(model, corpus.valid),
        "test_bpc": bits_per_char(model, corpus.test),
        "train_seconds": round(seconds, 1),
        "chars_seen": log[-1]["chars"],
        "parameters": model.num_parameters(),
    }
    record = {
        "model": config.to_dict(),
        "training": {
            k: getattr(args, k)
            for k in ("steps", "batch", "lr", "warmup", "eval_every", "seed", "threads")
        },
        "corpus": (
            {"name": "shakespeare", **SOURCE}
            if text is None
            else {"name": str(args.text), "characters": len(text),
                  "text_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()}
        ) | {"block": args.block, "vocab": corpus.vocab.chars},
        "results": results,
        "machine": {"python": platform.python_version(), "torch": torch.__version__,
                    "processor": platform.machine()},
    }  # fmt: skip
    torch.save({"config": config.to_dict(), "state_dict": model.state_dict()},
               args.out / "model.pt")  # fmt: skip
    with open(args.out / "config.json", "x") as f:
        json.dump(record, f, indent=2)
    return record


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    record = train_command(args)
    r = record["results"]
    print(
        f"{r['parameters']:,} parameters, {r['chars_seen']:,} characters in "
        f"{r['train_seconds']} s: test {r['test_bpc']:.3f} bits per character -> {args.out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
