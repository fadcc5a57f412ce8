"""attnlab.plot.glue: myst-nb's glue where myst-nb is installed, a no-op where it is not."""

from __future__ import annotations

import sys

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.display import Markdown
from IPython.utils.capture import capture_output

from attnlab.plot import glue


@pytest.fixture(scope="module")
def shell():
    return InteractiveShell.instance()


def _outputs(call):
    with capture_output() as captured:
        call()
    return [(out.data, out.metadata) for out in captured.outputs]


def test_glue_stores_what_myst_nb_stores(shell):
    import myst_nb

    mine = _outputs(lambda: glue("acc.x", Markdown("0.950"), display=False))
    theirs = _outputs(lambda: myst_nb.glue("acc.x", Markdown("0.950"), display=False))
    assert mine == theirs and len(mine) == 1
    data, metadata = mine[0]
    assert metadata["scrapbook"]["name"] == "acc.x"  # what {glue:md}`acc.x` looks up
    assert any(key.endswith("text/markdown") and value == "0.950" for key, value in data.items())


def test_without_myst_nb_glue_is_a_no_op(shell, monkeypatch):
    monkeypatch.setitem(sys.modules, "myst_nb", None)  # `from myst_nb import glue` fails
    with pytest.raises(ImportError):
        from myst_nb import glue as _  # noqa: F401
    assert _outputs(lambda: glue("csv.rows", Markdown("940"), display=False)) == []
    shown = _outputs(lambda: glue("csv.rows", Markdown("940")))  # display=True: shown plainly
    assert len(shown) == 1 and shown[0][0]["text/markdown"] == "940"
    assert "scrapbook" not in shown[0][1]


@pytest.mark.parametrize(
    ("name", "display", "error"),
    [(3, False, TypeError), ("", False, ValueError), ("a b", False, ValueError),
     ("ok", "yes", TypeError)],
)  # fmt: skip
def test_glue_refuses_bad_arguments(name, display, error):
    with pytest.raises(error):
        glue(name, 1, display=display)
