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
#    the wheel does not declare, fails. Each notebook is its own pytest process with its own
#    IPython folder; NBVAL_JOBS of them run at once (default: the usable cores, at most 2),
#    the longest first. Each notebook's log is printed whole when it ends (never interleaved),
#    and the stage fails, naming every notebook that failed, if any one does.
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

# How many at once: NBVAL_JOBS, else the cores this process may use (attnlab._cli), at most 2.
# The chapters that train set torch to one thread themselves; the others compute little.
jobs=${NBVAL_JOBS:-$("$py" -c 'from attnlab._cli import usable_cores; print(min(2, usable_cores()))' 2>/dev/null || echo 1)}
case "$jobs" in ''|*[!0-9]*|0) fail "NBVAL_JOBS must be a positive integer, got '$jobs'" ;; esac

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

mkdir -p "$work/run" "$work/log" "$work/ipython"
printf '[pytest]\n' > "$work/run/pytest.ini"  # pytest's rootdir: no configuration of the checkout
names=()
for nb in "${notebooks[@]}"; do
  name=$(basename "$nb" .ipynb)
  mkdir "$work/run/$name" && cp "$nb" "$work/run/$name/" || fail "cannot copy $nb"
  names+=("$name")
done

# The longest first, so that the last notebook to end does not run alone for long: the order
# of their times in strict nbval, two at a time on 2 cores at load 13 (seconds: 11 342, 10 126,
# 07 90, 04 41, 01 40, 12 about 30, 05 34, 06 32, 08 30, 02 26, 03 26, A1 24, 09 22). A notebook not listed
# (a new chapter) goes first, as it may be long.
order="11_language_model 10_gam_study 07_luong_attention 04_scaled_attention 01_local_context
12_gam_on_language 05_multi_head_attention 06_attention_heads_on_images 08_generalized_attention
02_dot_product_attention 03_self_attention A1_linear_memory 09_positions"
queue=()
for name in "${names[@]}"; do
  case " $(echo $order) " in *" $name "*) ;; *) queue+=("$name") ;; esac
done
for name in $order; do
  for have in "${names[@]}"; do [ "$have" = "$name" ] && queue+=("$name"); done
done

# Chapter 11 trains on two threads within its 120 s budget: it runs with nothing beside it
# (beside another notebook its two threads are slower than one), the others NBVAL_JOBS at a time.
solo=" 11_language_model "

run_one() {  # NAME: strict nbval of NAME alone in its folder, with a fresh IPython folder
  cd "$work/run" && IPYTHONDIR="$work/ipython/$1" JUPYTER_PATH="$work/env/jupyter/share/jupyter" \
    "${clean[@]}" "$py" -m pytest --nbval --nbval-kernel-name attnlab-wheel \
      --nbval-sanitize-with "$root/nbval_sanitize.cfg" --nbval-cell-timeout=600 \
      -p no:cacheprovider -q --durations=3 "$1/$1.ipynb" >"$work/log/$1.log" 2>&1
}

echo "    strict nbval of ${#queue[@]} notebook(s), each alone, $jobs at a time"
SECONDS=0
pids=() running=() begun=() failed=() alone=""
while [ ${#queue[@]} -gt 0 ] || [ ${#pids[@]} -gt 0 ]; do
  while [ ${#pids[@]} -lt "$jobs" ] && [ ${#queue[@]} -gt 0 ] && [ -z "$alone" ]; do
    case "$solo" in
      *" ${queue[0]} "*) [ ${#pids[@]} -gt 0 ] && break; alone=${queue[0]} ;;
    esac
    run_one "${queue[0]}" &
    pids+=($!) running+=("${queue[0]}") begun+=($SECONDS)
    queue=("${queue[@]:1}")
  done
  sleep 0.5
  still=() still_names=() still_begun=()
  for i in "${!pids[@]}"; do
    if kill -0 "${pids[$i]}" 2>/dev/null; then
      still+=("${pids[$i]}") still_names+=("${running[$i]}") still_begun+=("${begun[$i]}")
      continue
    fi
    wait "${pids[$i]}"; rc=$?
    name=${running[$i]} took=$((SECONDS - begun[$i]))
    [ "$name" = "$alone" ] && alone=""
    if [ $rc -eq 0 ]; then
      echo "    ok      $name (${took}s): $(tail -n 1 "$work/log/$name.log" | tr -d '=' | sed 's/^ *//')"
    else
      echo "    FAILED  $name (${took}s, exit $rc); its log:"
      sed 's/^/        /' "$work/log/$name.log"
      failed+=("$name")
    fi
  done
  pids=(${still[@]+"${still[@]}"}) running=(${still_names[@]+"${still_names[@]}"})
  begun=(${still_begun[@]+"${still_begun[@]}"})
done
if [ ${#failed[@]} -gt 0 ]; then
  fail "strict nbval failed in ${#failed[@]} notebook(s): ${failed[*]}"
fi
echo "    strict nbval of ${#names[@]} notebook(s), each alone, $jobs at a time, took ${SECONDS}s"
rm -rf "$work"
