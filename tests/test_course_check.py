"""Adversarial tests of ``attnlab.exercises.check``: every cheat fails, common slips are named.

Each cheat below used to pass (or would pass a naive check): an answer that mutates its
inputs, objects whose comparisons always say "equal", an answer that reads the expected
value from the caller's frames, an answer that never returns. The hints are the mistakes
the reviews list (reshape without transpose, plain ``np.log`` on zeros, ``log2``,
``finfo.min`` masking, ``a − b`` offsets, untransposed torch weights).
"""

from __future__ import annotations

import sys
import time

import numpy as np
import pytest

from attnlab.course.check import run_spec
from attnlab.course.spec import get_spec
from attnlab.exercises import check, exercise_ids


def _verdict(exercise_id: str, answer, **kwargs) -> tuple[bool, str]:
    exercise_ids()  # load every chapter
    return run_spec(get_spec(exercise_id), answer, **kwargs)


def concat_heads(heads):
    b, h, s, d_v = heads.shape
    return heads.transpose(2, 0, 1, 3).reshape(s, b, h * d_v)


# ---- cheats ---------------------------------------------------------------------------------
def test_an_honest_answer_passes_with_the_unchanged_message(capsys):
    assert check("05.1", concat_heads) is True
    assert capsys.readouterr().out == (
        "Exercise 05.1: passed. entry [t, n] is [head 0 at (n, t), head 1 at (n, t), ...] on 20 "
        "random batches (b = 1, h = 1, s = 1 and b, h, s all different included)\n"
    )


def test_mutating_the_inputs_does_not_move_the_reference():
    def cheat(heads):  # zero the input, return zeros: passes when the reference comes after
        heads[...] = 0.0
        b, h, s, d_v = heads.shape
        return np.zeros((s, b, h * d_v))

    passed, message = _verdict("05.1", cheat)
    assert not passed and "expected" in message


def test_an_object_that_always_compares_equal_is_refused():
    class Liar:
        def __eq__(self, other):
            return True

        def __array__(self, dtype=None, copy=None):
            raise AssertionError("the check must not ask the answer's object for its values")

    passed, message = _verdict("05.1", lambda heads: Liar())
    assert not passed and "expected an array of numbers, got Liar" in message


def test_an_array_subclass_that_lies_in_ufuncs_is_compared_as_plain_data():
    class Lying(np.ndarray):
        def __eq__(self, other):
            return np.True_

        def __array_ufunc__(self, *args, **kwargs):
            return np.True_

    def cheat(heads):
        b, h, s, d_v = heads.shape
        return np.zeros((s, b, h * d_v)).view(Lying)

    passed, _ = _verdict("05.1", cheat)
    assert not passed


def test_an_int_subclass_that_equals_everything_is_refused():
    class Anything(int):
        def __eq__(self, other):
            return True

        __hash__ = int.__hash__

    passed, message = _verdict("10.2", lambda a, b: Anything(0))
    assert not passed and "got Anything" in message


def _arrays_in(value, depth=0):
    """Every ndarray reachable from ``value`` through containers and instance dicts."""
    if depth > 4:
        return
    if isinstance(value, np.ndarray):
        yield value
    elif isinstance(value, (list, tuple, set)):
        for item in value:
            yield from _arrays_in(item, depth + 1)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _arrays_in(item, depth + 1)
    elif hasattr(value, "__dict__") and not isinstance(value, type):
        yield from _arrays_in(vars(value), depth + 1)
    elif hasattr(value, "__dataclass_fields__"):
        for name in value.__dataclass_fields__:
            yield from _arrays_in(getattr(value, name), depth + 1)


def test_the_expected_value_is_not_reachable_from_the_callers_frames():
    seen = []

    def cheat(heads):
        b, h, s, d_v = heads.shape
        frame = sys._getframe(1)
        while frame is not None:
            for value in list(frame.f_locals.values()):
                for arr in _arrays_in(value):
                    seen.append(arr.shape)
                    if arr.shape == (s, b, h * d_v):
                        return arr
            frame = frame.f_back
        return np.zeros((s, b, h * d_v))

    passed, _ = _verdict("05.1", cheat)
    assert not passed
    assert seen, "the cheat must at least have found its own inputs"


def test_a_hanging_answer_is_stopped_with_a_clear_message():
    def hang(heads):
        while True:
            pass

    started = time.monotonic()
    passed, message = _verdict("05.1", hang, timeout=0.5)
    assert not passed and "took longer than 0.5 s" in message
    assert time.monotonic() - started < 5


def test_an_answer_that_swallows_exceptions_is_still_stopped():
    def hang(heads):
        while True:
            try:
                time.sleep(0.01)
            except Exception:
                pass

    passed, message = _verdict("05.1", hang, timeout=0.3)
    assert not passed and "took longer" in message


def test_exiting_or_returning_none_fails_without_killing_the_kernel():
    passed, message = _verdict("05.1", lambda heads: sys.exit(0))
    assert not passed and "SystemExit" in message
    passed, message = _verdict("05.1", lambda heads: None)
    assert not passed and "returned None" in message


def test_check_outside_the_main_thread_still_works():
    import threading

    results = []
    thread = threading.Thread(target=lambda: results.append(check("05.1", concat_heads)))
    thread.start()
    thread.join()
    assert results == [True]


# ---- common mistakes are named --------------------------------------------------------------
def test_05_1_reshape_without_transpose_is_named():
    passed, message = _verdict("05.1", lambda st: st.reshape(st.shape[2], st.shape[0], -1))
    assert not passed and "stack = arange(24)" in message and "transpose" in message


def test_04_3_finfo_min_masking_is_named():
    def finfo_fill(logits, mask):
        z = np.where(mask, logits, np.finfo(logits.dtype).min)
        e = np.exp(z - z.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    passed, message = _verdict("04.3", finfo_fill)
    assert not passed and "finfo.min" in message and "uniform" in message


def test_01_2_offsets_paired_as_a_minus_b_are_named():
    def compose_minus(k1, k2):
        c1, c2 = len(k1) // 2, len(k2) // 2
        out = np.zeros((2 * (c1 + c2) + 1, k1.shape[1], k2.shape[2]))
        for a in range(-c1, c1 + 1):
            for b in range(-c2, c2 + 1):
                out[a - b + c1 + c2] += k1[a + c1] @ k2[b + c2]
        return out

    passed, message = _verdict("01.2", compose_minus)
    assert not passed and "a − b" in message and message.startswith("on k1 = [1, 2, 3]")


def test_03_2_upper_triangle_is_named():
    passed, message = _verdict("03.2", lambda s_q, s_k: np.triu(np.ones((s_q, s_k), dtype=bool)))
    assert not passed and "np.tril, not np.triu" in message


@pytest.mark.parametrize("exercise_id", ["02.2", "04.3", "07.2"])
def test_overflow_cases_come_first(exercise_id):
    def naive_softmax(*args):
        raise ZeroDivisionError("first case")

    passed, message = _verdict(exercise_id, naive_softmax)
    assert not passed and "ZeroDivisionError" in message


# ---- the other recognised mistakes, one wrong answer each ------------------------------------
def _row_softmax(z):  # stable, but along the rows: the mistake 07.2 names
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _split_without_scale(b, d_k):  # W_Q W_K^T = B: the 1/√d_k inside B forgotten
    u, s, vt = np.linalg.svd(b)
    keep = min(d_k, len(b))
    w_q, w_k = np.zeros((len(b), d_k)), np.zeros((len(b), d_k))
    w_q[:, :keep], w_k[:, :keep] = u[:, :keep] * np.sqrt(s[:keep]), vt[:keep].T * np.sqrt(s[:keep])
    return w_q, w_k


def _triu_strict(s_q, s_k):
    i, j = np.indices((s_q, s_k))
    return i + s_k - s_q > j


WRONG_ANSWERS = {
    "03.2": (_triu_strict, "the diagonal must be True"),
    "03.3": (
        lambda lengths, s: (np.arange(s)[None, :] > s - lengths[:, None])[:, None, :],
        "use >=, not >",
    ),
    "06.1": (
        lambda image, p: image.reshape(-1, p * p * image.shape[2]),
        "strips of pixel rows",
    ),
    "07.2": (  # by hand: the library's softmax is unavailable in 07.2
        lambda q, w: _row_softmax(w @ q),
        "each column (one query) must sum to 1",
    ),
    "08.1": (lambda b, d_k: _split_without_scale(b, d_k), "B includes the 1/√d_k"),
}


@pytest.mark.parametrize("exercise_id", sorted(WRONG_ANSWERS))
def test_other_common_mistakes_are_named(exercise_id):
    answer, phrase = WRONG_ANSWERS[exercise_id]
    for _ in range(5):  # random cases: the hint needs a case where the mistake shows
        passed, message = _verdict(exercise_id, answer)
        assert not passed
        if phrase in message:
            return
    raise AssertionError(f"{exercise_id}: {message}")


def test_every_passing_message_stored_in_a_chapter_is_its_specs_message():
    # The chapters' stored outputs print "Exercise NN.k: passed. <message>": a changed
    # message would change a notebook's checked output.
    import json
    import re
    from pathlib import Path

    exercise_ids()
    stored = {}
    for path in sorted((Path(__file__).parents[1] / "notebooks").glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            for output in cell.get("outputs", []):
                for line in "".join(output.get("text", "")).splitlines():
                    match = re.fullmatch(r"Exercise (\d\d\.\d+): passed\. (.*)", line)
                    if match:
                        stored[match[1]] = match[2]
    assert len(stored) >= 20
    from attnlab.exercises._registry import _CHECKS

    for exercise_id, message in stored.items():
        if get_spec(exercise_id) is None:  # a check registered with register(): no spec,
            assert exercise_id in _CHECKS, exercise_id  # and its message is its own
            continue
        assert get_spec(exercise_id).passed == message, exercise_id


# ---- forked evaluation (used while grading) --------------------------------------------------
def test_run_forked_reports_values_errors_hangs_and_crashes():
    import faulthandler
    import os
    import signal

    from attnlab.course.forked import run_forked

    assert run_forked(lambda: [1, "two"], 10) == ("ok", [1, "two"])
    kind, text = run_forked(lambda: 1 / 0, 10)
    assert kind == "error" and "ZeroDivisionError" in text

    def blocked_hang():
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        while True:
            pass

    started = time.monotonic()
    assert run_forked(blocked_hang, 0.5) == ("timeout", None)
    assert time.monotonic() - started < 5

    def segfault():
        faulthandler.disable()  # pytest's handler would print a scary traceback for the child
        os.kill(os.getpid(), signal.SIGSEGV)

    assert run_forked(segfault, 10) == ("crash", signal.SIGSEGV)


# ---- the "bounded" adapter: an answer's peak memory, measured with tracemalloc -----------------
def test_bounded_adapter_passes_a_lean_answer_and_refuses_a_greedy_one():
    import tracemalloc

    from attnlab.course.adapters import adapt, traced_peak
    from attnlab.course.spec import ExerciseFailure

    x = np.ones(1000)
    lean = adapt("bounded", lambda v: v * 2, (x, 64 * 1024))  # one 8 kB array
    np.testing.assert_array_equal(lean, 2 * x)
    greedy = lambda v: np.outer(v, v).sum(axis=0)  # noqa: E731 - an 8 MB intermediate
    with pytest.raises(ExerciseFailure, match=r"peaked at 7\.\d+ MiB"):
        adapt("bounded", greedy, (x, 64 * 1024))
    assert not tracemalloc.is_tracing()  # started and stopped by the adapter
    tracemalloc.start()  # a tracing already running is measured from where it stands, kept
    try:
        _ = np.ones(10**6)
        peak, _ = traced_peak(lambda: np.ones(1000))
        assert 8000 <= peak < 20_000 and tracemalloc.is_tracing()
    finally:
        tracemalloc.stop()


def test_bounded_adapter_applies_in_the_graders_evaluation():
    from attnlab.course import capture

    x = np.ones(1000)
    results = capture._evaluate_one(lambda v: np.outer(v, v).sum(axis=0), "bounded", 5.0,
                                    [(x, 10**8), (x, 64 * 1024)])
    assert list(results[0]) == ["ok"] and list(results[1]) == ["error"]
    assert "memory peaked" in results[1]["error"]


def test_a_hint_that_equals_the_right_output_on_a_case_is_not_named_there():
    # Chapter 11's reader: a right mask returned as integers, on a case where the causal part
    # changes nothing (lengths [1]), was told "this is the padding mask alone".
    from attnlab.course.spec import Case, ExerciseFailure, judge

    def boolean_and_close(got, case):
        if np.asarray(got).dtype != bool:
            raise ExerciseFailure(f"on {case.on}: a mask must be boolean")

    right = np.array([[True, False], [True, False]])
    case = Case((), right, on="lengths [1]", judge=boolean_and_close,
                hints={"this is the padding mask alone": right.copy(),
                       "this is the causal mask alone": np.tri(2, dtype=bool)})
    with pytest.raises(ExerciseFailure, match="must be boolean"):
        judge(right.astype(int), case)
    with pytest.raises(ExerciseFailure, match="causal mask alone"):  # a real mistake is named
        judge(np.tri(2, dtype=int), case)
