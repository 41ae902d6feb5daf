# scripts/lib/apt.sh — installing Debian packages for the project's build scripts.
# Sourced (not run) by scripts that define log() and die() first. Needs root to install.
# shellcheck shell=bash
# shellcheck disable=SC2034  # APT_UPDATED is read by the functions below

export DEBIAN_FRONTEND=noninteractive
APT_UPDATED=0
apt_update() {   # full update, at most once per run
    [ $APT_UPDATED -eq 0 ] || return 0
    log "apt-get update"
    apt-get update -q
    APT_UPDATED=1
}
apt_install() {
    apt-get install -y -q --no-install-recommends \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "$@"
}
ensure_packages() {
    local p st missing=()
    for p in "$@"; do
        st=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
        [ "$st" = "ii " ] || missing+=("$p")
    done
    [ ${#missing[@]} -gt 0 ] || return 0
    [ "$(id -u)" -eq 0 ] || die "not root: cannot install ${missing[*]}"
    log "installing: ${missing[*]}"
    # Update the package lists only when they cannot satisfy the request (e.g. a fresh machine).
    apt-get install -s -y --no-install-recommends "${missing[@]}" >/dev/null 2>&1 || apt_update
    apt_install "${missing[@]}" || { [ $APT_UPDATED -eq 1 ] && return 1; apt_update; apt_install "${missing[@]}"; }
}
