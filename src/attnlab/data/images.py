"""Images as sequences of patch tokens, and a synthetic task for attention heads (chapter 06).

A vision transformer reads an image as a sequence: cut it into ``p × p`` patches, flatten each
patch's pixels (row by row, the colour channels innermost) into one token. With ``p = 4`` and
RGB that is ``4 · 4 · 3 = 48`` numbers per token. Patches are numbered row by row, so token
``t`` is the patch in grid row ``t // cols`` and grid column ``t % cols``.

:func:`colour_texture_task` generates images whose patches each have one of three colours and
one of three textures, with targets that a single attention layer can only predict by
attending to patches of the same colour *and* to patches of the same texture: a task on which
different heads can take different jobs.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from attnlab._validate import as_float_array, check_int, require_ndim

#: The three patch colours of :func:`colour_texture_task` (RGB in [0, 1]): red, green, blue.
TASK_COLOURS = np.array([[0.8, 0.2, 0.2], [0.2, 0.8, 0.2], [0.2, 0.2, 0.8]])
#: Names of the three textures of :func:`colour_texture_task`.
TASK_TEXTURES = ("horizontal stripes", "vertical stripes", "checkerboard")


def image_to_patches(image: np.typing.ArrayLike, patch: int = 4) -> np.ndarray:
    """Cut an image into ``patch × patch`` tiles and flatten each tile into one token.

    Parameters
    ----------
    image : array_like
        Height × width × channels; height and width must be multiples of ``patch``.
    patch : int, optional
        Side of a square patch in pixels (default 4).

    Returns
    -------
    numpy.ndarray
        One token per patch, patches numbered row by row; inside a token the pixels run row by
        row and the channels are innermost: ``token[(r·patch + c)·C + ch] = tile[r, c, ch]``.

    Shapes
    ------
    ``image (H, W, C)`` → ``tokens ((H/patch)·(W/patch), patch·patch·C)``; a leading batch
    axis ``(n, H, W, C)`` gives ``(n, tokens, patch·patch·C)``.

    Raises
    ------
    ValueError
        If the image is not 3-D (or 4-D with a batch axis), ``patch`` is not positive, or
        ``patch`` does not divide the height or the width.
    TypeError
        If ``patch`` is not an integer (a bool or a float is not).

    Examples
    --------
    >>> import numpy as np
    >>> from attnlab.data.images import image_to_patches
    >>> image = np.zeros((8, 12, 3))                   # 8 × 12 RGB
    >>> image_to_patches(image).shape                  # a 2 × 3 grid of 48-value tokens
    (6, 48)
    """
    img = as_float_array(image, "image")
    if img.ndim not in (3, 4):
        raise ValueError(f"image must have shape (H, W, C) or (n, H, W, C), got {img.shape}")
    patch = check_int(patch, "patch")
    height, width, channels = img.shape[-3:]
    if height % patch or width % patch:
        raise ValueError(
            f"patch={patch} must divide the image height and width, got an image of shape "
            f"{img.shape}"
        )
    rows, cols = height // patch, width // patch
    lead = img.shape[:-3]
    tiles = img.reshape(*lead, rows, patch, cols, patch, channels)
    tiles = np.moveaxis(tiles, -4, -3)  # (..., rows, cols, patch, patch, C)
    return tiles.reshape(*lead, rows * cols, patch * patch * channels)


def _check_grid(grid: object) -> tuple[int, int]:
    """``grid`` as ``(rows, cols)``, two positive integers (a tuple, list or 1-D int array)."""
    if isinstance(grid, np.ndarray) and grid.ndim == 1:
        grid = grid.tolist()
    if not isinstance(grid, (tuple, list)):
        raise TypeError(
            f"grid must be a pair (rows, cols) of integers, got {grid!r} of type "
            f"{type(grid).__name__}"
        )
    if len(grid) != 2:
        raise ValueError(f"grid must be a pair (rows, cols), got {tuple(grid)!r}")
    return check_int(grid[0], "grid[0] (rows)"), check_int(grid[1], "grid[1] (cols)")


def patches_to_image(
    tokens: np.typing.ArrayLike, grid: tuple[int, int], patch: int = 4
) -> np.ndarray:
    """Put patch tokens back together into an image: the inverse of :func:`image_to_patches`.

    Parameters
    ----------
    tokens : array_like
        One token per patch, numbered row by row.
    grid : tuple of int
        ``(rows, cols)`` of the patch grid.
    patch : int, optional
        Side of a patch in pixels (default 4).

    Returns
    -------
    numpy.ndarray
        The image.

    Shapes
    ------
    ``tokens (rows·cols, patch·patch·C)`` → ``(rows·patch, cols·patch, C)``.

    Raises
    ------
    ValueError
        If ``patch`` or an entry of ``grid`` is not positive, ``grid`` does not hold two
        entries, the number of tokens is not ``rows·cols`` or the token size is not a multiple
        of ``patch²``.
    TypeError
        If ``patch`` or an entry of ``grid`` is not an integer (a bool or a float is not), or
        ``grid`` is not a tuple or list.

    Examples
    --------
    >>> import numpy as np
    >>> from attnlab.data.images import image_to_patches, patches_to_image
    >>> image = np.arange(8 * 12 * 3.0).reshape(8, 12, 3)
    >>> bool(np.array_equal(patches_to_image(image_to_patches(image), (2, 3)), image))
    True
    """
    tok = as_float_array(tokens, "tokens")
    require_ndim(tok, "tokens", 2, "(rows*cols, patch*patch*C)")
    patch = check_int(patch, "patch")
    rows, cols = _check_grid(grid)
    grid = (rows, cols)
    if tok.shape[0] != rows * cols:
        raise ValueError(f"grid {grid} needs {rows * cols} tokens, got tokens of shape {tok.shape}")
    if tok.shape[1] % (patch * patch):
        raise ValueError(
            f"token size {tok.shape[1]} is not a multiple of patch*patch = {patch * patch}"
        )
    channels = tok.shape[1] // (patch * patch)
    tiles = tok.reshape(rows, cols, patch, patch, channels)
    return np.moveaxis(tiles, 2, 1).reshape(rows * patch, cols * patch, channels)


def downsample(image: np.typing.ArrayLike, factor: int) -> np.ndarray:
    """Shrink an image by averaging ``factor × factor`` blocks of pixels.

    Parameters
    ----------
    image : array_like
        ``(H, W, C)`` with ``H`` and ``W`` multiples of ``factor``.
    factor : int
        Shrink factor, ``>= 1``.

    Returns
    -------
    numpy.ndarray
        The smaller image (float).

    Shapes
    ------
    ``(H, W, C)`` → ``(H/factor, W/factor, C)``.

    Raises
    ------
    ValueError
        If ``factor`` is not positive or does not divide the height and width.
    TypeError
        If ``factor`` is not an integer (a bool or a float is not).

    Examples
    --------
    >>> import numpy as np
    >>> from attnlab.data.images import downsample
    >>> downsample(np.arange(16.0).reshape(4, 4, 1), 2)[..., 0]
    array([[ 2.5,  4.5],
           [10.5, 12.5]])
    """
    img = as_float_array(image, "image")
    require_ndim(img, "image", 3, "(H, W, C)")
    factor = check_int(factor, "factor")
    height, width, channels = img.shape
    if height % factor or width % factor:
        raise ValueError(f"factor={factor} must divide the height and width of {img.shape}")
    blocks = img.reshape(height // factor, factor, width // factor, factor, channels)
    return blocks.mean(axis=(1, 3))


def texture_patterns(patch: int = 4) -> np.ndarray:
    """The three ±1 textures of :func:`colour_texture_task`: stripes across, stripes down, checks.

    They are mutually orthogonal (each pair has dot product 0 for an even ``patch``), so a
    linear map can tell them apart.

    Returns
    -------
    numpy.ndarray
        ``patterns[t, r, c]`` for texture ``t`` (see :data:`TASK_TEXTURES`).

    Shapes
    ------
    ``(3, patch, patch)``.

    Examples
    --------
    >>> from attnlab.data.images import texture_patterns
    >>> texture_patterns(2)[2]
    array([[ 1., -1.],
           [-1.,  1.]])
    """
    r = np.arange(patch)[:, None]
    c = np.arange(patch)[None, :]
    ones = np.ones((patch, patch))
    return np.stack([(-1.0) ** r * ones, (-1.0) ** c * ones, (-1.0) ** (r + c)])


class ColourTextureTask(NamedTuple):
    """A batch of :func:`colour_texture_task` (all arrays are numpy)."""

    images: np.ndarray  #: ``(n, grid·patch, grid·patch, 3)`` RGB in [0, 1]
    tokens: np.ndarray  #: ``(n, grid², patch²·3)`` the patch tokens
    colours: np.ndarray  #: ``(n, grid²)`` int colour of each patch (0 red, 1 green, 2 blue)
    textures: np.ndarray  #: ``(n, grid²)`` int texture of each patch (see TASK_TEXTURES)
    targets: np.ndarray  #: ``(n, grid², 6)`` texture mix of same colour, colour mix of same texture


def colour_texture_targets(colours: np.ndarray, textures: np.ndarray) -> np.ndarray:
    """Targets of the colour/texture task, computed by counting.

    For patch ``i``: among the patches with the same colour as ``i`` (``i`` included), the
    fraction with each of the three textures; and among the patches with the same texture as
    ``i``, the fraction with each of the three colours.

    Shapes
    ------
    ``colours, textures (n, s)`` ints in ``{0, 1, 2}`` → ``(n, s, 6)``.

    Examples
    --------
    >>> import numpy as np
    >>> from attnlab.data.images import colour_texture_targets
    >>> colours = np.array([[0, 0, 1]])            # red, red, green
    >>> textures = np.array([[0, 1, 1]])           # across, down, down
    >>> colour_texture_targets(colours, textures)[0, 1]   # patch 1: red and "down"
    array([0.5, 0.5, 0. , 0.5, 0.5, 0. ])
    """
    c_hot = np.eye(3)[colours]  # (n, s, 3)
    t_hot = np.eye(3)[textures]
    same_colour = c_hot @ np.swapaxes(c_hot, 1, 2)  # (n, s, s), 1 where colours agree
    same_texture = t_hot @ np.swapaxes(t_hot, 1, 2)
    tex_mix = same_colour @ t_hot / same_colour.sum(-1, keepdims=True)
    col_mix = same_texture @ c_hot / same_texture.sum(-1, keepdims=True)
    return np.concatenate([tex_mix, col_mix], axis=-1)


def colour_texture_task(
    n: int,
    grid: int = 8,
    patch: int = 4,
    seed: int = 0,
    amplitude: float = 0.15,
    noise: float = 0.03,
    concentration: float = 0.5,
) -> ColourTextureTask:
    """Seeded synthetic images of coloured, textured patches, with per-patch targets.

    Every patch has one of three colours (:data:`TASK_COLOURS`) and one of three textures
    (:func:`texture_patterns`, added as ``± amplitude`` to all channels), plus Gaussian pixel
    noise. Per image, the 9 colour-texture combinations get random frequencies from a
    Dirichlet distribution with the given ``concentration``, so colour and texture are
    correlated differently in every image. The targets (:func:`colour_texture_targets`) are
    the texture mix among the patches of the same colour and the colour mix among the patches
    of the same texture: a head that attends by colour reads the first, a head that attends
    by texture the second.

    Parameters
    ----------
    n : int
        Number of images.
    grid : int, optional
        Patches per side (default 8: 64 tokens).
    patch : int, optional
        Patch side in pixels (default 4: 48 values per token).
    seed : int, optional
        Seed of the generator; the same seed gives the same batch.
    amplitude, noise, concentration : float, optional
        Texture contrast, pixel noise standard deviation, Dirichlet concentration.

    Returns
    -------
    ColourTextureTask
        Images, tokens, labels and targets.

    Shapes
    ------
    ``images (n, grid·patch, grid·patch, 3)``, ``tokens (n, grid², 3·patch²)``,
    ``colours, textures (n, grid²)``, ``targets (n, grid², 6)``.

    Raises
    ------
    ValueError
        If ``n``, ``grid`` or ``patch`` is not positive, or ``patch`` is odd (the textures
        need an even patch to be orthogonal).
    TypeError
        If ``n``, ``grid`` or ``patch`` is not an integer (a bool or a float is not).

    Examples
    --------
    >>> from attnlab.data.images import colour_texture_task
    >>> task = colour_texture_task(2, seed=1)
    >>> task.tokens.shape, task.targets.shape
    ((2, 64, 48), (2, 64, 6))
    """
    n, grid, patch = check_int(n, "n"), check_int(grid, "grid"), check_int(patch, "patch")
    if patch % 2:
        raise ValueError(f"patch must be even so that the textures are orthogonal, got {patch}")
    rng = np.random.default_rng(seed)
    s = grid * grid
    combos = np.empty((n, s), dtype=np.int64)
    for i in range(n):
        freq = rng.dirichlet(np.full(9, concentration))
        combos[i] = rng.choice(9, size=s, p=freq)
    colours, textures = combos // 3, combos % 3
    tiles = (
        TASK_COLOURS[colours][:, :, None, None, :]  # (n, s, 1, 1, 3)
        + amplitude * texture_patterns(patch)[textures][..., None]  # (n, s, p, p, 1)
        + noise * rng.standard_normal((n, s, patch, patch, 3))
    )
    tiles = np.clip(tiles, 0.0, 1.0)
    tokens = tiles.reshape(n, s, patch * patch * 3)
    images = np.stack([patches_to_image(t, (grid, grid), patch) for t in tokens])
    return ColourTextureTask(
        images, tokens, colours, textures, colour_texture_targets(colours, textures)
    )
