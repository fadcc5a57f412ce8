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
        raise ExerciseFailure(f"for k={k}, d={d} expected a ({d}, {d}) matrix, got {m.shape}")
    pe = sinusoidal_positions(80, d)
    expect_close(pe[rows] @ m, case.expected, on=case.on)


@exercise(
    "09.1", answer="shift_matrix",
    passed="PE[p] @ M_k equals PE[p + k] for every tested p, on 10 random (k, d).",
)
def _shift_matrix(rng: np.random.Generator) -> Iterator[Case]:
    for _ in range(10):
        d = 2 * int(rng.integers(1, 9))
        k = int(rng.integers(-20, 21))
        pe = sinusoidal_positions(80, d)
        rows = np.arange(max(0, -k), 80 - max(0, k))  # every p with p and p + k in the table
        hints = {}
        if k:  # M_{-k} is what transposing every 2×2 rotation block gives
            back = np.arange(max(0, k), 80 - max(0, -k))
            m_back = np.linalg.lstsq(pe[back], pe[back - k], rcond=None)[0]
            hints["your matrix shifts by −k: each 2×2 rotation block is transposed"] = m_back
        yield Case(
            (k, d),
            pe[rows + k],
            on=f"k={k}, d={d}, positions {rows[0]}..",
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
    passed="your logits equal Shaw et al.'s e_ij on 10 random cases.",
)
def _shaw_logits(rng: np.random.Generator) -> Iterator[Case]:
    for _ in range(10):
        s, d_k, clip = int(rng.integers(1, 9)), int(rng.integers(1, 5)), int(rng.integers(0, 4))
        q, k = rng.normal(size=(s, d_k)), rng.normal(size=(s, d_k))
        a_k = rng.normal(size=(2 * clip + 1, d_k))
        expected = _shaw(q, k, a_k, clip, 1)
        hints = {}
        if clip and s > 1:
            hints["the offset is j − i (key minus query); you used i − j"] = _shaw(
                q, k, a_k, clip, -1
            )
        if d_k > 1:
            hints["divide the logits by √d_k"] = expected * np.sqrt(d_k)
        yield Case((q, k, a_k), expected, on=f"s={s}, d_k={d_k}, k_max={clip}", hints=hints)


def _peak_judge(got, case: Case) -> None:
    close(got, case)
    s, offset = case.private
    if not np.all(np.argmax(as_array(got, case.on), axis=1) == (np.arange(s) + offset) % s):
        raise ExerciseFailure(f"s={s}, offset={offset}: the largest logit is not the target")


@exercise(
    "09.3", answer="quadratic_logits",
    passed="your logits match -alpha (o - offset)^2 with circular offset o on 10 random cases.",
)
def _quadratic_logits(rng: np.random.Generator) -> Iterator[Case]:
    for _ in range(10):
        s = int(rng.integers(1, 12))
        offset = int(rng.integers(-((s - 1) // 2), (s - 1) // 2 + 1))
        alpha = float(rng.uniform(0.1, 20.0))
        o = circular_offsets(s).astype(float)
        hints = {}
        if offset:
            hints["your peak sits at i − offset; the target key is i + offset"] = (
                -alpha * (o + offset) ** 2
            )
        yield Case(
            (s, offset, alpha),
            -alpha * (o - offset) ** 2,
            on=f"s={s}, offset={offset}, alpha={alpha:.3f}",
            judge=_peak_judge,
            hints=hints,
            private=(s, offset),
        )
