"""Tests of attnlab.luong: Luong attention in the column convention.

References: float64 loops over every (key, query) pair written from the formulas of Luong et
al. and Bahdanau et al., the row-convention attention of the earlier chapters, and
torch.nn.functional.scaled_dot_product_attention.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab import (
    column_to_row,
    luong_attention,
    luong_scores,
    row_to_column,
    scaled_dot_product_attention,
)

# ---- float64 references, one (key, query) pair at a time --------------------------------


def loop_scores(q, k, score, w=None, v_a=None):
    """scores[i, j] for key column i and query column j, written straight from the formulas."""
    m, n = k.shape[1], q.shape[1]
    out = np.zeros((m, n))
    for i in range(m):
        for j in range(n):
            qj, ki = q[:, j], k[:, i]
            if score == "dot":
                out[i, j] = sum(ki[a] * qj[a] for a in range(len(qj)))
            elif score == "scaled":
                out[i, j] = sum(ki[a] * qj[a] for a in range(len(qj))) / math.sqrt(len(ki))
            elif score == "general":  # k_iᵀ W q_j
                out[i, j] = sum(
                    ki[a] * w[a, b] * qj[b] for a in range(w.shape[0]) for b in range(w.shape[1])
                )
            elif score == "concat":  # v_aᵀ tanh(W_a [q_j; k_i])
                stacked = list(qj) + list(ki)
                out[i, j] = sum(
                    v_a[r] * math.tanh(sum(w[r, c] * stacked[c] for c in range(len(stacked))))
                    for r in range(w.shape[0])
                )
    return out


def loop_attention(q, k, v, scores):
    """V Softmax(scores) with a column softmax written with math.exp."""
    m, n = scores.shape
    weights = np.zeros((m, n))
    for j in range(n):
        top = max(scores[:, j])
        e = [math.exp(scores[i, j] - top) for i in range(m)]
        weights[:, j] = [x / sum(e) for x in e]
    out = np.zeros((v.shape[0], n))
    for j in range(n):
        for i in range(m):
            out[:, j] += weights[i, j] * v[:, i]
    return out, weights


def random_case(rng, d_q=3, d_k=3, d_v=2, n=4, m=5, d_a=6):
    return {
        "q": rng.normal(size=(d_q, n)),
        "k": rng.normal(size=(d_k, m)),
        "v": rng.normal(size=(d_v, m)),
        "w_general": rng.normal(size=(d_k, d_q)),
        "w_concat": rng.normal(size=(d_a, d_q + d_k)),
        "v_a": rng.normal(size=d_a),
    }


def params(case, score):
    if score == "general":
        return {"w": case["w_general"]}
    if score == "concat":
        return {"w": case["w_concat"], "v_a": case["v_a"]}
    return {}


# ---- each score against the hand computation ----------------------------------------------


@pytest.mark.parametrize("score", ["dot", "scaled", "general", "concat"])
def test_each_score_matches_float64_loops(score):
    rng = np.random.default_rng(1)
    case = random_case(rng)
    expected_scores = loop_scores(case["q"], case["k"], score, **params(case, score))
    np.testing.assert_allclose(
        luong_scores(case["q"], case["k"], score, **params(case, score)),
        expected_scores,
        rtol=1e-12,
        atol=1e-12,
    )
    out, weights = luong_attention(case["q"], case["k"], case["v"], score, **params(case, score))
    ref_out, ref_weights = loop_attention(case["q"], case["k"], case["v"], expected_scores)
    assert out.shape == (2, 4) and weights.shape == (5, 4)
    np.testing.assert_allclose(weights, ref_weights, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(out, ref_out, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("score", ["general", "concat"])
def test_queries_and_keys_of_different_sizes(score):
    rng = np.random.default_rng(2)
    case = random_case(rng, d_q=2, d_k=4)
    out, weights = luong_attention(case["q"], case["k"], case["v"], score, **params(case, score))
    expected = loop_scores(case["q"], case["k"], score, **params(case, score))
    ref_out, ref_weights = loop_attention(case["q"], case["k"], case["v"], expected)
    np.testing.assert_allclose(weights, ref_weights, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(out, ref_out, rtol=1e-12, atol=1e-14)


def test_hand_worked_example():
    # One query q = (ln 3, 0) against keys e1, e2: dot scores (ln 3, 0), weights (3/4, 1/4).
    q = np.array([[math.log(3.0)], [0.0]])
    k = np.eye(2)
    v = np.array([[10.0, 20.0], [1.0, -1.0]])
    out, weights = luong_attention(q, k, v, "dot")
    np.testing.assert_allclose(weights, [[0.75], [0.25]])
    np.testing.assert_allclose(out, [[12.5], [0.5]])


# ---- column convention == row convention, transposed --------------------------------------


@settings(max_examples=30, deadline=None)
@given(
    d=st.integers(1, 5),
    n=st.integers(1, 6),
    m=st.integers(1, 6),
    d_v=st.integers(1, 4),
    seed=st.integers(0, 2**16),
)
def test_column_convention_is_row_convention_transposed(d, n, m, d_v, seed):
    rng = np.random.default_rng(seed)
    q, k, v = rng.normal(size=(d, n)), rng.normal(size=(d, m)), rng.normal(size=(d_v, m))
    out, weights = luong_attention(q, k, v, "scaled")
    # Row convention written independently: softmax(Q Kᵀ / sqrt(d)) V with rows as tokens.
    logits = q.T @ k / math.sqrt(d)
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    w_rows = e / e.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(weights, w_rows.T, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(out, (w_rows @ v.T).T, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(weights.sum(axis=0), np.ones(n), rtol=1e-12)


def test_conversion_helpers_round_trip_through_row_attention():
    rng = np.random.default_rng(3)
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(3, 6)), rng.normal(size=(2, 6))
    q_r, k_r, v_r = column_to_row(q, k, v)
    assert q_r.shape == (4, 3) and k_r.shape == (6, 3) and v_r.shape == (6, 2)
    out_c, w_c = row_to_column(*scaled_dot_product_attention(q_r, k_r, v_r, scale=1.0))
    out, weights = luong_attention(q, k, v, "dot")
    np.testing.assert_allclose(out_c, out, rtol=1e-12)
    np.testing.assert_allclose(w_c, weights, rtol=1e-12)


def test_scaled_matches_torch_builtin():
    rng = np.random.default_rng(4)
    q, k, v = rng.normal(size=(8, 5)), rng.normal(size=(8, 7)), rng.normal(size=(3, 7))
    out, _ = luong_attention(q, k, v, "scaled")
    ref = torch.nn.functional.scaled_dot_product_attention(
        torch.from_numpy(q.T), torch.from_numpy(k.T), torch.from_numpy(v.T)
    )
    np.testing.assert_allclose(out, ref.numpy().T, rtol=1e-10, atol=1e-12)


# ---- general: which side W sits on ----------------------------------------------------------


def test_general_is_luongs_form_with_the_transposed_matrix():
    # Luong writes h_tᵀ W_a h̄_s (query on the left, W_a of shape (d_q, d_k));
    # the column convention writes k_iᵀ W q_j, so W = W_aᵀ.
    rng = np.random.default_rng(5)
    d_q, d_k = 2, 3
    q, k = rng.normal(size=(d_q, 4)), rng.normal(size=(d_k, 5))
    w_a = rng.normal(size=(d_q, d_k))
    luong = np.array([[q[:, j] @ w_a @ k[:, i] for j in range(4)] for i in range(5)])
    np.testing.assert_allclose(luong_scores(q, k, "general", w=w_a.T), luong, rtol=1e-12)
    with pytest.raises(ValueError, match=r"\(d_k, d_q\) = \(3, 2\)"):
        luong_scores(q, k, "general", w=w_a)  # Luong's W_a itself has the wrong shape here


def test_general_with_identity_is_dot():
    rng = np.random.default_rng(6)
    q, k, v = rng.normal(size=(4, 3)), rng.normal(size=(4, 5)), rng.normal(size=(2, 5))
    for a, b in zip(
        luong_attention(q, k, v, "general", w=np.eye(4)),
        luong_attention(q, k, v, "dot"),
        strict=True,
    ):
        np.testing.assert_allclose(a, b, rtol=1e-12)


# ---- concat == Bahdanau with split weights ---------------------------------------------------


def test_concat_equals_bahdanau_with_split_weights():
    rng = np.random.default_rng(7)
    d_q, d_k, d_a = 3, 4, 5
    q, k, v = rng.normal(size=(d_q, 2)), rng.normal(size=(d_k, 6)), rng.normal(size=(3, 6))
    w_q, u_k, v_a = rng.normal(size=(d_a, d_q)), rng.normal(size=(d_a, d_k)), rng.normal(size=d_a)
    # Bahdanau: e_ij = v_aᵀ tanh(W s_{i-1} + U h_j), written per pair.
    bahdanau = np.array(
        [[v_a @ np.tanh(w_q @ q[:, j] + u_k @ k[:, i]) for j in range(2)] for i in range(6)]
    )
    w_a = np.concatenate([w_q, u_k], axis=1)  # W_a = [W, U], shape (d_a, d_q + d_k)
    np.testing.assert_allclose(luong_scores(q, k, "concat", w=w_a, v_a=v_a), bahdanau, rtol=1e-12)
    _, weights = luong_attention(q, k, v, "concat", w=w_a, v_a=v_a)
    e = np.exp(bahdanau - bahdanau.max(axis=0))
    np.testing.assert_allclose(weights, e / e.sum(axis=0), rtol=1e-12)


# ---- dtype, extreme values ------------------------------------------------------------------


@pytest.mark.parametrize("score", ["dot", "scaled", "general", "concat"])
def test_float32_stays_float32(score):
    rng = np.random.default_rng(8)
    case = {key: val.astype(np.float32) for key, val in random_case(rng).items()}
    out, weights = luong_attention(case["q"], case["k"], case["v"], score, **params(case, score))
    assert out.dtype == np.float32 and weights.dtype == np.float32


def test_large_logits_stay_finite():
    q = np.array([[1000.0], [0.0]])
    k = np.array([[1.0, -1.0], [0.0, 0.0]])
    out, weights = luong_attention(q, k, np.array([[1.0, 2.0]]), "dot")
    np.testing.assert_allclose(weights, [[1.0], [0.0]])
    np.testing.assert_allclose(out, [[1.0]])


# ---- bad input ------------------------------------------------------------------------------


def test_unknown_score_is_named():
    q = np.zeros((2, 1))
    with pytest.raises(ValueError, match="unknown score 'additive'"):
        luong_attention(q, q, q, "additive")
    with pytest.raises(ValueError, match="unknown score 'location'"):
        luong_scores(q, q, "location")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"q": np.zeros((3, 2)), "k": np.zeros((4, 5)), "v": np.zeros((1, 5))},
            r"\(3, 2\).*\(4, 5\)",
        ),
        (
            {"q": np.zeros((3, 2)), "k": np.zeros((3, 5)), "v": np.zeros((1, 4))},
            r"\(3, 5\).*\(1, 4\)",
        ),
        ({"q": np.zeros(3), "k": np.zeros((3, 5)), "v": np.zeros((1, 5))}, r"q must have shape"),
        ({"q": np.zeros((3, 0)), "k": np.zeros((3, 5)), "v": np.zeros((1, 5))}, "empty"),
        ({"q": np.full((3, 1), np.nan), "k": np.zeros((3, 5)), "v": np.zeros((1, 5))}, "NaN"),
    ],
)
def test_mismatched_shapes_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        luong_attention(**kwargs, score="dot")


def test_parameter_errors_name_the_shapes():
    q, k, v = np.zeros((2, 3)), np.zeros((4, 5)), np.zeros((1, 5))
    with pytest.raises(ValueError, match="needs the weight matrix w"):
        luong_attention(q, k, v, "general")
    with pytest.raises(ValueError, match=r"\(d_k, d_q\) = \(4, 2\).*\(2, 4\)"):
        luong_attention(q, k, v, "general", w=np.zeros((2, 4)))
    with pytest.raises(ValueError, match=r"\(d_a, 6\).*\(3, 5\)"):
        luong_attention(q, k, v, "concat", w=np.zeros((3, 5)), v_a=np.zeros(3))
    with pytest.raises(ValueError, match=r"v_a must have shape \(d_a,\) = \(3,\)"):
        luong_attention(q, k, v, "concat", w=np.zeros((3, 6)), v_a=np.zeros(4))
    with pytest.raises(ValueError, match="needs the vector v_a"):
        luong_attention(q, k, v, "concat", w=np.zeros((3, 6)))
    with pytest.raises(ValueError, match="has no parameters"):
        luong_attention(np.zeros((4, 3)), k, v, "dot", w=np.eye(4))
    with pytest.raises(ValueError, match=r"rows"):
        row_to_column(np.zeros((3, 2)), np.zeros((4, 5)))


def test_scores_reject_non_finite_input():
    q, k = np.zeros((2, 3)), np.zeros((2, 4))
    k[1, 2] = np.inf
    with pytest.raises(ValueError, match="k contains NaN or infinite"):
        luong_scores(q, k, "dot")
