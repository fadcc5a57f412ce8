"""Tests of attnlab.nn.lookup: chapter 01's trainable attention on the look-up task."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnlab.data import lookup_task
from attnlab.nn.lookup import LookupAttention, relative_error, train_lookup


def naive_weights(x: np.ndarray, w_q: np.ndarray, w_k: np.ndarray) -> np.ndarray:
    """float64 loop over the definition: softmax over p != 0 of (x_0 W_Q)(x_p W_K)^T."""
    n, s, _ = x.shape
    out = np.zeros((n, s))
    for e in range(n):
        q = x[e, 0] @ w_q
        logits = np.array([q @ (x[e, p] @ w_k) for p in range(1, s)])
        z = np.exp(logits - logits.max())
        out[e, 1:] = z / z.sum()
    return out


def key_match_model(beta: float, n_keys: int = 6) -> LookupAttention:
    """W_Q = beta * E, W_K = E with E the key block of the identity: logits beta key_0 . key_p."""
    model = LookupAttention(d=n_keys + 1, d_k=n_keys)
    block = torch.zeros(n_keys + 1, n_keys, dtype=torch.float64)
    block[:n_keys] = torch.eye(n_keys, dtype=torch.float64)
    with torch.no_grad():
        model.w_q.copy_(beta * block)
        model.w_k.copy_(block)
    return model


def test_weights_match_the_definition_and_exclude_token_zero():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(5, 6, 4))
    model = LookupAttention(d=4, d_k=3, seed=2, init_std=1.0)
    pred, weights = model(x)
    w = weights.detach().numpy()
    reference = naive_weights(x, model.w_q.detach().numpy(), model.w_k.detach().numpy())
    assert np.allclose(w, reference, rtol=0, atol=1e-12)
    assert np.all(w[:, 0] == 0) and np.allclose(w.sum(axis=1), 1.0)
    assert np.allclose(pred.detach().numpy(), (reference * x[:, :, -1]).sum(axis=1), atol=1e-12)
    assert np.allclose(model.w_qk(), model.w_q.detach().numpy() @ model.w_k.detach().numpy().T)


def test_value_index_selects_the_value_column():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(3, 4, 5))
    model = LookupAttention(d=5, d_k=2, value_index=2, init_std=1.0)
    pred, weights = model(x)
    expected = (weights.detach().numpy() * x[:, :, 2]).sum(axis=1)
    assert np.allclose(pred.detach().numpy(), expected, atol=1e-12)


def test_the_hand_written_key_match_solves_the_task():
    """The chapter's closed form: with logits beta key_0 . key_p the error is about 6 e^-beta."""
    x, y = lookup_task(500, seed=3)
    pred, _ = key_match_model(20.0)(x)
    assert relative_error(pred, y) < 1e-6
    pred_flat, weights = key_match_model(0.0)(x)  # beta = 0: uniform over the 7 other tokens
    assert np.allclose(weights.detach().numpy()[:, 1:], 1 / 7)
    assert abs(relative_error(pred_flat, y) - 6 / 7) < 0.1  # (1 - 1/7)^2 + 6/49 = 6/7


def test_training_drives_the_error_from_above_five_sixths_to_near_zero():
    x, y = lookup_task(1000, seed=1)
    x_test, y_test = lookup_task(500, seed=2)
    model = LookupAttention(d=7, d_k=6, seed=0)
    history = train_lookup(model, x, y, steps=80, lr=0.05)
    assert len(history) == 81
    assert history[0] > 5 / 6 - 0.05  # nearly uniform weights at the start: about 6/7
    with torch.no_grad():
        test_error = relative_error(model(x_test)[0], y_test)
    assert history[-1] < 0.01 and test_error < 0.01
    # what it learned: each key prefers itself, by a clear margin, in W_Q W_K^T
    block = model.w_qk()[:6, :6]
    off = block - np.diag(np.diag(block)) - np.eye(6) * 1e9
    assert np.all(np.diag(block) - off.max(axis=1) > 2.0)


def test_training_is_deterministic_and_leaves_the_thread_count_alone():
    x, y = lookup_task(200, seed=4)
    # Not 1, the count training sets: from 1, a count it failed to give back would pass. (Under
    # pytest-xdist a worker may run on one thread; tests/conftest.py restores the count after.)
    torch.set_num_threads(2)
    threads = torch.get_num_threads()
    runs = []
    for _ in range(2):
        model = LookupAttention(d=7, d_k=6, seed=5)
        runs.append((train_lookup(model, x, y, steps=15, lr=0.05), model.w_qk()))
    assert runs[0][0] == runs[1][0] and np.array_equal(runs[0][1], runs[1][1])
    assert torch.get_num_threads() == threads
    other = LookupAttention(d=7, d_k=6, seed=6)
    assert not np.array_equal(other.w_qk(), LookupAttention(d=7, d_k=6, seed=5).w_qk())


def test_relative_error_closed_forms_and_errors():
    assert relative_error([0.0, 0.0], [1.0, -1.0]) == 1.0
    assert relative_error(torch.tensor([1.0, 3.0]), [1.0, 3.0]) == 0.0
    with pytest.raises(ValueError, match="shape"):
        relative_error([1.0, 2.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="two different values"):
        relative_error([1.0, 2.0], [2.0, 2.0])


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"d": 0, "d_k": 2}, ValueError, "d and d_k"),
        ({"d": 3, "d_k": True}, TypeError, "d_k"),
        ({"d": 3, "d_k": 2.0}, TypeError, "d_k"),
        ({"d": 3, "d_k": 2, "value_index": 3}, ValueError, "value_index"),
        ({"d": 3, "d_k": 2, "init_std": 0.0}, ValueError, "init_std"),
    ],
)
def test_model_rejects_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        LookupAttention(**kwargs)


@pytest.mark.parametrize(
    ("x", "match"),
    [
        (np.ones((4, 7)), r"\(n, s, d\)"),  # one example without the batch axis
        (np.ones((4, 1, 7)), "s >= 2"),  # nothing to attend to
        (np.ones((4, 5, 6)), "token width 6"),
        (np.full((2, 5, 7), np.nan), "NaN"),
    ],
)
def test_model_rejects_bad_tokens(x, match):
    with pytest.raises(ValueError, match=match):
        LookupAttention(d=7, d_k=6)(x)


def test_model_rejects_non_numbers():
    with pytest.raises(TypeError, match="real numbers"):
        LookupAttention(d=1, d_k=1)(np.array([[["a"], ["b"]]]))


def test_train_rejects_bad_input():
    x, y = lookup_task(20, seed=0)
    model = LookupAttention(d=7, d_k=6)
    with pytest.raises(TypeError, match="LookupAttention"):
        train_lookup(torch.nn.Linear(7, 1), x, y)
    with pytest.raises(TypeError, match="steps"):
        train_lookup(model, x, y, steps=True)
    with pytest.raises(ValueError, match="steps must be a positive integer"):
        train_lookup(model, x, y, steps=0)
    with pytest.raises(ValueError, match="lr must be a positive finite number"):
        train_lookup(model, x, y, lr=-1.0)
    with pytest.raises(ValueError, match="target must have shape"):
        train_lookup(model, x, y[:-1])
    with pytest.raises(ValueError, match="NaN"):
        train_lookup(model, x, np.full(20, np.nan))
    with pytest.raises(ValueError, match="two different values"):
        train_lookup(model, x, np.zeros(20))


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"d": True, "d_k": 2}, TypeError, "d must be an integer"),
        ({"d": 7, "d_k": 2.0}, TypeError, "d_k must be an integer"),
        ({"d": 7, "d_k": 2, "value_index": np.int64(-1)}, None, None),  # numpy integers are fine
        ({"d": 0, "d_k": 2}, ValueError, "positive"),
        ({"d": 7, "d_k": 2, "value_index": 7}, ValueError, "value_index"),
        ({"d": 7, "d_k": 2, "init_std": float("inf")}, ValueError, "init_std"),
        ({"d": 7, "d_k": 2, "init_std": 0.0}, ValueError, "init_std"),
        ({"d": 7, "d_k": 2, "init_std": "0.1"}, TypeError, "init_std"),
    ],
)
def test_lookup_attention_sizes(kwargs, error, message):
    if error is None:
        assert LookupAttention(**kwargs).d == 7
        return
    with pytest.raises(error, match=message):
        LookupAttention(**kwargs)


@pytest.mark.parametrize(
    ("steps", "error"), [(True, TypeError), (2.0, TypeError), ("3", TypeError), (0, ValueError)]
)
def test_train_lookup_refuses_bad_steps(steps, error):
    x, y = lookup_task(20, seed=5)
    with pytest.raises(error, match="steps"):
        train_lookup(LookupAttention(x.shape[-1], 2), x, y, steps=steps, lr=0.05)


@pytest.mark.parametrize(
    ("lr", "error"), [(float("nan"), ValueError), (float("inf"), ValueError), (True, TypeError)]
)
def test_train_lookup_refuses_bad_rates(lr, error):
    x, y = lookup_task(20, seed=5)
    with pytest.raises(error, match="lr"):
        train_lookup(LookupAttention(x.shape[-1], 2), x, y, steps=2, lr=lr)
