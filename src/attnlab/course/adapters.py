"""How an answer is called (adapters), and plain data on disk (``.npz``, no pickle).

An adapter turns ``(answer, args)`` into plain data (see :func:`attnlab.course.spec.to_plain`).
It runs wherever the answer runs: in the learner's kernel for ``check``, in the sandbox for
the grader. Adapters are fixed code of this module, chosen by name from the trusted spec, so
that the grader never needs the learner's objects: only plain arguments go in and only
plain results come out.
"""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from attnlab.course.spec import ExerciseFailure, Plain, to_plain

#: Largest ``.npz`` file the grader reads back from a sandbox (bytes).
MAX_NPZ_BYTES = 64 * 2**20


def _needs_function(answer: Any) -> None:
    if not callable(answer):
        raise ExerciseFailure(f"expected a function, got {type(answer).__name__}")


def _call(answer: Any, args: tuple[Any, ...]) -> Plain:
    _needs_function(answer)
    return to_plain(answer(*args))


def traced_peak(fn: Callable[[], Any]) -> tuple[int, Any]:
    """``(peak bytes, fn())``: the most memory traced by ``tracemalloc`` while ``fn`` ran,
    above what was allocated when it started (numpy arrays and Python objects; not torch's
    own allocator). A tracing already under way is left running."""
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        got = fn()
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        if started:
            tracemalloc.stop()
    return max(int(peak), 0), got


def _bounded(answer: Any, args: tuple[Any, ...]) -> Plain:
    """``args = (*inputs, max_bytes)``: ``answer(*inputs)``, refused when the memory it
    allocates while running peaks above ``max_bytes`` (the exercise forbids a large
    intermediate array: the check measures instead of timing)."""
    _needs_function(answer)
    *inputs, max_bytes = args
    peak, got = traced_peak(lambda: answer(*inputs))
    if peak > int(max_bytes):
        raise ExerciseFailure(
            f"your answer's memory peaked at {peak / 2**20:.2f} MiB while it ran; this case "
            f"allows {int(max_bytes) / 2**20:.2f} MiB: it builds an intermediate array far "
            f"larger than the result, which the exercise asks you to avoid"
        )
    return to_plain(got)


def _value(answer: Any, args: tuple[Any, ...]) -> Plain:
    return to_plain(answer)


def _torch_mha(answer: Any, args: tuple[Any, ...]) -> Plain:
    """``args = (in_proj_weight (3d, d), out_proj_weight (d, d), h)``: answer gets a module."""
    _needs_function(answer)
    return to_plain(answer(build_mha(*args)))


def build_mha(in_proj: np.ndarray, out_proj: np.ndarray, heads: int) -> Any:
    """A float64 ``torch.nn.MultiheadAttention`` (no bias) with the given weights.

    Shapes: ``in_proj (3d, d)``, ``out_proj (d, d)``.
    """
    import torch

    d = int(out_proj.shape[0])
    mha = torch.nn.MultiheadAttention(d, int(heads), bias=False, batch_first=True)
    mha = mha.to(torch.float64)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.from_numpy(np.array(in_proj, dtype=np.float64)))
        mha.out_proj.weight.copy_(torch.from_numpy(np.array(out_proj, dtype=np.float64)))
    return mha


def _task(answer: Any, args: tuple[Any, ...]) -> Plain:
    """``args = (num, n, vocab, seed, other_seed)``: the task's arrays, twice and re-seeded."""
    _needs_function(answer)
    num, n, vocab, seed, other = args
    out: dict[str, Plain] = {}
    for prefix, s in (("", seed), ("again_", seed), ("other_", other)):
        task = answer(num, n, vocab, s)
        out[prefix + "inputs"] = to_plain(task.inputs)
        if not prefix:
            out["targets"] = to_plain(task.targets)
            out["vocab"] = to_plain((task.vocab_in, task.vocab_out))
            name = getattr(task, "name", None)
            out["name"] = name if isinstance(name, str) else repr(name)
            out["unset"] = [f for f in ("positions", "span") if getattr(task, f, None) is None]
    return out


ADAPTERS: dict[str, Callable[[Any, tuple[Any, ...]], Plain]] = {
    "call": _call,
    "bounded": _bounded,
    "value": _value,
    "torch_mha": _torch_mha,
    "task": _task,
}


def adapt(adapter: str, answer: Any, args: tuple[Any, ...]) -> Plain:
    """Call ``answer`` on ``args`` the way ``adapter`` says; return plain data."""
    return ADAPTERS[adapter](answer, args)


# ---- plain data on disk ---------------------------------------------------------------------
def _encode(value: Any, arrays: dict[str, np.ndarray]) -> Any:
    if value is None:
        return {"n": 0}
    if type(value) is bool:
        return {"b": value}
    if type(value) is int:
        return {"i": value}
    if type(value) is float:
        return {"f": value}
    if type(value) is str:
        return {"s": value}
    if isinstance(value, np.ndarray):
        key = f"a{len(arrays)}"
        arrays[key] = value
        return {"a": key}
    if isinstance(value, (tuple, list)):
        return {"t": [_encode(v, arrays) for v in value]}
    if isinstance(value, dict):
        return {"d": {str(k): _encode(v, arrays) for k, v in value.items()}}
    raise TypeError(f"cannot store {type(value).__name__} as plain data")


def _decode(node: Any, arrays: Any, depth: int = 0) -> Any:
    if depth > 8 or not isinstance(node, dict) or len(node) != 1:
        raise ValueError("malformed plain data")
    (kind, body), = node.items()
    if kind == "n":
        return None
    if kind in ("b", "i", "f", "s"):
        expected = {"b": bool, "i": int, "f": float, "s": str}[kind]
        if type(body) is not expected:
            raise ValueError("malformed plain data")
        return body
    if kind == "a":
        arr = arrays[str(body)]
        if arr.dtype.kind not in "biuf":
            raise ValueError("malformed plain data: not numbers")
        return arr
    if kind == "t" and isinstance(body, list):
        return tuple(_decode(v, arrays, depth + 1) for v in body)
    if kind == "d" and isinstance(body, dict):
        return {str(k): _decode(v, arrays, depth + 1) for k, v in body.items()}
    raise ValueError("malformed plain data")


def save_plain(path: Path, value: Any) -> None:
    """Store ``value`` (arrays, numbers, strings, None, tuples, dicts) as one ``.npz``."""
    arrays: dict[str, np.ndarray] = {}
    tree = json.dumps(_encode(value, arrays))
    tmp = Path(str(path) + ".tmp")
    with open(tmp, "wb") as handle:
        np.savez(handle, __tree__=np.array(tree), **arrays)
    tmp.replace(path)


def load_plain(path: Path) -> Any:
    """Read a ``.npz`` written by :func:`save_plain`, without pickle; ``ValueError`` if bad."""
    path = Path(path)
    if not path.is_file() or path.is_symlink() or path.stat().st_size > MAX_NPZ_BYTES:
        raise ValueError("missing, not a regular file, or too large")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except Exception as error:  # zip or npy format errors from untrusted bytes
        raise ValueError(f"unreadable results ({type(error).__name__})") from None
    tree = arrays.pop("__tree__", None)
    if tree is None or tree.dtype.kind != "U" or tree.ndim != 0:
        raise ValueError("malformed plain data")
    try:
        return _decode(json.loads(str(tree)), arrays)
    except (KeyError, json.JSONDecodeError, RecursionError) as error:
        raise ValueError(f"malformed plain data ({type(error).__name__})") from None
