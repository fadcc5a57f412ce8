"""Checks for the exercises of chapter 01 (local context: convolution)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from attnlab.conv import local_context
from attnlab.course.spec import Case, ExerciseFailure, as_array, exercise, expect_close


def _kernel_judge(got, case: Case) -> None:
    """``got`` is a kernel: right shape, and ``local_context(x, got)`` equals the expected."""
    x, shape = case.private
    kernel = as_array(got, case.on)
    if kernel.shape != shape:
        raise ExerciseFailure(f"{case.on}: expected a kernel of shape {shape}, got {kernel.shape}")
    expect_close(local_context(x, kernel), case.expected, on=case.on)


def _window_means(x: np.ndarray, half: int) -> np.ndarray:
    s = len(x)
    return np.array(
        [np.mean([x[(i + j) % s] for j in range(-half, half + 1)], axis=0) for i in range(s)]
    )


@exercise(
    "01.1", answer="moving_average_kernel", forbid=(__name__,),
    passed="local_context with your kernel averages every window on 10 random sequences "
    "and on C = 0 ... 3 with one and four channels.",
)
def _moving_average(rng: np.random.Generator) -> Iterator[Case]:
    # A closed form first (C=1, d=2, where the classic slips show), then every half-width from
    # 0 (the kernel is the identity) to the largest, with one channel and with the most, each
    # on the shortest sequence that holds the window: a divisor right for one C only fails.
    fixed = [(1, 2, 5)] + [(half, d, 2 * half + 1) for half in range(4) for d in (1, 4)]
    for case in range(len(fixed) + 10):
        if case < len(fixed):
            half, d, s = fixed[case]
        else:
            half, d = int(rng.integers(0, 4)), int(rng.integers(1, 5))
            s = int(rng.integers(2 * half + 1, 2 * half + 8))
        x = rng.normal(size=(s, d))
        width = 2 * half + 1
        eye = np.broadcast_to(np.eye(d), (width, d, d))
        hints = {
            "each offset's matrix must be I/(2C+1); a matrix full of 1/(2C+1) mixes the "
            "channels": np.full((width, d, d), 1.0 / width),
            "this kernel sums the window; divide by the window size 2C+1 to average": eye,
        }
        if d == 1:
            hints.pop(next(iter(hints)))  # with one channel the two kernels coincide
        yield Case(
            (half, d),
            _window_means(x, half),
            on=f"C={half}, d={d}",
            judge=_kernel_judge,
            hints=hints if width > 1 or d > 1 else {},
            private=(x, (width, d, d)),
        )


#: 01.2 asks for the composed kernel from the algebra: probing the layer with impulses (as
#: the chapter's layer_matrix does) or calling this module's own reference hands it over.
KERNEL_FORBID = (
    "attnlab.conv.local_context",
    "torch.nn.functional.conv1d",
    "torch.conv1d",
    "torch.nn.Conv1d",
    __name__,
)


def _compose_kernels(k1: np.ndarray, k2: np.ndarray, sign: int, swap: bool = False) -> np.ndarray:
    """``K_c = Σ K1_a @ K2_b`` over ``a + b = c`` (``sign=1``) or ``a - b = c`` (``-1``);
    ``swap``: the product in the other order, ``K2_b @ K1_a`` (square matrices only)."""
    c1, c2 = len(k1) // 2, len(k2) // 2
    out = np.zeros((2 * (c1 + c2) + 1, k1.shape[1], k2.shape[2]))
    for a in range(-c1, c1 + 1):
        for b in range(-c2, c2 + 1):
            product = k2[b + c2] @ k1[a + c1] if swap else k1[a + c1] @ k2[b + c2]
            out[a + sign * b + c1 + c2] += product
    return out


@exercise(
    "01.2", answer="compose_kernels", forbid=KERNEL_FORBID,
    passed="one layer with your kernel equals the two-layer stack on 10 random cases and "
    "6 fixed ones (C1 != C2, a zero half-width, three different widths).",
)
def _compose(rng: np.random.Generator) -> Iterator[Case]:
    # Closed form first: k2 shifts by +1, so the composed kernel is k1 moved by one offset.
    k1 = np.array([1.0, 2.0, 3.0]).reshape(3, 1, 1)
    k2 = np.array([0.0, 0.0, 1.0]).reshape(3, 1, 1)
    cases = [(k1, k2, rng.normal(size=(7, 1)), "k1 = [1, 2, 3], k2 = [0, 0, 1] (a shift), d = 1")]
    # Then the cases that separate partly right answers, each on the shortest sequence that
    # holds the composed window: unequal half-widths both ways, a zero half-width, three
    # different widths (d_in, d_mid, d_out), and square matrices that do not commute.
    for c1, c2, d_in, d_mid, d_out in [(0, 2, 1, 2, 1), (2, 0, 2, 1, 2), (2, 1, 1, 3, 2),
                                       (1, 2, 3, 1, 2), (1, 1, 2, 2, 2)]:
        k1 = rng.normal(size=(2 * c1 + 1, d_in, d_mid))
        k2 = rng.normal(size=(2 * c2 + 1, d_mid, d_out))
        s = 2 * (c1 + c2) + 1
        on = f"C1={c1}, C2={c2}, s={s}, widths {d_in}->{d_mid}->{d_out}"
        cases.append((k1, k2, rng.normal(size=(s, d_in)), on))
    for _ in range(10):
        c1, c2 = int(rng.integers(0, 3)), int(rng.integers(0, 3))
        d_in, d_mid, d_out = (int(v) for v in rng.integers(1, 4, size=3))
        s = 2 * (c1 + c2) + 1 + int(rng.integers(0, 5))
        k1 = rng.normal(size=(2 * c1 + 1, d_in, d_mid))
        k2 = rng.normal(size=(2 * c2 + 1, d_mid, d_out))
        on = f"C1={c1}, C2={c2}, s={s}, widths {d_in}->{d_mid}->{d_out}"
        cases.append((k1, k2, rng.normal(size=(s, d_in)), on))
    for k1, k2, x, on in cases:
        c1, c2 = len(k1) // 2, len(k2) // 2
        wrong = {}
        if len({k1.shape[1], k1.shape[2], k2.shape[2]}) == 1 and k1.shape[1] > 1:
            wrong["the product is in the wrong order: the first layer's matrix acts first on "
                  "a row vector, x K1_a K2_b, so K_c = Σ K1_a @ K2_b"] = _compose_kernels(
                      k1, k2, 1, swap=True)
        if c1 and c2:
            wrong["your kernel pairs offsets a and b at a − b; stacking two layers adds "
                  "offsets: K_c = Σ_{a+b=c} K1_a @ K2_b"] = _compose_kernels(k1, k2, -1)
        yield Case(
            (k1, k2),
            local_context(local_context(x, k1), k2),
            on=on,
            judge=_kernel_judge,
            hints=wrong,
            private=(x, (2 * (c1 + c2) + 1, k1.shape[1], k2.shape[2])),
        )
