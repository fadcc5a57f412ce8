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

# Install Debian packages (and apt-get options such as --no-install-recommends) with apt-get,
# run as $1 (what apt_sudo printed): wait up to 10 minutes for another apt-get's lock (the
# ensure scripts may run side by side), and if the install fails, update the package lists
# (missing or stale in a fresh container) and try once more. apt-get writes to $APT_LOG
# (default /tmp/attnlab_apt.log); on failure its last lines go to stderr. Returns 0 or 1.
apt_install() {
    local sudo="$1"
    shift
    local log="${APT_LOG:-/tmp/attnlab_apt.log}"
    local apt=($sudo apt-get -o DPkg::Lock::Timeout=600 -q -y)
    export DEBIAN_FRONTEND=noninteractive
    "${apt[@]}" install "$@" >"$log" 2>&1 && return 0
    "${apt[@]}" update >>"$log" 2>&1
    "${apt[@]}" install "$@" >>"$log" 2>&1 && return 0
    tail -5 "$log" >&2
    return 1
}
