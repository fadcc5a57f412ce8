"""One figure style for the whole book (needs matplotlib).

Chapters call :func:`use_book_style` once, then draw with plain matplotlib or with the few
helpers below, so every figure in the book looks alike: same size, fonts and colour maps.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np

#: Colour map for weights in [0, 1] (attention weights, probabilities).
WEIGHTS_CMAP = "viridis"
#: Colour map for signed values (kernels, logits, differences).
SIGNED_CMAP = "RdBu_r"


def use_book_style() -> None:
    """Set the book's matplotlib defaults (size, fonts, PNG output at a fixed resolution)."""
    mpl.rcParams.update(
        {
            "figure.figsize": (6.4, 3.6),
            "figure.dpi": 100,
            "savefig.dpi": 100,
            "font.size": 10,
            "axes.titlesize": 11,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "image.cmap": WEIGHTS_CMAP,
            "svg.hashsalt": "attnlab",
        }
    )


def heatmap(
    ax: plt.Axes,
    matrix: np.typing.ArrayLike,
    *,
    row_labels: Sequence[str] | None = None,
    col_labels: Sequence[str] | None = None,
    title: str | None = None,
    signed: bool = False,
    annotate: bool = False,
    fmt: str = "{:.2f}",
    colorbar: bool = True,
) -> mpl.image.AxesImage:
    """Draw a matrix as a heatmap on ``ax``: rows are queries, columns keys (or as labelled).

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        Where to draw.
    matrix : array_like
        The matrix, shape ``(rows, cols)``.
    row_labels, col_labels : sequence of str, optional
        Tick labels (for example the tokens).
    title : str, optional
        Axes title.
    signed : bool
        Use a diverging colour map centred on zero (for logits, kernels, differences) instead
        of the weights colour map.
    annotate : bool
        Write each value in its cell (for small matrices a reader checks by hand).
    fmt : str
        Format of the annotations.
    colorbar : bool
        Add a colour bar beside the axes.

    Returns
    -------
    matplotlib.image.AxesImage
        The image, for further styling.
    """
    m = np.asarray(matrix, dtype=float)
    if m.ndim != 2:
        raise ValueError(f"heatmap needs a 2-D matrix, got shape {m.shape}")
    bound = float(np.nanmax(np.abs(m))) or 1.0
    if signed:
        image = ax.imshow(m, cmap=SIGNED_CMAP, vmin=-bound, vmax=bound)
    else:
        image = ax.imshow(m, cmap=WEIGHTS_CMAP)
    if row_labels is not None:
        ax.set_yticks(range(m.shape[0]), labels=list(row_labels))
    if col_labels is not None:
        ax.set_xticks(range(m.shape[1]), labels=list(col_labels))
    if title:
        ax.set_title(title)
    if annotate:
        middle = (np.nanmin(m) + np.nanmax(m)) / 2
        for (i, j), value in np.ndenumerate(m):
            # light text on the dark ends of each colour map
            dark = abs(value) > 0.6 * bound if signed else value < middle
            colour = "white" if dark else "black"
            ax.text(j, i, fmt.format(value), ha="center", va="center", fontsize=8, color=colour)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return image
