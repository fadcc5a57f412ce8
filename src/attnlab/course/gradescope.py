"""A Gradescope autograder bundle: ``python -m attnlab.course.gradescope SOURCE --out ZIP``.

Gradescope builds an image from the zip (it runs ``setup.sh`` once) and, for each
submission, runs ``run_autograder``, which must write ``/autograder/results/results.json``.
The bundle holds:

* ``setup.sh``: installs bubblewrap and attnlab (from the wheel given with ``--wheel``, which
  is copied into the bundle, or from the pip requirement given with ``--requirement``) into
  a virtual environment of its own in the image;
* ``run_autograder``: copies ``/autograder/submission`` into a one-student submissions
  folder and runs ``python -m attnlab.grade`` on it against the assigned notebooks in
  ``assignment/`` (with their check modules), writing ``results.json``
  (:func:`attnlab.course.reports.gradescope_results`); if the grader writes none, a zero
  score saying so (never a silent pass);
* ``assignment/``: the ``SOURCE`` notebooks and ``*.py`` check modules.

Gradescope's container runs as root and, usually, without the privileges bubblewrap needs:
the grader then runs in its ``uid-only`` mode (``--allow-unsandboxed`` as root: each notebook
under a user id of its own, which cannot write the results). ``AUTOGRADER`` and
``ATTNLAB_PYTHON`` override ``/autograder`` and that environment's Python (for a trial run
outside Gradescope).
"""

from __future__ import annotations

import argparse
import stat
import sys
import zipfile
from pathlib import Path

SETUP = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image.
set -euo pipefail
apt-get update
apt-get install -y --no-install-recommends bubblewrap util-linux python3 python3-venv
python3 -m venv /opt/attnlab
/opt/attnlab/bin/pip install --upgrade pip
/opt/attnlab/bin/pip install {requirement} nbclient ipykernel nbformat tqdm
"""

RUN = """#!/usr/bin/env bash
# Gradescope runs this for every submission; it must write results/results.json.
set -uo pipefail
ROOT="${{AUTOGRADER:-/autograder}}"
PYTHON="${{ATTNLAB_PYTHON:-/opt/attnlab/bin/python}}"
work="$(mktemp -d)"
mkdir -p "$work/submissions/student" "$ROOT/results"
cp -r "$ROOT/submission/." "$work/submissions/student/"
rm -f "$ROOT/results/results.json"
"$PYTHON" -m attnlab.grade "$work/submissions" --source "$ROOT/source/assignment" \\
    --out "$work/grades.csv" --gradescope-results "$ROOT/results/results.json" \\
    --timeout {timeout} --seed "${{ATTNLAB_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}}" \\
    --allow-unsandboxed
status=$?
if [ ! -s "$ROOT/results/results.json" ]; then
    message="The autograder could not grade this submission (exit status $status)."
    printf '{{"score": 0, "output": "%s Please tell your instructor."}}\n' \
        "$message" > "$ROOT/results/results.json"
fi
exit 0
"""


def build(source: Path, out: Path, *, wheel: Path | None = None,
          requirement: str | None = None, timeout: float = 600.0) -> list[str]:
    """Write the bundle ``out`` (a zip) for the notebooks in ``source``; its member names.

    Raises ``ValueError`` if ``source`` holds no notebook, or if neither or both of
    ``wheel`` and ``requirement`` are given.
    """
    source, out = Path(source), Path(out)
    notebooks = [source] if source.is_file() else sorted(source.glob("*.ipynb"))
    if not notebooks or any(p.suffix != ".ipynb" for p in notebooks):
        raise ValueError(f"no notebook (.ipynb) in {source}")
    if (wheel is None) == (requirement is None):
        raise ValueError("give either --wheel (a built attnlab wheel) or --requirement "
                         "(what pip installs, e.g. 'attnlab @ git+https://...')")
    checks = [] if source.is_file() else sorted(source.glob("*.py"))
    if wheel is not None:
        requirement = f"/autograder/source/{Path(wheel).name}"
    files: dict[str, bytes] = {
        "setup.sh": SETUP.format(requirement=requirement).encode(),
        "run_autograder": RUN.format(timeout=f"{timeout:g}").encode(),
    }
    for path in [*notebooks, *checks]:
        files[f"assignment/{path.name}"] = path.read_bytes()
    if wheel is not None:
        files[Path(wheel).name] = Path(wheel).read_bytes()
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            mode = 0o755 if name in ("setup.sh", "run_autograder") else 0o644
            info.external_attr = (stat.S_IFREG | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    return list(files)


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python -m attnlab.course.gradescope SOURCE --out autograder.zip``."""
    parser = argparse.ArgumentParser(prog="python -m attnlab.course.gradescope",
                                     description="Write a Gradescope autograder bundle.")
    parser.add_argument("source", type=Path, help="the assigned notebook(s) and check modules")
    parser.add_argument("--out", type=Path, required=True, help="the zip to write")
    parser.add_argument("--wheel", type=Path, default=None, help="an attnlab wheel to bundle")
    parser.add_argument("--requirement", default=None, help="what pip installs instead")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds per notebook (default 600)")
    args = parser.parse_args(argv)
    try:
        names = build(args.source, args.out, wheel=args.wheel, requirement=args.requirement,
                      timeout=args.timeout)
    except (OSError, ValueError) as error:
        print(f"attnlab.course.gradescope: {error}", file=sys.stderr)
        return 2
    print(f"wrote {args.out} ({len(names)} files): upload it as the autograder")
    return 0


if __name__ == "__main__":
    sys.exit(main())
