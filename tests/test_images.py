"""Tests of attnlab.data.images: patch tokens, downsampling and the colour/texture task."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab import image_to_patches, patches_to_image
from attnlab.data.images import (
    TASK_COLOURS,
    colour_texture_targets,
    colour_texture_task,
    downsample,
    texture_patterns,
)


def _naive_patches(image, p):
    height, width, _ = image.shape
    tokens = []
    for top in range(0, height, p):
        for left in range(0, width, p):
            tokens.append(
                [
                    image[top + r, left + c, ch]
                    for r in range(p)
                    for c in range(p)
                    for ch in range(image.shape[2])
                ]
            )
    return np.array(tokens)


@settings(max_examples=25, deadline=None)
@given(
    rows=st.integers(1, 4),
    cols=st.integers(1, 4),
    p=st.integers(1, 5),
    channels=st.integers(1, 3),
    seed=st.integers(0, 1000),
)
def test_patches_match_naive_loops_and_round_trip(rows, cols, p, channels, seed):
    image = np.random.default_rng(seed).random((rows * p, cols * p, channels))
    tokens = image_to_patches(image, p)
    np.testing.assert_array_equal(tokens, _naive_patches(image, p))
    np.testing.assert_array_equal(patches_to_image(tokens, (rows, cols), p), image)


def test_rgb_4x4_patches_are_48_values_and_token_order_is_row_by_row():
    image = np.zeros((64, 64, 3))
    image[4:8, 0:4, 1] = 1.0  # the patch in grid row 1, column 0 is green
    tokens = image_to_patches(image)
    assert tokens.shape == (256, 48)
    assert np.flatnonzero(tokens.sum(axis=1)).tolist() == [16]  # 1 * 16 + 0
    np.testing.assert_array_equal(tokens[16].reshape(4, 4, 3)[..., 1], np.ones((4, 4)))


def test_batch_axis():
    images = np.random.default_rng(0).random((3, 8, 8, 3))
    tokens = image_to_patches(images)
    assert tokens.shape == (3, 4, 48)
    np.testing.assert_array_equal(tokens[2], image_to_patches(images[2]))


def test_patch_errors():
    with pytest.raises(ValueError, match="must divide the image height and width"):
        image_to_patches(np.zeros((10, 8, 3)), 4)
    with pytest.raises(ValueError, match=r"\(H, W, C\)"):
        image_to_patches(np.zeros((8, 8)), 4)
    with pytest.raises(ValueError, match="positive integer"):
        image_to_patches(np.zeros((8, 8, 3)), 0)
    with pytest.raises(ValueError, match="needs 6 tokens"):
        patches_to_image(np.zeros((4, 48)), (2, 3))
    with pytest.raises(ValueError, match="not a multiple"):
        patches_to_image(np.zeros((6, 47)), (2, 3))
    with pytest.raises(ValueError, match="positive integer"):
        patches_to_image(np.zeros((6, 48)), (2, 3), patch=0)


def test_downsample_matches_block_means():
    image = np.random.default_rng(1).random((6, 9, 2))
    small = downsample(image, 3)
    assert small.shape == (2, 3, 2)
    for i in range(2):
        for j in range(3):
            np.testing.assert_allclose(
                small[i, j], image[3 * i : 3 * i + 3, 3 * j : 3 * j + 3].mean((0, 1))
            )
    with pytest.raises(ValueError, match="must divide"):
        downsample(image, 4)


def test_texture_patterns_are_orthogonal_and_balanced():
    pats = texture_patterns(4).reshape(3, 16)
    np.testing.assert_array_equal(pats @ pats.T, 16 * np.eye(3))
    np.testing.assert_array_equal(pats.sum(axis=1), 0)


def test_targets_match_counting_loops():
    rng = np.random.default_rng(2)
    colours, textures = rng.integers(0, 3, (4, 10)), rng.integers(0, 3, (4, 10))
    targets = colour_texture_targets(colours, textures)
    for n in range(4):
        for i in range(10):
            same_c = [j for j in range(10) if colours[n, j] == colours[n, i]]
            same_t = [j for j in range(10) if textures[n, j] == textures[n, i]]
            tex = [sum(textures[n, j] == t for j in same_c) / len(same_c) for t in range(3)]
            col = [sum(colours[n, j] == c for j in same_t) / len(same_t) for c in range(3)]
            np.testing.assert_allclose(targets[n, i], tex + col)


def test_task_is_seeded_and_consistent():
    a, b = colour_texture_task(3, seed=7), colour_texture_task(3, seed=7)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a.tokens, colour_texture_task(3, seed=8).tokens)
    assert a.images.shape == (3, 32, 32, 3) and a.tokens.shape == (3, 64, 48)
    np.testing.assert_array_equal(a.tokens, image_to_patches(a.images))
    assert a.images.min() >= 0.0 and a.images.max() <= 1.0
    # Every patch's mean colour is closest to its labelled colour (textures average to zero).
    means = a.tokens.reshape(3, 64, 16, 3).mean(axis=2)
    nearest = np.argmin(((means[:, :, None] - TASK_COLOURS) ** 2).sum(-1), axis=-1)
    np.testing.assert_array_equal(nearest, a.colours)
    # ... and its grey pattern correlates most with its labelled texture.
    grey = a.tokens.reshape(3, 64, 16, 3).mean(axis=3)
    scores = grey @ texture_patterns(4).reshape(3, 16).T
    np.testing.assert_array_equal(scores.argmax(-1), a.textures)


def test_task_errors():
    with pytest.raises(ValueError, match="even"):
        colour_texture_task(2, patch=3)
    with pytest.raises(ValueError, match="positive integer"):
        colour_texture_task(0)


@pytest.mark.parametrize("bad", [True, 2.0, "4"])
def test_sizes_that_are_not_integers_are_type_errors(bad):
    """The error contract: a bool (True would read as 1) or a float is not a size."""
    with pytest.raises(TypeError, match="patch"):
        image_to_patches(np.zeros((8, 8, 3)), bad)
    with pytest.raises(TypeError, match="patch"):
        patches_to_image(np.zeros((4, 48)), (2, 2), patch=bad)
    with pytest.raises(TypeError, match="factor"):
        downsample(np.zeros((8, 8, 3)), bad)
    with pytest.raises(TypeError, match="grid"):
        colour_texture_task(2, grid=bad)
