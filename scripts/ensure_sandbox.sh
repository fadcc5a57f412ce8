#!/usr/bin/env bash
# Make sure the grader's sandbox works here: bubblewrap (bwrap), usable by root (rootful mode:
# util-linux's setpriv gives each submission its own user id) or, for any other user, in an
# unprivileged user namespace (rootless mode). Installs bubblewrap with apt-get when it is
# missing and we may (root, or passwordless sudo).
# Idempotent. Exit status:
#   0  the sandbox works (bwrap found or just installed, and a trial sandbox ran)
#   1  it does not and CI=true: the grading tests must fail, not pass by skipping
#   2  it does not elsewhere: the sandboxed grading tests skip (a loud message is printed)
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/ensure_common.sh"

works() {
    command -v bwrap >/dev/null 2>&1 || return 1
    if [ "$(id -u)" -eq 0 ]; then
        command -v setpriv >/dev/null 2>&1 &&
            bwrap --ro-bind / / --dev /dev --proc /proc --unshare-pid --unshare-net \
                --die-with-parent -- true >/dev/null 2>&1
    else
        bwrap --unshare-user --ro-bind / / --dev /dev --proc /proc --unshare-pid \
            --unshare-net --die-with-parent -- true >/dev/null 2>&1
    fi
}

if works; then
    exit 0
fi

if ! command -v bwrap >/dev/null 2>&1; then
    SUDO="$(apt_sudo)"
    if [ "$SUDO" != "none" ]; then
        echo "==> bwrap not found: installing Debian's bubblewrap with apt-get"
        apt_install "$SUDO" bubblewrap util-linux || echo "apt-get could not install bubblewrap"
    fi
fi

if works; then
    echo "==> grading sandbox ready: $(bwrap --version 2>/dev/null)"
    exit 0
fi

fail_or_skip "make test: FAILED: no working bubblewrap sandbox for the grader (CI=true)." <<MSG
################################################################################
#  SANDBOXED GRADING TESTS SKIPPED: bubblewrap is missing or cannot create
#  namespaces here (a container without them? unprivileged user namespaces off?
#  see sysctl kernel.unprivileged_userns_clone and user.max_user_namespaces).
#  The grader's isolation was NOT tested. To run them:
#      sudo apt-get install bubblewrap   (rootless as any user, or as root)
################################################################################
MSG
