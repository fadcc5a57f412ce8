# Shell functions shared by scripts/ensure_*.sh (sourced, not run): may we install with
# apt-get, and how the scripts give up. Their exit statuses are documented in each script.

# Print how to run apt-get here: "" as root, "sudo -n" with passwordless sudo, "none" when we
# may not (or when there is no apt-get at all).
apt_sudo() {
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "none"
    elif [ "$(id -u)" -eq 0 ]; then
        echo ""
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        echo "sudo -n"
    else
        echo "none"
    fi
}

# Give up on a tool that is missing: under CI=true print $1 on stderr and exit 1 (the stage
# must fail, not pass by skipping); elsewhere print the banner read from stdin on stderr and
# exit 2 (the caller skips the stage).
fail_or_skip() {
    if [ "${CI:-}" = "true" ]; then
        echo "$1" >&2
        exit 1
    fi
    cat >&2
    exit 2
}
