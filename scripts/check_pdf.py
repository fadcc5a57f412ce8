"""Check the book's PDF after ``make pdf`` (stage 4 of ``make test``).

    python scripts/check_pdf.py [--build _build/latex] [--name attnlab] [--root .]

Fails (exit 1, one line per problem) when:

- a page title of ``_toc.yml`` (every chapter and appendix page, the first ``# `` heading of
  its notebook or Markdown file) or a part caption is not in the PDF's text (``pdftotext``);
- the text has ``??`` (LaTeX's mark for an unresolved reference);
- XeLaTeX's log reports an undefined reference or citation, labels that may have changed
  (the last run was not stable), or a missing character (a glyph none of the fonts has);
- a line sticks out into the margin by more than ``OVERFULL_PT`` (code or a table that neither
  wraps nor shrinks: LaTeX's "Overfull \\hbox");
- the LaTeX source shows TeX as text in the prose (``\\textbackslash{}name`` or ``\\$`` outside
  code): maths or markup that was not rendered;
- fewer images were placed than the sources show (every PNG output of the notebooks and every
  figure/image of the pages; counted from the sources, not from the LaTeX).

Prints the page count and the file size either way.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import yaml

LOG_PROBLEMS = [
    (re.compile(r"LaTeX Warning: (Hyper r|R)eference `[^']*' on page \S+ undefined"),
     "undefined reference"),
    (re.compile(r"LaTeX Warning: Citation `[^']*' on page \S+ undefined"), "undefined citation"),
    (re.compile(r"There were undefined (references|citations)"), "undefined references"),
    (re.compile(r"Label\(s\) may have changed"), "labels not stable after the last run"),
    (re.compile(r"Label `[^']*' multiply defined"), "label defined twice"),
    (re.compile(r"Missing character: There is no .*"), "missing character"),
]
# An overfull line is reported past this (a few points are invisible; code that does not wrap is
# centimetres wide).
OVERFULL_PT = 10.0
_OVERFULL = re.compile(r"Overfull \\hbox \((\d+(?:\.\d+)?)pt too wide\).*")
# Markdown/MyST markup a heading may carry that the typeset title does not show.
_MARKUP = re.compile(r"[`*_]|\{[a-z:]+\}")
_FIGURE = re.compile(r"^(```|:::)\{(figure|image)\}", re.M)
_MD_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]+\)")


def normalise(text: str) -> str:
    """Text as compared: NFKC (ligatures apart), one kind of quote and dash, single spaces."""
    text = unicodedata.normalize("NFKC", text)
    text = text.replace("\u2019", "'").replace("\u2018", "'").replace("\u2010", "-")
    text = text.replace("\u00ad", "")
    return " ".join(text.split())


def toc_pages(root: Path) -> tuple[list[str], list[str]]:
    """(every page of ``_toc.yml`` as a path without suffix, root first; the part captions)."""
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    pages, captions = [toc["root"]], []
    for part in toc.get("parts", []):
        if part.get("caption"):
            captions.append(part["caption"])
        pages += [chapter["file"] for chapter in part.get("chapters", [])]
    return pages, captions


def page_source(root: Path, page: str) -> tuple[str, list[dict]]:
    """(the Markdown of a page, its notebook cells or [] for a Markdown page)."""
    notebook = root / f"{page}.ipynb"
    if notebook.exists():
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        markdown = "\n\n".join(
            "".join(cell["source"]) for cell in cells if cell["cell_type"] == "markdown"
        )
        return markdown, cells
    return (root / f"{page}.md").read_text(encoding="utf-8"), []


def page_title(markdown: str) -> str:
    """The first level-1 heading, without its Markdown markup."""
    match = re.search(r"^# (.+)$", markdown, re.M)
    if match is None:
        raise ValueError("page has no level-1 heading ('# title')")
    return normalise(_MARKUP.sub("", match.group(1)))


def expected_images(markdown: str, cells: list[dict]) -> int:
    """Images the HTML shows: PNG outputs of code cells, figures and images of the Markdown."""
    outputs = sum(
        1
        for cell in cells
        if cell["cell_type"] == "code"
        for output in cell.get("outputs", [])
        if "image/png" in output.get("data", {})
    )
    return outputs + len(_FIGURE.findall(markdown)) + len(_MD_IMAGE.findall(markdown))


def log_problems(log: str) -> list[str]:
    """One line per problem XeLaTeX's log reports (see LOG_PROBLEMS)."""
    problems = []
    for line in log.splitlines():
        for pattern, what in LOG_PROBLEMS:
            match = pattern.search(line)
            if match:
                problems.append(f"log: {what}: {match.group(0)}")
        overfull = _OVERFULL.search(line)
        if overfull and float(overfull.group(1)) > OVERFULL_PT:
            problems.append(f"log: a line runs into the margin: {overfull.group(0)}")
    return problems


def _strip_code(tex: str) -> str:
    """The LaTeX source without verbatim blocks and inline code (where TeX-as-text is fine)."""
    tex = re.sub(r"\\begin\{sphinxVerbatim\}.*?\\end\{sphinxVerbatim\}", "", tex, flags=re.S)
    out, i = [], 0
    opener = r"\sphinxcode{"
    while True:
        j = tex.find(opener, i)
        if j < 0:
            out.append(tex[i:])
            return "".join(out)
        out.append(tex[i:j])
        depth, k = 1, j + len(opener)
        while k < len(tex) and depth:
            if tex[k] == "\\":
                k += 2
                continue
            depth += {"{": 1, "}": -1}.get(tex[k], 0)
            k += 1
        i = k


def tex_as_text(tex: str) -> list[str]:
    """Places where the prose shows TeX as text: ``\\textbackslash{}name`` or ``\\$``."""
    prose = _strip_code(tex)
    found = []
    for match in re.finditer(r"\\textbackslash\{\}[A-Za-z]+|\\\$", prose):
        context = " ".join(prose[max(0, match.start() - 60): match.end() + 40].split())
        found.append(f"TeX shown as text: ...{context}...")
    return found


def text_problems(text: str, titles: list[str]) -> list[str]:
    """Titles missing from the PDF's text, and ``??`` marks."""
    flat = normalise(text)
    problems = [f"title not in the PDF: {title!r}" for title in titles if title not in flat]
    for match in re.finditer(r"\?\?", flat):
        context = flat[max(0, match.start() - 60): match.end() + 20]
        problems.append(f"'??' in the PDF: ...{context}...")
    return problems


def _run(*command: str) -> str:
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", type=Path, default=Path("_build/latex"))
    parser.add_argument("--name", default="attnlab")
    parser.add_argument("--root", type=Path, default=Path("."))
    args = parser.parse_args(argv)
    pdf = args.build / f"{args.name}.pdf"
    if not pdf.is_file():
        print(f"check_pdf: no {pdf}: run make pdf first")
        return 1

    pages, captions = toc_pages(args.root)
    titles, images = list(captions), 0
    for page in pages:
        markdown, cells = page_source(args.root, page)
        titles.append(page_title(markdown))
        images += expected_images(markdown, cells)

    text = _run("pdftotext", "-enc", "UTF-8", str(pdf), "-")
    problems = text_problems(text, titles)
    log = (args.build / f"{args.name}.log").read_text(encoding="utf-8", errors="replace")
    problems += log_problems(log)
    tex = (args.build / f"{args.name}.tex").read_text(encoding="utf-8")
    problems += tex_as_text(tex)
    placed = sum(
        1 for line in _run("pdfimages", "-list", str(pdf)).splitlines()[2:]
        if line.split()[2:3] == ["image"]
    )
    if placed < images:
        problems.append(f"images: the sources show {images}, the PDF places only {placed}")

    info = dict(
        line.split(":", 1) for line in _run("pdfinfo", str(pdf)).splitlines() if ":" in line
    )
    size_mb = pdf.stat().st_size / 1e6
    print(
        f"    {pdf}: {info['Pages'].strip()} pages, {size_mb:.1f} MB; {len(titles)} titles "
        f"checked; the sources show {images} images, the PDF places {placed}"
    )
    for problem in problems:
        print(f"check_pdf: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
