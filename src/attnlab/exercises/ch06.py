"""Checks for the exercises of chapter 06 (attention heads on image tokens)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from attnlab.course.spec import Case, ExerciseFailure, as_array, close, exercise
from attnlab.data.images import image_to_patches


@exercise(
    "06.1", answer="patchify",
    passed="matches image_to_patches on 20 random images (non-square, 1 to 4 channels)",
)
def _patchify(rng: np.random.Generator) -> Iterator[Case]:
    """``patchify(image, p)``: ``(H, W, C)`` → ``((H/p)·(W/p), p·p·C)``, row by row."""
    for case in range(20):
        p = int(rng.integers(1, 6))
        rows, cols, channels = (int(n) for n in rng.integers(1, 5, size=3))
        image = rng.random((rows * p, cols * p, channels))
        hints = {
            "you reshaped the image straight to (patches, p·p·C): that cuts it into strips of "
            "pixel rows, not p×p squares. Split both axes into (H/p, p) and (W/p, p) and move "
            "the two p axes together before the final reshape": image.reshape(
                rows * cols, p * p * channels
            ),
        }
        yield Case(
            (image, p), image_to_patches(image, p), on=f"case {case}: image {image.shape}, p={p}",
            hints=hints,
        )


def _per_head(got, case: Case) -> None:
    arr = as_array(got, case.on)
    if arr.shape != case.expected.shape:
        raise ExerciseFailure(
            f"{case.on}: expected one number per head {case.expected.shape}, got {arr.shape}"
        )
    close(got, case)


@exercise(
    "06.2",
    answer="same_label_mass",
    passed="matches the mean same-label attention mass on 20 random cases",
)
def _same_label_mass(rng: np.random.Generator) -> Iterator[Case]:
    """``same_label_mass(weights, labels)``: per head, mean attention on same-label keys."""
    for case in range(20):
        h, s = int(rng.integers(1, 6)), int(rng.integers(1, 9))
        logits = rng.normal(size=(h, s, s)) * 2
        weights = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
        labels = rng.integers(0, 3, size=s)
        same = labels[:, None] == labels[None, :]
        hints = {}
        if s > 1:
            hints["you summed over the queries; the mass is averaged over them (mean)"] = (
                weights * same
            ).sum(-1).sum(-1)
        yield Case(
            (weights, labels),
            (weights * same).sum(-1).mean(-1),
            on=f"case {case}: h={h}, s={s}",
            judge=_per_head,
            hints=hints,
        )
