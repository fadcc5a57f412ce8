"""Chapters 07 and 08 say what their cells check (the session-6 readers' points).

Each test fails on the text or code the readers criticised: chapter 08's Summary calling the
hybrid power rule "the signed power (attnlab's choice)" and promising fused kernels that store
no n × n matrix while its own cell says the CPU math kernel does; its Overview claiming every
claim is checked by a cell; chapter 07's W and W_a each standing for two matrices, asserts on
single greedy decodings and argmaxes of soft models (which can flip on another CPU), an assert
that holds by the bound alone, and 07.3's answer cell pointing at a stub.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _cells(stem: str) -> list[dict]:
    path = ROOT / "notebooks" / f"{stem}.ipynb"
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _text(cell: dict) -> str:
    return "".join(cell["source"])


def _summary(stem: str) -> str:
    for cell in _cells(stem):
        text = _text(cell)
        if cell["cell_type"] == "markdown" and "## Summary" in text:
            return text[text.index("## Summary"):]
    raise AssertionError(f"{stem} has no Summary")


def test_08_summary_states_the_hybrid_rule_and_the_cpu_kernel():
    summary = _summary("08_generalized_attention")
    assert "attnlab's choice" not in summary
    assert "exact power at integers" in summary and "jumps at even integers" in summary
    assert "without storing any $n \\times n$ matrix" not in summary
    assert "CPU math kernel" in summary and "still builds" in summary
    assert "f(Y)B_i" not in summary  # g is the feature map of tokens; f acts on products


def test_08_overview_does_not_claim_every_claim_is_checked():
    overview = _text(_cells("08_generalized_attention")[0])
    assert "every claim in it is checked" not in overview
    # the Kronecker remark it used to leave unchecked now has its assert
    cells = _cells("08_generalized_attention")
    code = "\n".join(_text(c) for c in cells if c["cell_type"] == "code")
    assert "np.kron(b1, b2)" in code and 'einsum("aij,ik,bkl,jl->ab"' in code


def test_07_concat_proposition_does_not_reuse_w_and_w_a():
    cells = _cells("07_luong_attention")
    prop = next(_text(c) for c in cells if ":label: prop-07-concat" in _text(c))
    statement = prop[prop.index(":label: prop-07-concat"):prop.index("{prf:proof}")]
    assert r"W_\text{cat} = [\,W_1 \;\; W_2\,]" in statement
    assert r"W \in \mathbb{R}^{d_a" not in statement and "W_a = [" not in statement
    summary = _summary("07_luong_attention")
    assert "W_a = [W" not in summary and r"W_\text{cat} = [W_1\ W_2]" in summary


def test_07_training_asserts_are_statistics_not_single_draws():
    code = "\n".join(_text(c) for c in _cells("07_luong_attention") if c["cell_type"] == "code")
    assert "tgt_vocab.decode(tokens[row]) == examples.tgt_text[row]" not in code
    assert "looked_at[score, row]" not in code  # argmaxes of two dates, soft models included
    assert "others + 25" not in code  # the step where a curve first crosses 0.05
    assert 'largest_logit["scaled"] < np.sqrt(HIDDEN)' not in code  # true by the bound alone
    assert 'largest_product["scaled"] > 0.5 * largest_product["dot"]' in code
    assert re.search(r"share\[score\]", code) and "early[" in code


def test_07_3_answer_cell_points_at_given_code_not_a_stub():
    cells = _cells("07_luong_attention")
    solution_code = [_text(c) for c in cells if c["cell_type"] == "code"
                     and "solution" in c.get("metadata", {}).get("tags", [])]
    assert not any("linear_additive_weights" in s for s in solution_code)
    given = [_text(c) for c in cells if c["cell_type"] == "code"
             and "def linear_additive_weights" in _text(c)]
    assert len(given) == 1 and "given code" in given[0]
