#!/usr/bin/env bash
# make test's nbval stage: every chapter re-executed alone, from attnlab's installed wheel.
#
#   bash scripts/nbval_alone.sh PYTHON [NOTEBOOK ...]     (default: every notebooks/*.ipynb)
#
# PYTHON is .venv's interpreter (it builds the wheel and runs pytest and nbval). The stage
# 1. builds the wheel and installs it with its extras [book,course] into a fresh venv in a new
#    temporary folder outside the repository (scripts/wheel_env.py: from the wheelhouse
#    _build/wheels of the pinned versions, --no-index);
# 2. runs tests/wheel against that venv (imports, the commands' --help, package data, a
#    numpy-only core);
# 3. copies each notebook alone into an empty folder and runs strict nbval on it there with
#    that venv's kernel: a notebook that reads a file of the repository, or imports something
#    the wheel does not declare, fails.
# The temporary folder is removed when the stage passes and kept (its path printed) when not.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
py=${1:?usage: scripts/nbval_alone.sh PYTHON [NOTEBOOK ...]}
py=$(cd "$(dirname "$py")" && pwd)/$(basename "$py")  # absolute, still the venv's own link
shift
if [ $# -gt 0 ]; then notebooks=("$@"); else notebooks=("$root"/notebooks/*.ipynb); fi
work=$(mktemp -d "${TMPDIR:-/tmp}/attnlab-wheel.XXXXXX") || exit 1
case "$work/" in "$root"/*) echo "nbval_alone: $work is inside the repository"; exit 1 ;; esac

fail() { echo "nbval_alone: $1 (files kept in $work)"; exit 1; }

SECONDS=0
set -o pipefail
"$py" "$root/scripts/wheel_env.py" "$work/env" 2>&1 | grep -v "is ignored: it is neither" \
  || fail "building the wheel or its venv failed"
echo "    wheel and fresh venv took ${SECONDS}s"

# The kernel must see the wheel alone: no PYTHONPATH into the checkout. Byte-code is cached
# (the wheel is installed with --no-compile, so each module is compiled once, when imported).
# Matplotlib gets its own configuration folder, its font cache built here from this venv's own
# fonts: the machine's shared cache may list fonts of another install (or of one since deleted),
# and every figure would then print "findfont: ... not found" on stderr, which strict nbval
# rightly fails (and the message of a first build would land in the first figure's cell).
export MPLCONFIGDIR="$work/matplotlib"
clean=(env -u PYTHONPATH -u PYTHONHOME -u PYTHONDONTWRITEBYTECODE)
"${clean[@]}" "$work/env/venv/bin/python" -c "import matplotlib.font_manager" \
  || fail "matplotlib's font cache could not be built"

SECONDS=0
ATTNLAB_WHEEL_WORK="$work/env" "${clean[@]}" "$py" -m pytest "$root/tests/wheel" -q \
  -p no:cacheprovider || fail "the installed wheel's tests failed"
echo "    the installed wheel's tests took ${SECONDS}s"

mkdir -p "$work/run"
printf '[pytest]\n' > "$work/run/pytest.ini"  # pytest's rootdir: no configuration of the checkout
for nb in "${notebooks[@]}"; do
  name=$(basename "$nb" .ipynb)
  mkdir "$work/run/$name" && cp "$nb" "$work/run/$name/" || fail "cannot copy $nb"
done
SECONDS=0
(cd "$work/run" && JUPYTER_PATH="$work/env/jupyter/share/jupyter" "${clean[@]}" \
  "$py" -m pytest --nbval --nbval-kernel-name attnlab-wheel \
    --nbval-sanitize-with "$root/nbval_sanitize.cfg" --nbval-cell-timeout=600 \
    -p no:cacheprovider -q --durations=5 */*.ipynb) || fail "strict nbval failed"
echo "    strict nbval of ${#notebooks[@]} notebook(s), each alone, took ${SECONDS}s"
rm -rf "$work"
