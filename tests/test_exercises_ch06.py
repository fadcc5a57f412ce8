"""Chapter 06's checks pass honest answers and fail the partly right ones on every draw."""

from __future__ import annotations

import numpy as np
import pytest
from _partly_right import first_failure, seeds_passed, verdict

from attnlab.data.images import image_to_patches


def patchify(image, p):
    h, w, c = image.shape
    out = np.empty(((h // p) * (w // p), p * p * c))
    for row in range(h // p):  # loops: an answer independent of the library's reshape
        for col in range(w // p):
            patch = image[row * p : (row + 1) * p, col * p : (col + 1) * p]
            out[row * (w // p) + col] = patch.ravel()
    return out


def _tiles(image, p):
    h, w, c = image.shape
    return image.reshape(h // p, p, w // p, p, c)


@pytest.mark.parametrize(
    "answer, named",
    [
        (lambda im, p: im.reshape(-1, p * p * im.shape[2]), "strips"),
        (lambda im, p: _tiles(im, p).transpose(0, 2, 3, 1, 4).reshape(-1, p * p * im.shape[2]),
         "row by row"),
        (lambda im, p: _tiles(im, p).transpose(0, 2, 4, 1, 3).reshape(-1, p * p * im.shape[2]),
         "innermost"),
        (lambda im, p: _tiles(im, p).transpose(2, 0, 1, 3, 4).reshape(-1, p * p * im.shape[2]),
         "column by column"),
    ],
)
def test_06_1_fails_the_usual_mistakes_on_every_draw(answer, named):
    assert verdict("06.1", patchify)[0]
    assert seeds_passed("06.1", answer, range(300)) == []
    assert named in first_failure("06.1", answer, 0)


def test_06_1_refuses_the_library():
    ok, message = verdict("06.1", lambda image, p: image_to_patches(image, p))
    assert not ok and "image_to_patches" in message and "unavailable" in message


def same_label_mass(weights, labels):
    h, s, _ = weights.shape
    out = np.zeros(h)
    for head in range(h):
        for i in range(s):
            out[head] += sum(weights[head, i, j] for j in range(s) if labels[j] == labels[i]) / s
    return out


def test_06_2():
    assert verdict("06.2", same_label_mass)[0]
    summed = lambda w, labels: (w * (labels[:, None] == labels)).sum((-1, -2))  # noqa: E731
    assert "averaged" in first_failure("06.2", summed, 0)
    no_self = lambda w, labels: same_label_mass(  # noqa: E731
        w * (1 - np.eye(w.shape[1])), labels)
    assert seeds_passed("06.2", no_self, range(100)) == []
    squeezed = lambda w, labels: same_label_mass(w, labels).squeeze()  # noqa: E731
    assert seeds_passed("06.2", squeezed, range(100)) == []


def test_06_2_wrapping_the_library_measurement_is_refused():
    # s6-06: head_masses with a stand-in model returned the answer
    from types import SimpleNamespace

    import torch
    from _partly_right import refused_loophole

    from attnlab.nn.image_heads import head_masses

    def wrapped(weights, labels):
        task = SimpleNamespace(tokens=np.zeros((1, len(labels), 1)), colours=labels[None],
                               textures=labels[None])
        return head_masses(lambda x: (None, torch.tensor(weights[None])), task)[0]

    refused_loophole("06.2", wrapped, "head_masses")
