"""Chapter 08's checks pass honest answers and fail the partly right ones on every draw."""

from __future__ import annotations

import numpy as np
import pytest
from _partly_right import first_failure, seeds_passed, verdict

import attnlab


def b_from_query_key(w_q, w_k):
    return w_q @ w_k.T / np.sqrt(w_q.shape[1])


def test_08_1_passes_the_right_scale():
    assert verdict("08.1", b_from_query_key)[0]


def test_08_1_names_the_model_width_when_that_is_the_mistake():
    by_model_width = lambda w_q, w_k: w_q @ w_k.T / np.sqrt(w_q.shape[0])  # noqa: E731
    for seed in range(200):
        message = first_failure("08.1", by_model_width, seed)
        assert message is not None and "√M" in message, (seed, message)
        assert "is missing the 1/√d_k scale" not in message


@pytest.mark.parametrize(
    "answer, named",
    [
        (lambda w_q, w_k: w_q @ w_k.T, "scale"),
        (lambda w_q, w_k: w_q @ w_k.T / w_q.shape[1], "square root"),
        (lambda w_q, w_k: w_k @ w_q.T / np.sqrt(w_q.shape[1]), "transposed"),
    ],
)
def test_08_1_other_mistakes(answer, named):
    assert seeds_passed("08.1", answer, range(100)) == []
    assert named in first_failure("08.1", answer, 0)


def _terms(y, b, coeffs, powers):
    eps = np.zeros((y.shape[0], y.shape[0]))
    for power, a_l in zip(powers, coeffs, strict=False):
        eps += a_l * (y**power @ b @ (y**power).T)
    return eps


def poly_logits(y, b, coeffs):
    return _terms(y, b, coeffs, range(1, len(coeffs) + 1))


def test_08_2_passes_the_factorisation_and_refuses_the_library():
    assert verdict("08.2", poly_logits)[0]
    ok, message = verdict("08.2", lambda y, b, c: attnlab.gam_logits(y, b, f="poly", coeffs=c)[0])
    assert not ok and "gam_logits" in message and "unavailable" in message


def test_08_2_fails_an_answer_right_only_for_degree_at_most_2():
    two_terms = lambda y, b, c: _terms(y, b, c[:2], (1, 2))  # noqa: E731
    assert seeds_passed("08.2", two_terms, range(3000)) == []
    square_for_high = lambda y, b, c: _terms(y, b, c, [1, 2] + [2] * 8)  # noqa: E731
    assert seeds_passed("08.2", square_for_high, range(300)) == []


def test_08_2_names_powers_of_the_bilinear_logits():
    def powers_of_logits(y, b, coeffs):
        e = y @ b @ y.T
        return sum(a * e**p for p, a in enumerate(coeffs, start=1))

    for seed in range(20):
        assert "Y B Y^T" in first_failure("08.2", powers_of_logits, seed)
    from_zero = lambda y, b, c: _terms(y, b, c, range(len(c)))  # noqa: E731
    assert "start at 0" in first_failure("08.2", from_zero, 0)


def test_08_2_reference_is_the_library_on_every_case():
    from attnlab.course.spec import get_spec

    for case in get_spec("08.2").cases(np.random.default_rng(1)):
        y, b, coeffs = case.args
        assert np.allclose(case.expected, attnlab.gam_logits(y, b, f="poly", coeffs=coeffs)[0],
                           rtol=1e-10, atol=1e-10)
