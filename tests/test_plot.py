"""Tests of attnlab.plot: the heatmap's cell labels, flow diagrams and shape flows."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from attnlab import multi_head_attention  # noqa: E402
from attnlab.plot import flow_diagram, heatmap, shape_flow  # noqa: E402


@pytest.fixture
def ax():
    fig, axes = plt.subplots()
    yield axes
    plt.close(fig)


def test_heatmap_writes_the_given_cell_labels_in_place(ax):
    labels = [["a", "b", "c"], ["d", "e", "f"]]
    heatmap(ax, np.arange(6).reshape(2, 3), cell_labels=labels, colorbar=False)
    written = {(round(t.get_position()[1]), round(t.get_position()[0])): t.get_text()
               for t in ax.texts}
    assert written == {(i, j): labels[i][j] for i in range(2) for j in range(3)}


def test_heatmap_rejects_cell_labels_of_the_wrong_shape(ax):
    with pytest.raises(ValueError, match="cell_labels must have shape"):
        heatmap(ax, np.zeros((2, 3)), cell_labels=[["a", "b"], ["c", "d"]])
    with pytest.raises(ValueError, match="cell_labels must have shape"):
        heatmap(ax, np.zeros((2, 2)), cell_labels=[["a", "b"], ["c"]])


def test_flow_diagram_draws_boxes_in_order_with_arrows_and_skips(ax):
    texts = flow_diagram(ax, ["x", "norm", "attend", "+"], arrows=["", "", ""], skips=[(0, 3)])
    assert [t.get_text() for t in texts] == ["x", "norm", "attend", "+"]
    xs = [t.get_position()[0] for t in texts]
    assert xs == sorted(xs) and len(set(xs)) == 4            # left to right, distinct places
    annotations = [c for c in ax.get_children() if isinstance(c, matplotlib.text.Annotation)]
    assert len(annotations) == 4                             # 3 arrows and 1 residual arc
    vertical = flow_diagram(ax, ["a", "b"], vertical=True)
    assert vertical[0].get_position()[1] > vertical[1].get_position()[1]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"boxes": []}, "at least one box"),
        ({"boxes": ["a", "b"], "arrows": ["1", "2"]}, "arrows needs 1 labels"),
        ({"boxes": ["a", "b"], "skips": [(1, 0)]}, "forwards"),
        ({"boxes": ["a", "b"], "skips": [(0, 2)]}, "forwards"),
    ],
)
def test_flow_diagram_rejects_bad_input(ax, kwargs, message):
    with pytest.raises(ValueError, match=message):
        flow_diagram(ax, **kwargs)


def test_shape_flow_labels_come_from_the_actual_shapes(ax):
    rng = np.random.default_rng(0)
    s, d, h = 5, 8, 2
    x = rng.normal(size=(s, d))
    w_q, w_k, w_v = (rng.normal(size=(h, d, d // h)) for _ in range(3))
    out, weights = multi_head_attention(x, w_q, w_k, w_v, rng.normal(size=(d, d)))
    sizes = {"s": s, "d": d, "h": h, "d_k": d // h, "d_v": d // h}
    texts = shape_flow(ax, [("X", ("s", "d"), x.shape), ("A", ("h", "s", "s"), weights.shape),
                            ("Y", ("s", "d"), out.shape)], sizes, arrows=["attend", "mix"])
    assert [t.get_text() for t in texts] == [
        "X\n(s, d)\n= (5, 8)", "A\n(h, s, s)\n= (2, 5, 5)", "Y\n(s, d)\n= (5, 8)"]


def test_shape_flow_evaluates_products_and_refuses_a_shape_that_drifted(ax):
    texts = shape_flow(ax, [("cat", ("s", "h*d_v"), (5, 8))], {"s": 5, "h": 2, "d_v": 4})
    assert texts[0].get_text().endswith("(s, h·d_v)\n= (5, 8)")
    with pytest.raises(ValueError, match=r"actual shape \(5, 6\) differs"):
        shape_flow(ax, [("cat", ("s", "h*d_v"), (5, 6))], {"s": 5, "h": 2, "d_v": 4})
    with pytest.raises(ValueError, match="'d_k', which sizes does not give"):
        shape_flow(ax, [("Q", ("s", "d_k"), (5, 4))], {"s": 5})
