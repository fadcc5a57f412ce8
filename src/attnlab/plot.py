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
    cell_labels: Sequence[Sequence[str]] | None = None,
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
    cell_labels : sequence of sequence of str, optional
        Text for each cell, shape ``(rows, cols)``, written instead of the values (for a
        matrix whose entries are codes, e.g. which head and token each entry comes from).

    Returns
    -------
    matplotlib.image.AxesImage
        The image, for further styling.
    """
    m = np.asarray(matrix, dtype=float)
    if m.ndim != 2:
        raise ValueError(f"heatmap needs a 2-D matrix, got shape {m.shape}")
    if cell_labels is not None:
        label_shape = (len(cell_labels), *{len(row) for row in cell_labels})
        if label_shape != m.shape:
            raise ValueError(f"cell_labels must have shape {m.shape}, got rows of {label_shape}")
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
    if annotate or cell_labels is not None:
        middle = (np.nanmin(m) + np.nanmax(m)) / 2
        for (i, j), value in np.ndenumerate(m):
            # light text on the dark ends of each colour map
            dark = abs(value) > 0.6 * bound if signed else value < middle
            colour = "white" if dark else "black"
            text = fmt.format(value) if cell_labels is None else cell_labels[i][j]
            ax.text(j, i, text, ha="center", va="center", fontsize=8, color=colour)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return image


def _shape_of(symbols: Sequence[str], sizes: dict[str, int]) -> tuple[int, ...]:
    """Evaluate symbolic axis sizes like ``("s", "h*d_v")`` with ``sizes``."""
    shape = []
    for symbol in symbols:
        value = 1
        for factor in symbol.replace("·", "*").split("*"):
            name = factor.strip()
            if name.isdigit():
                value *= int(name)
            elif name in sizes:
                value *= int(sizes[name])
            else:
                raise ValueError(f"axis {symbol!r} uses {name!r}, which sizes does not give")
        shape.append(value)
    return tuple(shape)


def flow_diagram(
    ax: plt.Axes,
    boxes: Sequence[str],
    *,
    arrows: Sequence[str] | None = None,
    skips: Sequence[tuple[int, int]] = (),
    vertical: bool = False,
) -> list[mpl.text.Text]:
    """Draw labelled boxes in a chain, joined by arrows, with optional skip (residual) arcs.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        Where to draw (its ticks and frame are turned off).
    boxes : sequence of str
        The box labels, in order along the chain.
    arrows : sequence of str, optional
        One label per arrow between consecutive boxes (``len(boxes) - 1`` of them).
    skips : sequence of (int, int)
        Pairs ``(i, j)`` with ``i < j``: an extra arc from box ``i`` to box ``j`` (a residual).
    vertical : bool
        Run the chain from top to bottom instead of left to right.

    Returns
    -------
    list of matplotlib.text.Text
        The box texts, in order (their positions and labels can be checked).

    Shapes
    ------
    ``n`` boxes → ``n`` texts, ``n - 1`` arrows, ``len(skips)`` arcs.

    Raises
    ------
    ValueError
        If there is no box, the number of arrow labels is not ``len(boxes) - 1``, or a skip
        does not join two different boxes forwards.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> from attnlab.plot import flow_diagram
    >>> fig, ax = plt.subplots()
    >>> [t.get_text() for t in flow_diagram(ax, ["x", "f(x)"], arrows=["f"])]
    ['x', 'f(x)']
    >>> plt.close(fig)
    """
    n = len(boxes)
    if n == 0:
        raise ValueError("flow_diagram needs at least one box")
    if arrows is not None and len(arrows) != n - 1:
        raise ValueError(f"arrows needs {n - 1} labels for {n} boxes, got {len(arrows)}")
    for i, j in skips:
        if not 0 <= i < j < n:
            raise ValueError(f"skip ({i}, {j}) must join two boxes forwards, 0 <= i < j < {n}")
    step = 1.8  # distance between box centres, in data units
    positions = [(0.0, -step * k) if vertical else (step * k, 0.0) for k in range(n)]
    style = {"boxstyle": "round,pad=0.4", "fc": "#e8eef7", "ec": "#33507a"}
    texts = [
        ax.text(x, y, label, ha="center", va="center", fontsize=9, bbox=style)
        for (x, y), label in zip(positions, boxes, strict=True)
    ]
    for k in range(n - 1):
        (x0, y0), (x1, y1) = positions[k], positions[k + 1]
        ax.annotate("", xy=(x1 - 0.34 * (x1 - x0), y1 - 0.34 * (y1 - y0)),
                    xytext=(x0 + 0.34 * (x1 - x0), y0 + 0.34 * (y1 - y0)),
                    arrowprops={"arrowstyle": "->", "color": "#33507a"})
        if arrows is not None:
            mx, my = (x0 + x1) / 2, (y0 + y1) / 2
            if vertical:
                ax.text(mx + 0.15, my, arrows[k], ha="left", va="center", fontsize=8,
                        color="#555555")
            else:  # above the boxes, where a label wider than the gap overlaps nothing
                ax.text(mx, my + 0.55, arrows[k], ha="center", va="bottom", fontsize=8,
                        color="#555555")
    for i, j in skips:
        (x0, y0), (x1, y1) = positions[i], positions[j]
        if vertical:
            start, end, bend = (x0 + 0.45, y0), (x1 + 0.45, y1), "arc3,rad=-0.4"
        else:
            start, end, bend = (x0, y0 - 0.35), (x1, y1 - 0.35), "arc3,rad=0.25"
        ax.annotate("", xy=end, xytext=start,
                    arrowprops={"arrowstyle": "->", "color": "#b5532d", "ls": "--",
                                "connectionstyle": bend})
    xs, ys = zip(*positions, strict=True)
    ax.set_xlim(min(xs) - 0.9, max(xs) + (1.6 if vertical else 0.9))
    ax.set_ylim(min(ys) - (0.9 if vertical else 1.4), max(ys) + (0.9 if vertical else 1.0))
    ax.set_axis_off()
    return texts


def shape_flow(
    ax: plt.Axes,
    stages: Sequence[tuple[str, Sequence[str], Sequence[int]]],
    sizes: dict[str, int],
    *,
    arrows: Sequence[str] | None = None,
) -> list[mpl.text.Text]:
    """Draw the tensors of a computation as a chain of boxes, with symbolic and actual shapes.

    Each stage is ``(name, symbolic axes, actual shape)``, the actual shape taken from a real
    forward pass. The symbolic axes (``"h"``, ``"s"``, ``"h*d_v"``) are evaluated with
    ``sizes``; a disagreement raises, so a diagram drawn from a forward pass cannot drift from
    the code.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        Where to draw.
    stages : sequence of (str, sequence of str, sequence of int)
        Tensor name, its axes in symbols, its actual shape (``array.shape``).
    sizes : dict
        The integer value of every symbol, e.g. ``{"s": 5, "d": 8, "h": 2, "d_k": 4}``.
    arrows : sequence of str, optional
        Labels of the operations between consecutive stages.

    Returns
    -------
    list of matplotlib.text.Text
        The box texts, each ``"name\\n(axes)\\n= (sizes)"``.

    Shapes
    ------
    ``n`` stages → ``n`` boxes.

    Raises
    ------
    ValueError
        If a symbol is missing from ``sizes`` or an actual shape differs from its symbols.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> import numpy as np
    >>> from attnlab.plot import shape_flow
    >>> x = np.zeros((5, 8))
    >>> fig, ax = plt.subplots()
    >>> print(shape_flow(ax, [("X", ("s", "d"), x.shape)], {"s": 5, "d": 8})[0].get_text())
    X
    (s, d)
    = (5, 8)
    >>> plt.close(fig)
    """
    labels = []
    for name, symbols, actual in stages:
        expected = _shape_of(symbols, sizes)
        if tuple(int(a) for a in actual) != expected:
            raise ValueError(
                f"stage {name!r}: actual shape {tuple(actual)} differs from "
                f"({', '.join(symbols)}) = {expected} with sizes {sizes}"
            )
        axes = ", ".join(s.replace("*", "·") for s in symbols)
        numbers = ", ".join(str(v) for v in expected)
        labels.append(f"{name}\n({axes})\n= ({numbers})")
    return flow_diagram(ax, labels, arrows=arrows)


def glue(name: str, value: object, display: bool = True) -> None:
    """Glue ``value`` under ``name`` for the book's ``{glue:md}`` roles; a no-op without myst-nb.

    With myst-nb installed (``attnlab[book]``, the book's build) this is ``myst_nb.glue``: the
    value's display data is stored in the cell's output, where the built page's
    ``{glue:md}`name``` role finds it. Without it (a runtime that installed attnlab alone)
    nothing is stored and, with ``display=True``, the value is shown as an ordinary output, so
    the chapter still runs top to bottom; only the built book needs the glued values.

    Parameters
    ----------
    name : str
        The name the markdown cites, unique in the notebook.
    value : object
        What to glue (for example ``IPython.display.Markdown("0.95")``).
    display : bool, default True
        Whether to show the value in the cell's output as well.

    Raises
    ------
    TypeError
        If ``name`` is not a string or ``display`` not a bool.
    ValueError
        If ``name`` is empty or holds whitespace (a role could not cite it).
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a string, got {type(name).__name__}")
    if not name or any(ch.isspace() for ch in name):
        raise ValueError(f"name must be a non-empty string without whitespace, got {name!r}")
    if not isinstance(display, bool):
        raise TypeError(f"display must be a bool, got {type(display).__name__}")
    try:
        from myst_nb import glue as myst_glue
    except ImportError:  # no myst-nb: nothing to glue into, the chapter runs on
        if display:
            from IPython.display import display as show

            show(value)
        return
    myst_glue(name, value, display=display)
