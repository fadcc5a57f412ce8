#!/usr/bin/env bash
# Make sure `make pdf` has a TeX system: Debian's TeX Live (XeLaTeX, latexmk), the FreeFont
# OpenType fonts the PDF is set in, and poppler-utils (pdftotext, pdfinfo) for its check.
# Installs the missing pieces with apt-get when we may (root, or passwordless sudo); idempotent:
# when everything is there it does nothing. The set is lean on purpose: a 125 MB download,
# about 400 MB on disk, without recommends (texlive-latex-extra would otherwise pull a Java
# runtime, and texlive-fonts-extra alone is about 500 MB). Exit status, as ensure_chromium.sh:
#   0  everything is there (found or just installed)
#   1  something is missing and could not be installed, and CI=true: make test must fail
#   2  something is missing and could not be installed elsewhere: make test skips its PDF stage
#      (a loud message is printed); make pdf fails either way
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/ensure_common.sh"

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
    command -v pdfimages >/dev/null 2>&1 || m+=(pdfimages)
    if command -v kpsewhich >/dev/null 2>&1; then
        for sty in fontspec.sty polyglossia.sty titlesec.sty tabulary.sty needspace.sty \
                   capt-of.sty fncychap.sty upquote.sty wrapfig.sty framed.sty amssymb.sty \
                   unicode-math.sty ucharclasses.sty changepage.sty; do
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

SUDO="$(apt_sudo)"
if [ "$SUDO" != "none" ]; then
    echo "==> missing $todo: installing Debian's TeX Live (125 MB download, 400 MB on disk)"
    SECONDS=0
    export APT_LOG=/tmp/attnlab_texlive.log
    apt_install "$SUDO" --no-install-recommends "${PACKAGES[@]}" ||
        echo "apt-get could not install TeX Live (log: $APT_LOG)" >&2
    todo="$(missing)"
    if [ -z "$todo" ]; then
        echo "    TeX Live installed in ${SECONDS}s ($(xelatex --version | head -1))"
        exit 0
    fi
fi

fail_or_skip "make test: FAILED: missing $todo for the PDF, and it could not be installed (CI=true)." <<MSG
################################################################################
#  NO PDF: missing $todo, and it could not be installed here.
#  make test SKIPS its PDF stage: the book's PDF was NOT built or checked.
#  To build it (Debian/Ubuntu):
#      sudo apt-get install --no-install-recommends ${PACKAGES[*]}
################################################################################
MSG
