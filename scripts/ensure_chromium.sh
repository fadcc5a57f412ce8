#!/usr/bin/env bash
# Make sure the browser tests have a browser: Debian's chromium at $ATTNLAB_CHROMIUM
# (default /usr/bin/chromium). Installs it with apt-get when it is missing and we may
# (root, or passwordless sudo). Exit status:
#   0  chromium is there (found or just installed)
#   1  it is missing and CI=true: the browser stage must fail, not pass by skipping
#   2  it is missing elsewhere: the caller skips the browser stage (a loud message is printed)
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/ensure_common.sh"

CHROMIUM="${ATTNLAB_CHROMIUM:-/usr/bin/chromium}"

if [ -x "$CHROMIUM" ]; then
    exit 0
fi

SUDO="$(apt_sudo)"
if [ "$SUDO" != "none" ]; then
    echo "==> $CHROMIUM not found: installing Debian's chromium with apt-get"
    apt_install "$SUDO" chromium || echo "apt-get could not install chromium"
fi

if [ -x "$CHROMIUM" ]; then
    echo "==> chromium installed: $("$CHROMIUM" --version 2>/dev/null)"
    exit 0
fi

fail_or_skip "make test: FAILED: no browser at $CHROMIUM and it could not be installed (CI=true)." <<MSG
################################################################################
#  BROWSER TESTS SKIPPED: no browser at $CHROMIUM, and it could not be installed
#  here. The rendered book was NOT checked in a browser. To run this stage:
#      sudo apt-get install chromium      (or set ATTNLAB_CHROMIUM=/path/to/chromium)
################################################################################
MSG
