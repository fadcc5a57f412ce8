"""Chapter 08's checks pass honest answers and fail the partly right ones on every draw."""

from __future__ import annotations

import numpy as np
import pytest
from _partly_right import first_failure, seeds_passed, verdict

import attnlab


def query_key_from_b(b, d_k):
    u, s, vt = np.linalg.svd(b)
    keep = min(d_k, b.shape[0])
    w_q, w_k = np.zeros((b.shape[0], d_k)), np.zeros((b.shape[0], d_k))
    w_q[:, :keep] = d_k**0.25 * u[:, :keep] * np.sqrt(s[:keep])
    w_k[:, :keep] = d_k**0.25 * vt[:keep].T * np.sqrt(s[:keep])
    return w_q, w_k


def test_08_1_passes_the_split_and_reproduces_standard_attention():
    assert verdict("08.1", query_key_from_b)[0]
    from attnlab.course.spec import get_spec

    rng = np.random.default_rng(5)
    for case in get_spec("08.1").cases(np.random.default_rng(2)):
        b, d_k = case.args
        rank = np.linalg.matrix_rank(b)
        w_q, w_k = query_key_from_b(b, d_k)
        # the reference against Eckart-Young's closed form: the gap is the (d_k+1)-th singular
        # value, zero when rank B <= d_k
        s = np.linalg.svd(b, compute_uv=False)
        gap = np.linalg.norm(case.expected - b, ord=2)
        assert np.isclose(gap, s[d_k] if d_k < len(s) else 0.0, atol=1e-9)
        if rank <= d_k:  # then GAM with B is self-attention with the split
            y, w_v = rng.normal(size=(5, b.shape[0])), rng.normal(size=(b.shape[0], 2))
            z_gam, _ = attnlab.gam_attention(y, b, w_v)
            z_std, _ = attnlab.self_attention(y, w_q, w_k, w_v)
            assert np.allclose(z_gam, z_std, atol=1e-9)


def _without_padding(b, d_k):
    u, s, vt = np.linalg.svd(b)
    return (d_k**0.25 * u[:, :d_k] * np.sqrt(s[:d_k]),
            d_k**0.25 * vt[:d_k].T * np.sqrt(s[:d_k]))


def _exact_only(b, d_k):  # right when rank B <= d_k; otherwise not the closest product
    u, s, vt = query_key_from_b(b, b.shape[0])  # the full split, then the last d_k columns
    return u[:, -d_k:] * (d_k / b.shape[0]) ** 0.25, s[:, -d_k:] * (d_k / b.shape[0]) ** 0.25


@pytest.mark.parametrize(
    "answer, named",
    [
        (lambda b, d_k: tuple(w / d_k**0.25 for w in query_key_from_b(b, d_k)), "includes the"),
        (lambda b, d_k: query_key_from_b(b.T, d_k), "transposed"),
        (_without_padding, "pad with zero columns"),
        (lambda b, d_k: query_key_from_b(b, d_k)[::-1], "transposed"),
    ],
)
def test_08_1_fails_and_names_the_usual_mistakes(answer, named):
    assert seeds_passed("08.1", answer, range(100)) == []
    assert named in first_failure("08.1", answer, 0)


def test_08_1_fails_an_answer_right_only_when_rank_b_is_at_most_d_k():
    def first_columns(b, d_k):  # an exact factorisation only when the rank allows one
        q, r = np.linalg.qr(b)
        keep = min(d_k, b.shape[0])
        w_q, w_k = np.zeros((b.shape[0], d_k)), np.zeros((b.shape[0], d_k))
        w_q[:, :keep] = q[:, :keep] * d_k**0.25
        w_k[:, :keep] = r[:keep].T * d_k**0.25
        return w_q, w_k

    assert seeds_passed("08.1", first_columns, range(100)) == []
    assert "closest" in first_failure("08.1", first_columns, 0)


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


def _pairwise(y, b, coeffs):  # eq. 16 vectorised: the (n, n, M, M) array of every product
    products = np.einsum("ar,bt->abrt", y, y)
    return np.einsum("abrt,rt->ab", sum(a * products**p for p, a in enumerate(coeffs, 1)), b)


def _row_by_row(y, b, coeffs):  # one (n, M, M) slab of products per query row
    out = np.zeros((len(y), len(y)))
    for alpha in range(len(y)):
        products = y[alpha][None, :, None] * y[:, None, :]  # (n, M, M)
        out[alpha] = (sum(a * products**p for p, a in enumerate(coeffs, 1)) * b).sum((1, 2))
    return out


def _per_pair(y, b, coeffs):  # the chapter's gam_logits_pairwise: a Python loop over pairs
    f = lambda x: sum(a * x**p for p, a in enumerate(coeffs, 1))  # noqa: E731
    out = np.zeros((len(y), len(y)))
    for alpha in range(len(y)):
        for beta in range(len(y)):
            out[alpha, beta] = (f(np.outer(y[alpha], y[beta])) * b).sum()
    return out


def test_08_2_fails_answers_that_do_not_factorise():
    # the reviewer's three answers that never factorise: each passed the old check
    from attnlab.course.check import run_spec
    from attnlab.course.spec import get_spec
    from attnlab.exercises import ch08

    assert first_failure("08.2", _pairwise, 0) is not None
    assert "memory peaked" in first_failure("08.2", _pairwise, 0)
    assert "memory peaked" in first_failure("08.2", _row_by_row, 0)
    ok, message = verdict("08.2", ch08.poly_pairwise)
    assert not ok and "`attnlab.exercises.ch08.poly_pairwise`" in message
    # the per-pair loop keeps its memory small; at n = 2000 it runs past the time limit
    ok, message = run_spec(get_spec("08.2"), _per_pair, timeout=8.0)
    assert not ok and "longer than" in message
    # all three agree with the reference where they are affordable: they fail for what they
    # build or how long they take, not for their values
    for case in get_spec("08.2").cases(np.random.default_rng(4)):
        y, b, coeffs, _ = case.args
        if len(y) <= 8:
            for answer in (_pairwise, _row_by_row, _per_pair):
                assert np.allclose(answer(y, b, coeffs), case.expected, atol=1e-8)


def test_08_2_bounds_leave_room_for_honest_variants():
    def stacked(y, b, coeffs):  # the features side by side and a block-diagonal brain
        g = np.hstack([y**p for p in range(1, len(coeffs) + 1)])
        return g @ np.kron(np.diag(coeffs), b) @ g.T

    def einsum_terms(y, b, coeffs):
        return sum(a * np.einsum("ar,rt,bt->ab", y**p, b, y**p, optimize=True)
                   for p, a in enumerate(coeffs, 1))

    def summed_copies(y, b, coeffs):  # no in-place update: a new (n, n) array at every step
        eps = np.zeros((len(y), len(y)))
        for p, a in enumerate(coeffs, 1):
            term = y**p @ b @ (y**p).T
            eps = eps + a * term
        return eps

    def listed(y, b, coeffs):
        return sum([a * (y**p @ b @ (y**p).T) for p, a in enumerate(coeffs, 1)])

    for answer in (poly_logits, stacked, einsum_terms, summed_copies, listed):
        for seed in range(3):
            assert first_failure("08.2", answer, seed) is None, answer.__name__
    import torch

    ok, message = verdict("08.2", lambda y, b, c: sum(
        a * (torch.from_numpy(y) ** p @ torch.from_numpy(b) @ (torch.from_numpy(y) ** p).T)
        for p, a in enumerate(c, 1)).numpy())
    assert not ok and "torch.from_numpy" in message  # tracemalloc cannot see torch's memory


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
        y, b, coeffs, _ = case.args
        assert np.allclose(case.expected, attnlab.gam_logits(y, b, f="poly", coeffs=coeffs)[0],
                           rtol=1e-10, atol=1e-10)


def augmented_brain(w_q, w_k, b_q, b_k):
    return np.block([[w_q @ w_k.T, w_q @ b_k.T], [b_q @ w_k.T, b_q @ b_k.T]]) / np.sqrt(
        w_q.shape[1])


@pytest.mark.parametrize(
    "answer, named",
    [
        (lambda w_q, w_k, b_q, b_k: augmented_brain(w_q, w_k, b_q, b_k) * np.sqrt(w_q.shape[1]),
         "1/√d_k"),
        (lambda w_q, w_k, b_q, b_k: augmented_brain(w_q, w_k, b_q, b_k).T, None),
        (lambda w_q, w_k, b_q, b_k: augmented_brain(w_q, w_k, 0 * b_q, b_k), None),
        (lambda w_q, w_k, b_q, b_k: augmented_brain(w_q, w_k, b_q, b_k)[:-1, :-1], "M + 1"),
    ],
)
def test_08_3_passes_the_augmented_brain_and_fails_the_mistakes(answer, named):
    # 08.3 had no check (the reviewer: its harness was stripped from the student edition)
    assert verdict("08.3", augmented_brain)[0]
    assert seeds_passed("08.3", answer, range(50)) == []
    if named:
        assert named in first_failure("08.3", answer, 0)


def test_08_3_reference_is_the_biased_attention_of_torch():
    import torch

    from attnlab.course.spec import get_spec

    for case in get_spec("08.3").cases(np.random.default_rng(7)):
        w_q, w_k, b_q, b_k = case.args
        y, m = case.private
        q = torch.nn.Linear(m, w_q.shape[1]).double()
        k = torch.nn.Linear(m, w_q.shape[1]).double()
        with torch.no_grad():
            q.weight.copy_(torch.from_numpy(w_q.T))
            q.bias.copy_(torch.from_numpy(b_q[0]))
            k.weight.copy_(torch.from_numpy(w_k.T))
            k.bias.copy_(torch.from_numpy(b_k[0]))
            yt = torch.from_numpy(y)
            logits = q(yt) @ k(yt).T / np.sqrt(w_q.shape[1])
        assert np.allclose(case.expected, logits.numpy())


def test_08_2_in_the_graders_evaluation(tmp_path):
    # the grader calls the answer through the same adapter in its sandbox, and reads the
    # results back from one .npz per exercise: the n = 2000 case must fit its size limit
    from attnlab.course import capture
    from attnlab.course.adapters import MAX_NPZ_BYTES, load_plain, save_plain
    from attnlab.course.spec import get_spec
    from attnlab.exercises import exercise_ids

    exercise_ids()  # loads the chapters' specs
    spec = get_spec("08.2")
    cases = list(spec.cases(np.random.default_rng(9)))
    found = capture._evaluate_one(poly_logits, spec.adapter, 20.0, [c.args for c in cases],
                                  spec.forbid)
    assert [list(r) for r in found] == [["ok"]] * len(cases)
    save_plain(tmp_path / "08.2.npz", {"name": "poly_logits", "cases": tuple(found)})
    assert (tmp_path / "08.2.npz").stat().st_size < MAX_NPZ_BYTES
    back = load_plain(tmp_path / "08.2.npz")
    assert np.allclose(back["cases"][-1]["ok"], cases[-1].expected)
    refused = capture._evaluate_one(_pairwise, spec.adapter, 20.0, [c.args for c in cases],
                                    spec.forbid)
    assert "memory peaked" in refused[-1]["error"]
