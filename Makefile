# attnlab: every target sets up .venv itself, so a fresh clone needs only `make book` or `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV    := .venv
PY      := $(VENV)/bin/python
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
MATHJAX := _extra/mathjax/tex-svg-full.js
# The interpreter that creates the venv: python3.11 when present, else python3 (checked >= 3.11).
PYTHON  ?= $(shell command -v python3.11 || command -v python3)
# pip on this kind of machine warns about every missing local index folder: keep its output short.
PIP_QUIET := 2>&1 | grep -v "is ignored: it is neither a file nor a directory" || true

# PyTorch. From PyPI, torch==2.13.0 on Linux x86_64 is the CUDA build: the 527 MB wheel plus
# about 2.2 GB of NVIDIA libraries and triton (2.7 GB of wheels, measured from PyPI's metadata).
# `make setup TORCH_INDEX=cpu` takes the CPU-only wheel from PyTorch's own index instead
# (pip's standard index options; every other package still comes from PyPI).
TORCH_INDEX ?=
ifeq ($(TORCH_INDEX),cpu)
PIP_INDEX := --index-url https://download.pytorch.org/whl/cpu --extra-index-url https://pypi.org/simple
else ifneq ($(TORCH_INDEX),)
$(error TORCH_INDEX is 'cpu' or unset, not '$(TORCH_INDEX)')
endif

BOOK_OPTS  := -W -n --keep-going

.PHONY: help setup book pdf test lint unit nbval pdf-check book-strict browser lab execute bench \
        student study study-language clean

help:
	@echo "make book   set up .venv, then build the HTML book into _build/html"
	@echo "make pdf    build the whole book as one PDF, _build/latex/attnlab.pdf (installs"
	@echo "            Debian's TeX Live with scripts/ensure_texlive.sh when it is missing)"
	@echo "make test   set up .venv, then lint, unit tests, strict nbval of each notebook alone"
	@echo "            from the wheel in a fresh venv, the PDF and its check,"
	@echo "            strict book build, browser tests of every built page"
	@echo "make lab    open the notebooks in JupyterLab (as root: with --allow-root)"
	@echo "make setup  only create .venv; TORCH_INDEX=cpu takes PyTorch's CPU-only wheel (README)"
	@echo "make execute NB=notebooks/NN_topic.ipynb  re-run one notebook and store its outputs"
	@echo "make bench  run the benchmarks and rewrite the tables of book/performance.md"
	@echo "            (and the packaged figure src/attnlab/figures/gam_scaling.png)"
	@echo "make study  run the full grid of chapter 10's study into the package data"
	@echo "            src/attnlab/study/results/ (resumable; chapter 10 reads that copy)"
	@echo "make student  rewrite the student editions in student/ from the chapters"
	@echo "make clean  remove _build, _extra and caches (keeps .venv)"

# ---- set-up ---------------------------------------------------------------------------------
$(STAMP): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || \
	  { echo "attnlab needs Python >= 3.11; found $$($(PYTHON) --version). Set PYTHON=..."; exit 1; }
	@test -x $(PY) || { echo "==> creating $(VENV) with $(PYTHON)"; $(PYTHON) -m venv $(VENV); }
	@echo "==> installing requirements.txt into $(VENV) (about 2 minutes the first time)"
	@set -o pipefail; $(PY) -m pip install -q $(PIP_INDEX) -r requirements.txt $(PIP_QUIET)
	@$(PY) -c 'import torch, numpy, jupyter_book, nbval' || { echo "install failed"; exit 1; }
	@set -o pipefail; $(PY) -m pip install -q --no-deps -e . $(PIP_QUIET)
	@$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (attnlab)" >/dev/null
	@touch $(STAMP)

setup: $(STAMP) $(MATHJAX)

# MathJax 3 for offline reading, copied from the pinned django-static-mathjax package.
$(MATHJAX): $(STAMP)
	@rm -rf _extra/mathjax && mkdir -p _extra/mathjax
	@src=$$($(PY) -c 'import mathjax, pathlib; print(pathlib.Path(mathjax.__file__).parent / "static/mathjax/es5")'); \
	  cp -r "$$src"/. _extra/mathjax/ && \
	  cp $$($(PY) -c 'import importlib.metadata as m; print(m.distribution("django-static-mathjax")._path)')/LICENSE _extra/mathjax/LICENSE
	@test -f $(MATHJAX)

# ---- the book -------------------------------------------------------------------------------
book: setup
	@echo "==> building the book (execution off: make test's nbval checks the stored outputs)"
	$(BIN)/jupyter-book build . $(BOOK_OPTS)
	@echo "Open $(CURDIR)/_build/html/index.html"

# ---- the PDF --------------------------------------------------------------------------------
# Sphinx's LaTeX builder (strict, like the HTML: an SVG or raw HTML output it cannot typeset
# fails here) writes one document over the whole toc into _build/latex; latexmk runs XeLaTeX
# until every cross-reference is resolved. book/latex/ has the class and the extension; the
# HTML build links the PDF from the intro page and copies it into _build/html when it exists.
PDF := _build/latex/attnlab.pdf

pdf: setup
	@bash scripts/ensure_texlive.sh || { echo "make pdf: FAILED (no TeX Live)"; exit 1; }
	@echo "==> building the PDF: LaTeX sources into _build/latex, then latexmk -pdfxe"
	@rm -rf _build/latex
	@SECONDS=0; $(BIN)/jupyter-book build . --builder latex $(BOOK_OPTS) --quiet || \
	  { echo "make pdf: FAILED at the LaTeX sources (Sphinx's latex builder)"; exit 1; }; \
	  echo "    LaTeX sources took $${SECONDS}s"
	@SECONDS=0; cd _build/latex && \
	  latexmk -pdfxe -interaction=nonstopmode -halt-on-error -file-line-error attnlab.tex \
	    >latexmk.out 2>&1 || \
	  { grep -A3 -m5 ':[0-9]*: ' attnlab.log; echo "make pdf: FAILED in XeLaTeX: see _build/latex/attnlab.log"; exit 1; }; \
	  echo "    XeLaTeX (latexmk) took $${SECONDS}s"
	@echo "Open $(CURDIR)/$(PDF)"

# ---- the tests ------------------------------------------------------------------------------
# The PDF is built before the HTML, so the strict book build links it and copies it into
# _build/html, and the browser stage checks that link like every other.
test: setup
	@$(MAKE) --no-print-directory lint unit nbval pdf-check book-strict browser
	@echo "make test: all stages passed"

lint: setup
	@echo "==> [1/6] ruff check (package, tests, notebooks, benchmarks)"
	@SECONDS=0; $(BIN)/ruff check src tests notebooks benchmarks || { echo "make test: FAILED at lint"; exit 1; }; echo "    lint took $${SECONDS}s"

# The unit tests run in UNIT_JOBS pytest-xdist workers (default: the cores this process may
# use, at most 4; 1 runs them in one process). --dist loadgroup: tests/conftest.py keeps the
# tests of the grader's sandbox on one worker (never two graders at once) and each module with
# a module-scoped fixture on one worker (built once, as in one process).
UNIT_JOBS ?=
unit: setup
	@echo "==> [2/6] unit tests (pytest tests/, in parallel)"
	@bash scripts/ensure_sandbox.sh; rc=$$?; \
	  if [ $$rc -eq 1 ]; then echo "make test: FAILED at unit tests (no grading sandbox)"; exit 1; fi
	@SECONDS=0; n="$(UNIT_JOBS)"; \
	  [ -n "$$n" ] || n=$$($(PY) -c 'from attnlab._cli import usable_cores; print(min(4, usable_cores()))'); \
	  case "$$n" in ''|*[!0-9]*|0) echo "UNIT_JOBS must be a positive integer, got '$$n'"; exit 1 ;; esac; \
	  if [ "$$n" -eq 1 ]; then n=0; fi; \
	  $(BIN)/pytest tests/ -q -n $$n --dist loadgroup --durations=10 \
	    --ignore=tests/test_offline.py --ignore=tests/wheel || { echo "make test: FAILED at unit tests"; exit 1; }; \
	  echo "    unit tests took $${SECONDS}s ($$n worker(s); 0: one process)"

# Every chapter alone, from the wheel: build attnlab's wheel, install it with [book,course] into
# a fresh venv outside the repository (from the wheelhouse _build/wheels of the pinned versions,
# filled from the index once), run tests/wheel against it, then strict nbval on each notebook
# copied alone into an empty folder, with that venv's kernel (scripts/nbval_alone.sh).
# NBVAL_JOBS notebooks at a time (default: the usable cores, at most 2), each in its own process.
# `make nbval NB=notebooks/NN_topic.ipynb` checks one notebook that way.
NBVAL_JOBS ?=
nbval: setup
	@echo "==> [3/6] the wheel in a fresh venv, then strict nbval on every notebook alone"
	@SECONDS=0; ATTNLAB_PIP_INDEX="$(PIP_INDEX)" NBVAL_JOBS="$(NBVAL_JOBS)" \
	  bash scripts/nbval_alone.sh $(PY) $(NB) || \
	  { echo "make test: FAILED at nbval"; exit 1; }; echo "    nbval stage took $${SECONDS}s"

# Without TeX Live and no way to install it (not root, CI unset), the stage is skipped loudly and
# an older PDF is removed, so the HTML never links a PDF this run did not check.
pdf-check: setup
	@echo "==> [4/6] the PDF: make pdf, then scripts/check_pdf.py"
	@SECONDS=0; bash scripts/ensure_texlive.sh; rc=$$?; \
	  if [ $$rc -eq 2 ]; then rm -f $(PDF); exit 0; fi; \
	  if [ $$rc -ne 0 ]; then echo "make test: FAILED at the PDF (no TeX Live)"; exit 1; fi; \
	  $(MAKE) --no-print-directory pdf && $(PY) scripts/check_pdf.py || \
	    { echo "make test: FAILED at the PDF"; exit 1; }; \
	  echo "    PDF stage took $${SECONDS}s (TeX Live install included when it ran)"

book-strict: setup
	@echo "==> [5/6] strict book build (-W -n --keep-going, fresh)"
	@rm -rf _build/html _build/.doctrees
	@SECONDS=0; $(BIN)/jupyter-book build . $(BOOK_OPTS) || { echo "make test: FAILED at book build"; exit 1; }; echo "    book build took $${SECONDS}s"

browser: setup
	@echo "==> [6/6] browser tests: every page of _build/html in headless Chromium"
	@bash scripts/ensure_chromium.sh; rc=$$?; \
	  if [ $$rc -eq 2 ]; then exit 0; fi; \
	  if [ $$rc -ne 0 ]; then echo "make test: FAILED at browser tests (no browser)"; exit 1; fi; \
	  rm -rf _build/screenshots; SECONDS=0; \
	  $(BIN)/pytest tests/test_offline.py tests/browser -q -p no:cacheprovider || \
	    { echo "make test: FAILED at browser tests"; exit 1; }; \
	  echo "    browser tests took $${SECONDS}s (screenshots in _build/screenshots/)"

# ---- the rest -------------------------------------------------------------------------------
# Jupyter refuses to start as root ("Running as root is not recommended"), which is how a
# container or a cloud notebook image runs: there, pass the flag it asks for, and say so.
lab: setup
	@if [ "$$(id -u)" -eq 0 ]; then \
	  echo "make lab: running as root (a container?): starting JupyterLab with --allow-root"; \
	  $(BIN)/jupyter lab --allow-root notebooks/; \
	else \
	  $(BIN)/jupyter lab notebooks/; \
	fi

# Re-execute one notebook top to bottom in a fresh kernel and store its outputs:
#   make execute NB=notebooks/01_local_context.ipynb
execute: setup
	@test -n "$(NB)" || { echo "usage: make execute NB=notebooks/NN_topic.ipynb"; exit 1; }
	$(BIN)/jupyter nbconvert --to notebook --execute --inplace \
	  --ExecutePreprocessor.timeout=600 --ExecutePreprocessor.kernel_name=python3 \
	  --ExecutePreprocessor.record_timing=False "$(NB)"

bench: setup
	$(PY) benchmarks/run.py

# The student editions the book links to (Colab and Binder open them from the repository);
# tests/test_student_editions.py fails when they are stale.
student: setup
	$(PY) -m attnlab.assign notebooks/ --out student/ --force

# The full grid of chapter 10's study (940 runs, about 2 hours of training on 2 cores) on a local
# Dask cluster (--workers N; --scheduler ADDRESS for a running one); resumes from its CSV. Add --max-minutes M to stop starting runs after M minutes, --device cuda for a GPU.
# It writes the package data (attnlab.study.packaged_results reads it), so the wheel ships it.
STUDY_OUT := src/attnlab/study/results
study: setup
	$(PY) -m attnlab.study --grid full --out $(STUDY_OUT)

# Issue 27's language grid (the rate pilot, then the main grid; plan and CPU-hours in
# src/attnlab/study/language_plan.md) on one worker; resumes from its CSVs.
study-language: setup
	$(PY) -m attnlab.study --grid language --workers 1 --out src/attnlab/study/language_results

clean:
	rm -rf _build _extra .pytest_cache .ruff_cache .hypothesis
