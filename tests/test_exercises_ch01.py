"""Chapter 01's checks: honest answers pass; answers right only for one half-width, for equal
half-widths, for equal widths or for one channel fail on every draw, with the mistake named."""

from __future__ import annotations

import numpy as np
from _partly_right import always_fails as _always_fails
from _partly_right import verdict as _verdict


# ---- 01.1 ------------------------------------------------------------------------------------
def moving_average_kernel(C, d, divisor=None):
    width = 2 * C + 1
    return np.stack([np.eye(d) / (width if divisor is None else divisor(C))] * width)


def test_01_1_an_honest_answer_passes():
    assert _verdict("01.1", moving_average_kernel)[0]


def test_01_1_a_divisor_right_for_one_half_width_fails():
    # C + 2 equals 2C + 1 at C = 1 only, the half-width of the closed form
    _always_fails("01.1", lambda C, d: moving_average_kernel(C, d, lambda c: c + 2))


def test_01_1_a_kernel_full_of_one_over_the_width_fails_and_is_named():
    # right for one channel, where the identity is the number 1
    def full(C, d):
        return np.full((2 * C + 1, d, d), 1.0 / (2 * C + 1))

    _always_fails("01.1", full, "mixes the channels")


# ---- 01.2 ------------------------------------------------------------------------------------
def compose_kernels(k1, k2):
    c1, c2 = k1.shape[0] // 2, k2.shape[0] // 2
    out = np.zeros((2 * (c1 + c2) + 1, k1.shape[1], k2.shape[2]))
    for a in range(-c1, c1 + 1):
        for b in range(-c2, c2 + 1):
            out[a + b + c1 + c2] += k1[a + c1] @ k2[b + c2]
    return out


def test_01_2_an_honest_answer_passes():
    assert _verdict("01.2", compose_kernels)[0]


def test_01_2_an_answer_for_equal_half_widths_only_fails():
    def equal_only(k1, k2):
        c = k1.shape[0] // 2  # assumes C2 == C1
        out = np.zeros((4 * c + 1, k1.shape[1], k2.shape[2]))
        for a in range(-c, c + 1):
            for b in range(-c, c + 1):
                out[a + b + 2 * c] += k1[a + c] @ k2[b + c]
        return out

    _always_fails("01.2", equal_only)


def test_01_2_the_product_in_the_wrong_order_fails_and_is_named():
    def swapped(k1, k2):
        c1, c2 = k1.shape[0] // 2, k2.shape[0] // 2
        out = np.zeros((2 * (c1 + c2) + 1, k1.shape[1], k2.shape[2]))
        for a in range(-c1, c1 + 1):
            for b in range(-c2, c2 + 1):
                if k1.shape[1] == k1.shape[2] == k2.shape[2]:  # square: the order is free to slip
                    out[a + b + c1 + c2] += k2[b + c2] @ k1[a + c1]  # right only for d = 1
                else:
                    out[a + b + c1 + c2] += k1[a + c1] @ k2[b + c2]
        return out

    _always_fails("01.2", swapped, "wrong order")


def test_01_2_a_kernel_for_equal_widths_only_fails():
    def square_only(k1, k2):
        d = k1.shape[1]  # assumes d_in = d_mid = d_out
        c1, c2 = k1.shape[0] // 2, k2.shape[0] // 2
        out = np.zeros((2 * (c1 + c2) + 1, d, d))
        for a in range(-c1, c1 + 1):
            for b in range(-c2, c2 + 1):
                out[a + b + c1 + c2] += k1[a + c1] @ k2[b + c2]  # fails unless d_out = d_in
        return out

    _always_fails("01.2", square_only)


# ---- loopholes a fresh reader found (s6-01): the layer and the reference must not be used ----
def test_01_2_probing_the_layer_with_impulses_is_refused():
    from _partly_right import refused_loophole

    from attnlab.conv import local_context

    def probed(k1, k2):  # K_c = response at token c of the stack to impulses at token 0
        c = len(k1) // 2 + len(k2) // 2
        s, d = 2 * c + 1, k1.shape[1]
        out = np.zeros((s, d, k2.shape[2]))
        for channel in range(d):
            x = np.zeros((s, d))
            x[0, channel] = 1.0
            y = local_context(local_context(x, k1), k2)  # y_i = sum_j x_{i+j} K_j = K_{-i}
            for j in range(-c, c + 1):
                out[c + j, channel] = y[-j % s]
        return out

    refused_loophole("01.2", probed, "local_context")


def test_01_2_the_checks_own_reference_is_refused():
    from _partly_right import refused_loophole

    from attnlab.exercises import ch01

    refused_loophole("01.2", lambda a, b: ch01._compose_kernels(a, b, 1), "_compose_kernels")
