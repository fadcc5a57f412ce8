"""Checks for the exercises of chapter 09 (positions)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from attnlab.course.spec import Case, ExerciseFailure, as_array, close, exercise, expect_close
from attnlab.positions import circular_offsets, sinusoidal_positions


def _shift_judge(got, case: Case) -> None:
    k, d, rows = case.private
    m = as_array(got, case.on)
    if m.shape != (d, d):
        raise ExerciseFailure(
            f"for offset Δ={k}, d={d} expected a ({d}, {d}) matrix, got {m.shape}"
        )
    pe = sinusoidal_positions(80, d)
    expect_close(pe[rows] @ m, case.expected, on=case.on)


@exercise(
    "09.1", answer="shift_matrix",
    passed="PE[p] @ M_Δ equals PE[p + Δ] for every tested p, on 14 (Δ, d): Δ = 0, negative "
           "and positive Δ, d = 2, then random.",
    forbid=(
        "attnlab.positions.sinusoidal.sinusoidal_shift_matrix",
        "attnlab.positions.sinusoidal.sinusoidal_positions",
        "attnlab.positions.rotary.apply_rotary",
        "attnlab.nn.rotary.apply_rotary",
    ),
)
def _shift_matrix(rng: np.random.Generator) -> Iterator[Case]:
    fixed = [(-3, 4), (7, 6), (0, 4), (-1, 2), (-17, 16)]  # (k, d): negative k first
    random = [(int(rng.integers(-20, 21)), 2 * int(rng.integers(1, 9))) for _ in range(9)]
    for k, d in fixed + random:
        pe = sinusoidal_positions(80, d)
        rows = np.arange(max(0, -k), 80 - max(0, k))  # every p with p and p + k in the table
        hints = {}
        if k:  # M_{-k} is what transposing every 2×2 rotation block gives
            back = np.arange(max(0, k), 80 - max(0, -k))
            m_back = np.linalg.lstsq(pe[back], pe[back - k], rcond=None)[0]
            hints["your matrix shifts by |Δ| = −Δ: for negative Δ it must move back, "
                  "φ = Δ ω_t < 0 (did you use |Δ|, or transpose each 2×2 rotation block?)"
                  if k < 0 else
                  "your matrix shifts by −Δ: each 2×2 rotation block is transposed"] = m_back
        yield Case(
            (k, d),
            pe[rows + k],
            on=f"offset Δ={k}, d={d}, positions {rows[0]}..",
            judge=_shift_judge,
            hints=hints,
            private=(k, d, rows),
            atol=1e-6,
        )


def _shaw(q: np.ndarray, k: np.ndarray, a_k: np.ndarray, clip: int, sign: int) -> np.ndarray:
    s, d_k = q.shape
    out = np.empty((s, s))
    for i in range(s):
        for j in range(s):
            row = min(max(sign * (j - i), -clip), clip) + clip
            out[i, j] = q[i] @ (k[j] + a_k[row]) / np.sqrt(d_k)
    return out


@exercise(
    "09.2",
    answer="shaw_logits",
    passed="your logits equal Shaw et al.'s e_ij on 13 cases (clipping active, k_max = 0, "
           "s = 1, then random).",
    forbid=(
        "attnlab.positions.relative.shaw_attention",
        "attnlab.positions.relative.relative_position_index",
    ),
)
def _shaw_logits(rng: np.random.Generator) -> Iterator[Case]:
    fixed = [(7, 3, 2), (5, 2, 0), (1, 2, 1), (4, 1, 3)]  # (s, d_k, k_max)
    random = [
        (int(rng.integers(1, 9)), int(rng.integers(1, 5)), int(rng.integers(0, 4)))
        for _ in range(9)
    ]
    for s, d_k, clip in fixed + random:
        q, k = rng.normal(size=(s, d_k)), rng.normal(size=(s, d_k))
        a_k = rng.normal(size=(2 * clip + 1, d_k))
        expected = _shaw(q, k, a_k, clip, 1)
        hints = {}
        if clip and s > 1:
            hints["the offset is j − i (key minus query); you used i − j"] = _shaw(
                q, k, a_k, clip, -1
            )
        if s - 1 > clip:
            hints["you did not clip j − i to [−k_max, k_max] before indexing the table (numpy "
                  "wraps negative indices around)"] = _unclipped(q, k, a_k, clip)
        if d_k > 1:
            hints["divide the logits by √d_k"] = expected * np.sqrt(d_k)
        yield Case((q, k, a_k), expected, on=f"s={s}, d_k={d_k}, k_max={clip}", hints=hints)


def _unclipped(q: np.ndarray, k: np.ndarray, a_k: np.ndarray, clip: int) -> np.ndarray:
    """The logits of an answer that indexes ``a_k[j - i + k_max]`` without clipping, where
    that index is a valid (possibly negative, wrapping) numpy index; NaN where it is not."""
    s, d_k = q.shape
    out = np.full((s, s), np.nan)
    for i in range(s):
        for j in range(s):
            row = j - i + clip
            if -len(a_k) <= row < len(a_k):
                out[i, j] = q[i] @ (k[j] + a_k[row]) / np.sqrt(d_k)
    return out


def _peak_judge(got, case: Case) -> None:
    close(got, case)
    s, offset = case.private
    if not np.all(np.argmax(as_array(got, case.on), axis=1) == (np.arange(s) + offset) % s):
        raise ExerciseFailure(f"s={s}, offset Δ={offset}: the largest logit is not the target")


@exercise(
    "09.3", answer="quadratic_logits",
    passed="your logits match −γ (o − Δ)² with circular offset o on 14 cases "
           "(even and odd s, negative, zero and positive offsets, s = 1, then random).",
    forbid=(
        "attnlab.positions.conv_as_attention.circular_offsets",
        "attnlab.positions.conv_as_attention.convolution_attention_params",
        "attnlab.positions.conv_as_attention.convolution_as_attention",
    ),
)
def _quadratic_logits(rng: np.random.Generator) -> Iterator[Case]:
    fixed = [(6, -2), (8, 3), (7, 0), (5, -2), (1, 0), (4, 1)]  # (s, offset): even s first
    random = []
    for _ in range(8):
        s = int(rng.integers(1, 12))
        random.append((s, int(rng.integers(-((s - 1) // 2), (s - 1) // 2 + 1))))
    for s, offset in fixed + random:
        alpha = float(rng.uniform(0.1, 20.0))
        o = circular_offsets(s).astype(float)
        hints = {}
        if offset:
            hints["your peak sits at i − Δ; the target key is i + Δ"] = (
                -alpha * (o + offset) ** 2
            )
        j_minus_i = np.arange(s)[None, :] - np.arange(s)[:, None]
        if s > 2:
            hints["o_ij is the circular offset: j − i taken mod s into "
                  "−⌊s/2⌋..⌈s/2⌉−1, not j − i itself"] = -alpha * (j_minus_i - offset) ** 2.0
        if s % 2 == 0:
            other = (j_minus_i + (s - 1) // 2) % s - (s - 1) // 2
            hints["for even s the circular offsets run from −s/2 to s/2 − 1 (−⌊s/2⌋..⌈s/2⌉−1); "
                  "yours run from −s/2 + 1 to s/2"] = -alpha * (other - offset) ** 2.0
        yield Case(
            (s, offset, alpha),
            -alpha * (o - offset) ** 2,
            on=f"s={s}, offset Δ={offset}, γ={alpha:.3f}",
            judge=_peak_judge,
            hints=hints,
            private=(s, offset),
        )


def _previous_judge(got, case: Case) -> None:
    d, beta = case.private
    if not isinstance(got, tuple) or len(got) != 2:
        raise ExerciseFailure(f"{case.on}: return the pair (w_q, w_k), two ({d}, {d}) matrices")
    w_q, w_k = (as_array(part, case.on) for part in got)
    if w_q.shape != (d, d) or w_k.shape != (d, d):
        raise ExerciseFailure(
            f"{case.on}: expected w_q and w_k of shape ({d}, {d}), got {w_q.shape} and "
            f"{w_k.shape}"
        )
    pe = sinusoidal_positions(64, d)
    logits = (pe[1:] @ w_q) @ (pe @ w_k).T  # queries 1..63 against keys 0..63
    if np.allclose(logits, case.expected, atol=1e-8, rtol=1e-6):
        return
    wrong = {
        "your head attends to the next token (logits λ PE_{i+1}·PE_j): the shift by −1 "
        "belongs on the query side, q_i = PE_i M_{-1} = PE_{i-1}": beta * pe[2:] @ pe.T,
        "the logits lack the factor λ": pe[:-1] @ pe.T,
        "λ enters twice (λ²): put it on the queries or on the keys, not on both": (
            beta**2 * pe[:-1] @ pe.T
        ),
        "your logits are λ PE_i·PE_j: the head attends to the token itself; shift the "
        "queries back by one place": beta * pe[1:] @ pe.T,
    }
    rows = logits[: len(pe) - 2]  # the next-token logits exist for queries 1..62 only
    for message, value in wrong.items():
        if np.allclose(rows, value[: len(rows)], atol=1e-8, rtol=1e-6):
            raise ExerciseFailure(f"{case.on}: {message}")
    expect_close(logits, case.expected, on=case.on)


@exercise(
    "09.6", answer="previous_token_head",
    passed="with your W_Q, W_K every logit of 64 sinusoidal positions is λ PE_(i-1)·PE_j, on "
           "11 (d, λ): d = 2, d = 16, then random.",
    forbid=(
        "attnlab.positions.sinusoidal.sinusoidal_shift_matrix",
        "attnlab.positions.rotary.apply_rotary",
        "attnlab.nn.rotary.apply_rotary",
        "attnlab.positions.rotary.rotary_angles",
    ),
)
def _previous_token_head(rng: np.random.Generator) -> Iterator[Case]:
    fixed = [(8, 2.0), (2, 1.0), (16, 0.5)]  # (d, beta)
    random = [(2 * int(rng.integers(1, 9)), float(rng.uniform(0.2, 5.0))) for _ in range(8)]
    for d, beta in fixed + random:
        pe = sinusoidal_positions(64, d)
        yield Case(
            (d, beta),
            beta * pe[:-1] @ pe.T,  # row i - 1 of PE against every key: query i = 1..63
            on=f"d={d}, λ={beta:.3g}",
            judge=_previous_judge,
            private=(d, beta),
        )
