"""Run the Examples section of every attnlab docstring as a doctest."""

import doctest
import importlib
import pkgutil

import pytest

import attnlab


def _modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(attnlab.__path__, prefix="attnlab."):
        names.append(info.name)
    return sorted(names)


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} doctest(s) failed in {name}"
