"""Functions an exercise's answer may not call: the library's own version of the answer.

Some exercises ask the reader to write what ``attnlab`` or PyTorch already provides, for
example a numerically stable softmax or the forward pass of multi-head attention. The
notebook has those functions imported, so an answer could simply call them. A spec names
them (``exercise(..., forbid=("attnlab.softmax", "torch.softmax"))``) and, while the answer
runs, :func:`forbidden` watches every function call through Python's profiling hook
(``sys.setprofile``): a call to a forbidden function is recorded, and when the answer
returns the check fails with a message that names the function. The answer's own helpers,
numpy and the rest of torch stay available.

What is matched:

* a Python function: by its code object, so an alias (``from attnlab import softmax as s``)
  or a ``functools.wraps`` wrapper still counts; numpy's dispatching functions (``np.tril``)
  by the function they wrap;
* a built-in function or method (``torch.softmax``, ``torch.Tensor.softmax``,
  ``F.scaled_dot_product_attention``): by equality of the built-in, or for a method
  descriptor by its name and the class of the object it is bound to;
* a class: by the code of its ``__init__`` and ``forward`` (an ``nn.Module`` built or called);
* a module (``attnlab.exercises.ch07``): every function defined in its file, by the code's
  file name, so that an answer cannot call the check's own reference solution
  (:func:`attnlab.course.spec.exercise` forbids the module of every chapter's spec);
* a PyTorch operator (``torch.ops.aten._softmax``, or one overload of it such as
  ``torch.ops.aten._softmax.default``): by its qualified name (``aten::_softmax``) when its
  Python ``__call__`` runs, and by each overload's own built-in, so that calling the
  operator object directly is seen too.

This is a learning aid, like the rest of the self-check: an answer can still copy the
library's source into its own cell. An answer that switches the hook off (``sys.setprofile``)
is caught by the check that the hook is still in place when it returns.

Examples
--------
>>> import numpy as np
>>> with forbidden(("numpy.linalg.norm",)) as calls:
...     _ = np.sqrt((np.ones(3) ** 2).sum())
>>> calls.names
[]
>>> with forbidden(("numpy.linalg.norm",)) as calls:
...     _ = np.linalg.norm(np.ones(3))
>>> calls.names
['numpy.linalg.norm']
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

__all__ = ["OPTIONAL_PACKAGES", "ForbiddenCalls", "Targets", "forbidden", "message", "resolve",
           "watching"]

#: Packages that may be missing where an answer runs (Colab has scipy, this book's environment
#: need not): a forbidden name inside one of them is skipped when the package is not installed,
#: since an answer cannot call it there. Any other name that does not import is the spec's
#: mistake and is refused.
OPTIONAL_PACKAGES = frozenset({"scipy"})

_BUILTIN = types.BuiltinFunctionType
_DESCRIPTORS = (types.MethodDescriptorType, types.ClassMethodDescriptorType)


@dataclass
class Targets:
    """What a list of forbidden names matches: code objects, built-ins, method descriptors."""

    codes: dict[types.CodeType, str] = field(default_factory=dict)
    builtins: list[tuple[Any, str]] = field(default_factory=list)
    methods: list[tuple[str, type, str]] = field(default_factory=list)
    ops: dict[str, str] = field(default_factory=dict)
    op_calls: set[types.CodeType] = field(default_factory=set)
    files: dict[str, str] = field(default_factory=dict)


@dataclass
class ForbiddenCalls:
    """The forbidden functions the answer called (in order of first call, each once)."""

    names: list[str] = field(default_factory=list)
    hook_removed: bool = False

    def add(self, name: str) -> None:
        if name not in self.names:
            self.names.append(name)


def _lookup(name: str) -> Any:
    """The object a dotted name such as ``"torch.nn.functional.softmax"`` refers to."""
    if not isinstance(name, str) or not name or "." not in name:
        raise ValueError(f"a forbidden name is 'module.attribute', got {name!r}")
    parts = name.split(".")
    for split in range(len(parts) - 1, 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        try:
            for attribute in parts[split:]:
                obj = getattr(obj, attribute)
        except AttributeError:
            break
        return obj
    try:  # a module not yet imported as an attribute of its package
        return importlib.import_module(name)
    except ImportError:
        pass
    raise ValueError(f"forbidden name {name!r} does not name an importable object")


def _python_codes(obj: Any) -> list[types.CodeType]:
    """Code objects of a Python function, of what it wraps, or of a class's methods."""
    if isinstance(obj, type):
        members = [obj.__dict__.get(m) for m in ("__init__", "forward", "__call__")]
        return [code for member in members if member is not None
                for code in _python_codes(member)]
    codes = []
    seen: set[int] = set()
    while obj is not None and id(obj) not in seen:
        seen.add(id(obj))
        code = getattr(obj, "__code__", None)
        if isinstance(code, types.CodeType):
            codes.append(code)
        obj = getattr(obj, "__wrapped__", None)
    return codes


def _operator_name(obj: Any) -> str | None:
    """``"aten::_softmax"`` for a PyTorch operator packet or overload, else ``None``."""
    if type(obj).__module__ != "torch._ops":
        return None
    qualified = getattr(obj, "_qualified_op_name", None)  # an OpOverloadPacket
    if isinstance(qualified, str):
        return qualified
    schema = getattr(obj, "_schema", None)  # an OpOverload
    return getattr(schema, "name", None)


def _add_operator(obj: Any, qualified: str, name: str, targets: Targets) -> None:
    """Watch an operator: its Python ``__call__`` by name, its overloads' built-ins."""
    targets.ops[qualified] = name
    operators = sys.modules["torch._ops"]  # imported: obj comes from it
    for cls in (operators.OpOverloadPacket, operators.OpOverload):
        targets.op_calls.update(_python_codes(cls.__call__))
    overloads = [getattr(obj, o) for o in obj.overloads()] if hasattr(obj, "overloads") else []
    for overload in [obj, *overloads]:
        builtin = getattr(overload, "_op", None)
        if builtin is not None and type(builtin) is not type(overload):
            targets.builtins.append((builtin, name))


def _not_installed(name: Any) -> bool:
    """``True`` for a name in one of :data:`OPTIONAL_PACKAGES` that is not installed here."""
    if not isinstance(name, str):
        return False
    package = name.split(".", 1)[0]
    return package in OPTIONAL_PACKAGES and importlib.util.find_spec(package) is None


def resolve(names: Sequence[str]) -> Targets:
    """Turn dotted names into what :func:`forbidden` matches; ``ValueError`` on a bad name.

    A name inside a package of :data:`OPTIONAL_PACKAGES` that is not installed is skipped.
    """
    targets = Targets()
    for name in names:
        if _not_installed(name):
            continue
        obj = _lookup(name)
        if isinstance(obj, types.ModuleType):
            path = getattr(obj, "__file__", None)
            if not isinstance(path, str):
                raise ValueError(f"forbidden module {name!r} has no source file")
            targets.files[path] = name
            continue
        qualified = _operator_name(obj)
        if qualified is not None:
            _add_operator(obj, qualified, name, targets)
            continue
        if isinstance(obj, _DESCRIPTORS):
            targets.methods.append((obj.__name__, obj.__objclass__, name))
            continue
        if isinstance(obj, _BUILTIN):
            targets.builtins.append((obj, name))
            continue
        codes = _python_codes(obj)
        if not codes:
            raise ValueError(f"forbidden name {name!r} is not a function, method or class")
        for code in codes:
            targets.codes.setdefault(code, name)
    return targets


def _builtin_name(arg: Any, targets: Targets) -> str | None:
    """The forbidden name a built-in about to be called stands for, if any."""
    if type(arg) is not _BUILTIN:
        return None
    for builtin, name in targets.builtins:
        if arg is builtin or (type(builtin) is _BUILTIN and arg == builtin):
            return name
    owner = getattr(arg, "__self__", None)
    for method, cls, name in targets.methods:
        if arg.__name__ == method and (isinstance(owner, cls) or owner is cls):
            return name
    return None


@contextmanager
def forbidden(names: Sequence[str]) -> Iterator[ForbiddenCalls]:
    """Record every call of the functions ``names`` made inside the ``with`` block.

    Parameters
    ----------
    names : sequence of str
        Dotted names (``"attnlab.softmax"``, ``"torch.Tensor.softmax"``). Empty: nothing is
        watched and no hook is installed.

    Yields
    ------
    ForbiddenCalls
        Filled in as the block runs; ``hook_removed`` is set when code inside the block
        replaced the profiling hook (an answer that tried to switch the check off).

    Raises
    ------
    ValueError
        When a name does not name an importable function, method or class (raised before
        the block runs).
    """
    with watching(resolve(names)) as calls:
        yield calls


@contextmanager
def watching(targets: Targets) -> Iterator[ForbiddenCalls]:
    """:func:`forbidden` for names already resolved with :func:`resolve`."""
    calls = ForbiddenCalls()
    if not (targets.codes or targets.builtins or targets.methods or targets.ops or targets.files):
        yield calls
        return

    def hook(frame: types.FrameType, event: str, arg: Any) -> None:
        if event == "call":
            name = targets.codes.get(frame.f_code)
            if name is None and frame.f_code in targets.op_calls:
                name = targets.ops.get(_operator_name(frame.f_locals.get("self")) or "")
            if name is None and targets.files:
                module = targets.files.get(frame.f_code.co_filename)
                if module is not None:
                    code = frame.f_code
                    outer = getattr(code, "co_qualname", code.co_name).split(".<")[0]
                    name = f"{module}.{outer}"  # a comprehension inside counts as its function

            if name is not None:
                calls.add(name)
        elif event == "c_call":
            name = _builtin_name(arg, targets)
            if name is not None:
                calls.add(name)

    previous, previous_threads = sys.getprofile(), threading.getprofile()
    threading.setprofile(hook)
    sys.setprofile(hook)
    try:
        yield calls
    finally:
        still_ours = sys.getprofile() is hook
        sys.setprofile(previous)
        threading.setprofile(previous_threads)
        calls.hook_removed = calls.hook_removed or not still_ours


def message(calls: ForbiddenCalls) -> str | None:
    """The check's verdict on what the answer called, or ``None`` when it called nothing
    forbidden."""
    if calls.hook_removed:
        return ("your answer switched off the check's call watcher (sys.setprofile): "
                "write the function without touching the profiler")
    if not calls.names:
        return None
    shown = ", ".join(f"`{n}`" for n in calls.names)
    verb = "is" if len(calls.names) == 1 else "are"
    return (f"this exercise asks you to write it yourself, and your answer called {shown}, "
            f"which {verb} unavailable here: use numpy (or torch) operations, not the library's "
            f"own version")
