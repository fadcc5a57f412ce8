"""Every chapter keeps to the book's prose bar: 1,500 to 3,500 words (DESIGN.md, HELPERS.md).

A chapter's prose is the text of its markdown cells, exercises and solutions included, without
what a reader does not read as prose: display math ``$$...$$``, inline math ``$...$``, inline
code and role targets (a backtick span), and the lines that are MyST markup only (directive
fences opening with three backticks or ``:::``, targets such as ``(sec-01-x)=``, directive
options such as ``:label:`` or ``:class:``, and the heading lines of the exercise markup,
``**Exercise NN.k · Title**`` and ``**Solution NN.k**``, which stand where the directive's
fence line stood and so are not counted either). A word is a whitespace-separated token that holds a
letter or a digit, so list bullets, table rules and heading marks do not count. A role such as
``{cite}`key``` leaves its name, one word standing for the reference it renders.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")) + sorted(
    (ROOT / "notebooks").glob("A[0-9]_*.ipynb")  # appendix notebooks keep the same bar
)
LOW, HIGH = 1500, 3500

DISPLAY_MATH = re.compile(r"\$\$.*?\$\$", re.S)
INLINE_MATH = re.compile(r"\$[^$]+\$")
INLINE_CODE = re.compile(r"`[^`]*`")
MARKUP_LINE = re.compile(
    r"^\s*(```|:::|\([\w:-]+\)=\s*$|:[\w-]+:"
    r"|\*\*(Exercise [A-Za-z]?\d+\.\d+ · .*|Solution [A-Za-z]?\d+\.\d+)\*\*\s*$)"
)
WORD = re.compile(r"[^\W_]")  # a letter or a digit, in any script


def prose_words(markdown: str) -> int:
    """The number of prose words in a markdown text (the rules are in the module docstring).

    Markup lines go first (a fence's backticks are not inline code), then display math before
    inline math, so that ``$$x$$`` is not read as two empty inline formulas (a formula may span
    lines), then inline code.
    """
    lines = [line for line in markdown.splitlines() if not MARKUP_LINE.match(line)]
    text = DISPLAY_MATH.sub(" ", "\n".join(lines))
    text = INLINE_MATH.sub(" ", text)
    text = INLINE_CODE.sub(" ", text)
    return sum(1 for token in text.split() if WORD.search(token))


def chapter_words(path: Path) -> int:
    """The prose words of all markdown cells of one chapter notebook."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return sum(prose_words("".join(c["source"])) for c in cells if c["cell_type"] == "markdown")


def assert_within_bar(name: str, words: int) -> None:
    """Fail, naming the chapter and its count, unless LOW <= words <= HIGH."""
    assert LOW <= words <= HIGH, (
        f"{name}: {words:,} words of prose, outside the bar of {LOW:,} to {HIGH:,}"
    )


def test_there_are_chapters():
    assert len(CHAPTERS) >= 10, f"only {len(CHAPTERS)} chapter notebooks found"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_prose_is_within_the_bar(path):
    assert_within_bar(path.stem, chapter_words(path))


SAMPLE = """\
(sec-99-sample)=
## 99.1 A small sample

The logits $e = q \\cdot k$ of `sdpa` are
$$
e = \\frac{q k^\\top}{\\sqrt{d}}
$$
scaled, as {cite}`vaswani2017attention` says.

```{exercise} 99.1 · A title in the fence line
:label: ex-99-1
:nonumber:

- Compute $x^2$ for 3 values.
```

| a | b |
|---|---|
"""
# Counted by hand, line by line: "99.1 A small sample" 4; "The logits of are" 4; "scaled, as
# {cite} says." 4; "Compute for 3 values." 4; "a" and "b" in the table 2. Total 18. The label,
# the fences, the options, the formulas, `sdpa` and the citation key are not words.
SAMPLE_WORDS = 18


def test_the_counter_on_a_sample_counted_by_hand():
    assert prose_words(SAMPLE) == SAMPLE_WORDS


def test_the_counter_removes_math_and_code_and_markup():
    """Each removal matters: without it the sample counts more words."""
    assert prose_words("two words") == 2
    assert prose_words("two $a + b = c$ words") == 2
    assert prose_words("two $$\na + b\n= c\n$$ words") == 2
    assert prose_words("two `x = f(a, b)` words") == 2
    assert prose_words(":label: ex-1\n:class: dropdown\n(sec-x)=\n```{note}\ntwo words\n```") == 2
    assert prose_words("**Exercise 99.1 · A title**\n\ntwo words\n\n**Solution 99.1**") == 2
    # Bold prose that is not the markup's heading line counts.
    assert prose_words("**Exercise 99.1 · A title** two words") == 6
    assert prose_words("- two | words\n|---|---|\n# ") == 2
    # A line that only starts like markup but is prose keeps its words.
    assert prose_words("(as in chapter 09)= is not a label") == 8


def test_the_bar_can_fail():
    assert_within_bar("ok", LOW)
    assert_within_bar("ok", HIGH)
    with pytest.raises(AssertionError, match=r"long: 3,501 words"):
        assert_within_bar("long", HIGH + 1)
    with pytest.raises(AssertionError, match=r"short: 1,499 words"):
        assert_within_bar("short", LOW - 1)
