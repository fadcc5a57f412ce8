"""attnlab.course.forbid: functions an answer may not call, and how a check reports them.

Each test writes an answer the way a learner (or one trying to get around the check) would,
and asserts what the watcher saw; the end-to-end tests go through ``check`` and through the
grader's own evaluation (``capture._evaluate_one``) with a spec registered here.
"""

from __future__ import annotations

import functools
import sys
import threading

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attnlab
from attnlab.course import capture
from attnlab.course.forbid import forbidden, message, resolve
from attnlab.course.spec import Case, exercise
from attnlab.exercises import check


def _names(fn, names):
    with forbidden(names) as calls:
        fn()
    return calls.names


def test_direct_call_alias_and_wrapper_are_seen():
    x = np.random.default_rng(0).normal(size=(3, 4))
    alias = attnlab.softmax

    @functools.wraps(attnlab.softmax)
    def wrapper(*args, **kwargs):
        return alias(*args, **kwargs)

    for call in (lambda: attnlab.softmax(x), lambda: alias(x), lambda: wrapper(x)):
        assert _names(call, ["attnlab.softmax"]) == ["attnlab.softmax"]


def test_indirect_call_through_another_library_function_is_seen():
    # attnlab's attention computes its weights with attnlab.softmax: using it is a call too.
    rng = np.random.default_rng(1)
    q, k, v = (rng.normal(size=(4, 3)) for _ in range(3))
    seen = _names(lambda: attnlab.scaled_dot_product_attention(q, k, v), ["attnlab.softmax"])
    assert seen == ["attnlab.softmax"]


def test_honest_answer_calls_nothing_forbidden():
    x = np.random.default_rng(2).normal(size=(3, 4))

    def stable(z):
        e = np.exp(z - z.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    with forbidden(["attnlab.softmax", "torch.softmax"]) as calls:
        got = stable(x)
    assert calls.names == [] and not calls.hook_removed and message(calls) is None
    np.testing.assert_allclose(got, attnlab.softmax(x), atol=1e-12)


@pytest.mark.parametrize(
    ("name", "call"),
    [
        ("torch.softmax", lambda t: torch.softmax(t, -1)),
        ("torch.Tensor.softmax", lambda t: t.softmax(-1)),
        ("torch.nn.functional.softmax", lambda t: F.softmax(t, -1)),
        ("torch.nn.functional.scaled_dot_product_attention",
         lambda t: F.scaled_dot_product_attention(t[None], t[None], t[None])),
        ("torch.nn.MultiheadAttention", lambda t: torch.nn.MultiheadAttention(4, 2)),
        ("numpy.tril", lambda t: np.tril(t.numpy())),
    ],
)
def test_torch_and_numpy_kinds_of_callable(name, call):
    t = torch.randn(3, 4)
    assert _names(lambda: call(t), [name]) == [name]
    # and the same call is not reported when something else is forbidden
    assert _names(lambda: call(t), ["attnlab.softmax"]) == []


def test_tensor_method_is_matched_on_subclass_instances_only_by_its_name():
    p = torch.nn.Parameter(torch.randn(2, 3))
    assert _names(lambda: p.softmax(-1), ["torch.Tensor.softmax"]) == ["torch.Tensor.softmax"]
    assert _names(lambda: p.log_softmax(-1), ["torch.Tensor.softmax"]) == []


def test_call_from_a_thread_started_by_the_answer_is_seen():
    x = np.ones(3)

    def answer():
        worker = threading.Thread(target=attnlab.softmax, args=(x,))
        worker.start()
        worker.join()

    assert _names(answer, ["attnlab.softmax"]) == ["attnlab.softmax"]


def test_answer_that_switches_the_hook_off_is_caught():
    def answer():
        sys.setprofile(None)
        return attnlab.softmax(np.ones(3))

    with forbidden(["attnlab.softmax"]) as calls:
        answer()
    assert calls.hook_removed
    assert "switched off" in message(calls)


def test_previous_profiler_is_restored():
    events = []

    def outer(frame, event, arg):
        events.append(event)

    sys.setprofile(outer)
    try:
        with forbidden(["attnlab.softmax"]):
            pass
        assert sys.getprofile() is outer
    finally:
        sys.setprofile(None)


def test_empty_list_installs_no_hook():
    with forbidden([]) as calls:
        assert sys.getprofile() is None
    assert calls.names == []


@pytest.mark.parametrize(
    "bad", ["softmax", "", "attnlab.no_such_function", "no_such_module.f", "numpy.pi", 3]
)
def test_bad_names_are_refused(bad):
    with pytest.raises(ValueError, match="forbidden name|module.attribute"):
        resolve([bad])


def test_a_name_in_an_optional_package_that_is_not_installed_is_skipped(monkeypatch):
    # scipy may be missing here and present on Colab: its softmax is forbidden where it exists
    import importlib.util

    from attnlab.course import forbid

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "scipy" else real(name, *a))
    targets = resolve(["scipy.special.softmax", "attnlab.softmax"])
    assert list(targets.codes.values()) == ["attnlab.softmax"] * len(targets.codes)
    assert "scipy" in forbid.OPTIONAL_PACKAGES
    # a missing package that is not declared optional is still the spec's mistake
    with pytest.raises(ValueError, match="forbidden name"):
        resolve(["no_such_module.softmax"])


def test_message_names_every_function_once():
    x = np.ones(3)

    def answer():
        attnlab.softmax(x)
        attnlab.softmax(x)
        torch.softmax(torch.ones(3), 0)

    with forbidden(["attnlab.softmax", "torch.softmax"]) as calls:
        answer()
    text = message(calls)
    assert calls.names == ["attnlab.softmax", "torch.softmax"]
    assert "`attnlab.softmax`, `torch.softmax`" in text and "write it yourself" in text


# ---- through a spec: check() in the kernel, and the grader's evaluation -------------------------
@exercise("99.41", passed="a softmax written by hand", forbid=("attnlab.softmax", "torch.softmax"))
def _spec(rng):
    for case in range(3):
        x = rng.normal(size=(2, 5)) * 3
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        yield Case((x,), e / e.sum(axis=-1, keepdims=True), on=f"case {case}")


def _by_hand(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_check_passes_an_answer_written_by_hand(capsys):
    assert check("99.41", _by_hand)
    assert "passed" in capsys.readouterr().out


def test_check_refuses_the_library_function_even_though_it_is_right(capsys):
    assert not check("99.41", attnlab.softmax)
    out = capsys.readouterr().out
    assert "`attnlab.softmax`" in out and "unavailable here" in out


def test_check_names_the_forbidden_call_when_the_answer_then_crashes(capsys):
    def answer(x):
        attnlab.softmax(x)
        raise RuntimeError("later")

    assert not check("99.41", answer)
    assert "`attnlab.softmax`" in capsys.readouterr().out


def test_the_graders_evaluation_applies_the_same_rule():
    x = np.arange(6.0).reshape(2, 3)
    ok = capture._evaluate_one(_by_hand, "call", 5.0, [(x,)], ("attnlab.softmax",))
    assert list(ok[0]) == ["ok"]
    np.testing.assert_allclose(ok[0]["ok"], _by_hand(x))
    refused = capture._evaluate_one(attnlab.softmax, "call", 5.0, [(x,)], ("attnlab.softmax",))
    assert list(refused[0]) == ["error"] and "`attnlab.softmax`" in refused[0]["error"]
    # without a forbid list (an older grader's request) the same answer is just called
    plain = capture._evaluate_one(attnlab.softmax, "call", 5.0, [(x,)])
    assert list(plain[0]) == ["ok"]


def test_spec_refuses_a_forbid_that_is_not_a_tuple_of_dotted_names():
    for bad in ["attnlab.softmax", ("softmax",), [("attnlab.softmax")]]:
        with pytest.raises(ValueError, match="forbid"):
            exercise("99.42", passed="x", forbid=bad)(lambda rng: iter(()))


# ---- PyTorch operators: torch.ops.aten.* is another door to the same kernels -------------------
@pytest.mark.parametrize(
    "call",
    [
        lambda t: torch.ops.aten._softmax(t, -1, False),  # the packet
        lambda t: torch.ops.aten._softmax.default(t, -1, False),  # one overload
        lambda t: torch.ops.aten._softmax.default._op(t, -1, False),  # its built-in, directly
    ],
)
def test_operator_is_seen_through_every_door(call):
    t = torch.randn(3, 4)
    assert _names(lambda: call(t), ["torch.ops.aten._softmax"]) == ["torch.ops.aten._softmax"]
    # forbidding one overload still catches a call through the packet (same qualified name)
    assert _names(lambda: call(t), ["torch.ops.aten._softmax.default"]) != []
    # and another operator is not confused with it
    assert _names(lambda: call(t), ["torch.ops.aten.log_softmax"]) == []


def test_message_uses_the_plural_for_several_calls():
    with forbidden(["attnlab.softmax", "torch.softmax"]) as calls:
        attnlab.softmax(np.ones(3))
    assert "which is unavailable" in message(calls)
    with forbidden(["attnlab.softmax", "torch.softmax"]) as calls:
        attnlab.softmax(np.ones(3))
        torch.softmax(torch.ones(3), 0)
    assert "which are unavailable" in message(calls)


def test_the_chapters_softmax_and_attention_exercises_refuse_the_aten_operators(capsys):
    # reported by the exercise author: both passed before the operators were forbidden
    def aten_softmax(x):
        return torch.ops.aten._softmax(torch.from_numpy(np.asarray(x, float)), -1, False).numpy()

    assert not check("02.2", aten_softmax)
    assert "torch.ops.aten._softmax" in capsys.readouterr().out

    def aten_attention(*args):
        tensors = [torch.from_numpy(np.asarray(a)) for a in args]
        raise_if_used = torch.ops.aten.scaled_dot_product_attention
        return raise_if_used(*tensors[:3]).numpy()

    assert not check("03.5", aten_attention)
    assert "torch.ops.aten.scaled_dot_product_attention" in capsys.readouterr().out


# ---- the exercise module itself: a check's own reference is not an answer ---------------------
def test_a_forbidden_module_covers_every_function_defined_in_it():
    from attnlab.exercises import ch07

    q, k, v = np.ones((1, 2, 3)), np.ones((1, 4, 2)), np.ones((1, 4, 1))
    args = (q, k, v, np.ones((3, 2)), np.array([3]))
    seen = _names(lambda: ch07.general_rows(*args), ["attnlab.exercises.ch07"])
    assert seen == ["attnlab.exercises.ch07.general_rows"]  # its comprehension: one name
    # what the module only imports (attnlab.softmax) is not covered, nor is numpy
    assert _names(lambda: attnlab.softmax(np.ones(3)), ["attnlab.exercises.ch07"]) == []


def test_every_chapter_spec_forbids_its_own_module_and_a_test_spec_does_not():
    from attnlab.course.spec import get_spec, spec_ids
    from attnlab.exercises import exercise_ids

    exercise_ids()  # loads the chapter modules
    chapter_specs = [get_spec(i) for i in spec_ids()
                     if get_spec(i).cases.__module__.startswith("attnlab.exercises.")]
    assert len(chapter_specs) > 20
    for spec in chapter_specs:
        assert spec.cases.__module__ in spec.forbid, spec.exercise_id
    assert __name__ not in get_spec("99.41").forbid  # answers written in this file stay usable


def test_an_answer_that_calls_the_checks_reference_fails(capsys):
    from attnlab.exercises import ch08

    assert not check("08.2", ch08.poly_pairwise)
    out = capsys.readouterr().out
    assert "`attnlab.exercises.ch08.poly_pairwise`" in out and "unavailable" in out


def test_a_module_name_forbids_every_function_defined_in_it():
    # s6-01: 01.2 passed by calling the check's own reference, ch01._compose_kernels
    from attnlab.exercises import ch01

    k = np.ones((3, 1, 1))
    seen = _names(lambda: ch01._compose_kernels(k, k, 1), ["attnlab.exercises.ch01"])
    assert seen == ["attnlab.exercises.ch01._compose_kernels"]
    # what the module only imports (local_context comes from attnlab.conv) stays allowed
    x = np.ones((5, 1))
    assert _names(lambda: ch01.local_context(x, k), ["attnlab.exercises.ch01"]) == []
