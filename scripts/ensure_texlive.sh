#!/usr/bin/env bash
# Make sure `make pdf` has a TeX system: Debian's TeX Live (XeLaTeX, latexmk), the FreeFont
# OpenType fonts the PDF is set in, and poppler-utils (pdftotext, pdfinfo) for its check.
# Installs the missing pieces with apt-get when we may (root, or passwordless sudo); idempotent:
# when everything is there it does nothing. The set is lean on purpose: a 125 MB download,
# about 400 MB on disk, without recommends (texlive-latex-extra would otherwise pull a Java
# runtime, and texlive-fonts-extra alone is about 500 MB). Exit status:
#   0  everything is there (found or just installed)
#   1  something is missing and could not be installed (the caller fails)
set -uo pipefail

PACKAGES=(
    texlive-xetex              # xelatex: every Unicode character of the prose from real fonts
    texlive-latex-recommended  # LaTeX packages Sphinx's writer loads (fancyvrb, amsmath, ...)
    texlive-latex-extra        # the rest of them (titlesec, tabulary, needspace, capt-of, ...)
    texlive-fonts-recommended  # Type 1 maths fonts (amsfonts) beside Computer Modern
    lmodern                    # fontspec's default font, loaded before FreeFont is chosen
    fonts-freefont-otf         # FreeSerif/FreeSans: Greek, arrows, maths symbols in the text
    fonts-dejavu-core          # DejaVu Sans Mono: the code font (has the ᵀ FreeMono lacks)
    latexmk                    # runs xelatex as often as cross-references need
    fontconfig                 # fc-list, to tell whether the fonts are there
    poppler-utils              # pdftotext and pdfinfo for scripts/check_pdf.py
)

missing() {
    local m=()
    command -v xelatex >/dev/null 2>&1 || m+=(xelatex)
    command -v latexmk >/dev/null 2>&1 || m+=(latexmk)
    command -v pdftotext >/dev/null 2>&1 || m+=(pdftotext)
    command -v pdfinfo >/dev/null 2>&1 || m+=(pdfinfo)
    if command -v kpsewhich >/dev/null 2>&1; then
        for sty in fontspec.sty polyglossia.sty titlesec.sty tabulary.sty needspace.sty \
                   capt-of.sty fncychap.sty upquote.sty wrapfig.sty framed.sty amssymb.sty; do
            [ -n "$(kpsewhich "$sty")" ] || m+=("$sty")
        done
    fi
    if command -v fc-list >/dev/null 2>&1; then
        [ -n "$(fc-list FreeSerif)" ] || m+=(FreeSerif)
        [ -n "$(fc-list 'DejaVu Sans Mono')" ] || m+=(DejaVuSansMono)
    else
        m+=(fontconfig)
    fi
    echo "${m[*]}"
}

todo="$(missing)"
if [ -z "$todo" ]; then
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "make pdf: missing: $todo; no apt-get here. Install TeX Live with XeLaTeX, latexmk," >&2
    echo "          the FreeFont OpenType fonts and poppler (pdftotext), then run make pdf." >&2
    exit 1
fi
if [ "$(id -u)" -eq 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
else
    echo "make pdf: missing: $todo. Install them as root:" >&2
    echo "    sudo apt-get install --no-install-recommends ${PACKAGES[*]}" >&2
    exit 1
fi

echo "==> make pdf: missing $todo: installing Debian's TeX Live (125 MB download, 400 MB on disk, 1-3 minutes)"
export DEBIAN_FRONTEND=noninteractive
# Another apt-get (scripts/ensure_chromium.sh, a second make) may hold the lock: wait for it.
APT=($SUDO apt-get -o DPkg::Lock::Timeout=600 -q -y)
SECONDS=0
if ! "${APT[@]}" install --no-install-recommends "${PACKAGES[@]}" >/tmp/attnlab_texlive.log 2>&1; then
    # The package lists may be missing or stale (a fresh container): update once and retry.
    "${APT[@]}" update >>/tmp/attnlab_texlive.log 2>&1
    "${APT[@]}" install --no-install-recommends "${PACKAGES[@]}" >>/tmp/attnlab_texlive.log 2>&1
fi
todo="$(missing)"
if [ -n "$todo" ]; then
    tail -20 /tmp/attnlab_texlive.log >&2
    echo "make pdf: FAILED: still missing after apt-get: $todo (log: /tmp/attnlab_texlive.log)" >&2
    exit 1
fi
echo "    TeX Live installed in ${SECONDS}s ($(xelatex --version | head -1))"
exit 0
