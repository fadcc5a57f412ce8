"""Checks for the exercises of chapter 06 (attention heads on image tokens)."""

from __future__ import annotations

import numpy as np

from attnlab.exercises._registry import ExerciseFailure, expect_close, register
from attnlab.images import image_to_patches


@register("06.1")
def _patchify(answer) -> str:
    """``patchify(image, p)``: ``(H, W, C)`` → ``((H/p)·(W/p), p·p·C)``, row by row."""
    rng = np.random.default_rng()
    for case in range(20):
        p = int(rng.integers(1, 6))
        rows, cols, channels = (int(n) for n in rng.integers(1, 5, size=3))
        image = rng.random((rows * p, cols * p, channels))
        expect_close(
            answer(image, p),
            image_to_patches(image, p),
            on=f"case {case}: image {image.shape}, p={p}",
        )
    return "matches image_to_patches on 20 random images (non-square, 1 to 4 channels)"


@register("06.2")
def _same_label_mass(answer) -> str:
    """``same_label_mass(weights, labels)``: per head, mean attention on same-label keys."""
    rng = np.random.default_rng()
    for case in range(20):
        h, s = int(rng.integers(1, 6)), int(rng.integers(1, 9))
        logits = rng.normal(size=(h, s, s)) * 2
        weights = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
        labels = rng.integers(0, 3, size=s)
        same = labels[:, None] == labels[None, :]
        expected = (weights * same).sum(-1).mean(-1)
        got = np.asarray(answer(weights, labels))
        if got.shape != (h,):
            raise ExerciseFailure(
                f"case {case}: expected one number per head {(h,)}, got {got.shape}"
            )
        expect_close(got, expected, on=f"case {case}: h={h}, s={s}")
    return "matches the mean same-label attention mass on 20 random cases"
