"""Checks for the exercises of chapter 06 (attention heads on image tokens)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from attnlab.course.spec import Case, ExerciseFailure, as_array, close, exercise
from attnlab.data.images import image_to_patches


@exercise(
    "06.1", answer="patchify",
    passed="matches image_to_patches on 24 images (p = 1, one row or column of patches, "
           "non-square, 1 to 4 channels, then random)",
    forbid=(
        "attnlab.data.images.image_to_patches",
        "attnlab.data.images.patches_to_image",
        "torch.nn.functional.unfold",
        "torch.Tensor.unfold",
        __name__,
    ),
)
def _patchify(rng: np.random.Generator) -> Iterator[Case]:
    """``patchify(image, p)``: ``(H, W, C)`` → ``((H/p)·(W/p), p·p·C)``, row by row."""
    fixed = [(2, 3, 3, 2), (1, 4, 2, 3), (3, 1, 1, 2), (2, 2, 3, 1)]  # (rows, cols, C, p)
    random = [tuple(int(n) for n in rng.integers(1, 5, size=3)) + (int(rng.integers(1, 6)),)
              for _ in range(20)]
    for case, (rows, cols, channels, p) in enumerate(fixed + random):
        image = rng.random((rows * p, cols * p, channels))
        tiles = image.reshape(rows, p, cols, p, channels)
        hints = {
            "you reshaped the image straight to (patches, p·p·C): that cuts it into strips of "
            "pixel rows, not p×p squares. Split both axes into (H/p, p) and (W/p, p) and move "
            "the two p axes together before the final reshape": image.reshape(
                rows * cols, p * p * channels
            ),
            "inside a patch the pixels must go row by row: (patch row, patch column, pixel "
            "row, pixel column, channel), not pixel column first": tiles.transpose(
                0, 2, 3, 1, 4).reshape(rows * cols, -1),
            "the channels go innermost: a token is pixel (0, 0)'s channels, then pixel (0, "
            "1)'s, ...": tiles.transpose(0, 2, 4, 1, 3).reshape(rows * cols, -1),
            "the patches are numbered row by row (all patches of the first patch row first), "
            "not column by column": tiles.transpose(2, 0, 1, 3, 4).reshape(rows * cols, -1),
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
    forbid=("attnlab.nn.image_heads.head_masses", __name__),
    passed="matches the mean same-label attention mass on 23 cases (one head, one token, "
           "then random)",
)
def _same_label_mass(rng: np.random.Generator) -> Iterator[Case]:
    """``same_label_mass(weights, labels)``: per head, mean attention on same-label keys."""
    fixed = [(3, 5), (1, 1), (1, 6)]  # (h, s): several heads, one token, one head
    random = [(int(rng.integers(1, 6)), int(rng.integers(1, 9))) for _ in range(20)]
    for case, (h, s) in enumerate(fixed + random):
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
