# shellcheck shell=bash
# Helpers of the scripts that build cached fixtures: Debian packages installed when missing, and
# source archives fetched once, pinned by SHA-256. Sourced after the script has defined `log` and
# `die`.

# ensure_packages PKG…: installs the packages not installed yet (needs root then).
ensure_packages() {
    local missing=() p
    for p in "$@"; do
        [ "$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)" = "ii " ] || missing+=("$p")
    done
    [ ${#missing[@]} -gt 0 ] || return 0
    [ "$(id -u)" -eq 0 ] || die "not root: cannot install ${missing[*]}"
    log "installing: ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" ||
        { apt-get update -q &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"; }
}

# fetch_pinned URL SHA256 FILE: FILE holds URL's content with that checksum (downloaded unless
# it already does); dies on a mismatch.
fetch_pinned() {
    local url=$1 sum=$2 file=$3
    if [ -s "$file" ] && echo "$sum  $file" | sha256sum -c --quiet - 2>/dev/null; then
        return 0
    fi
    mkdir -p "$(dirname "$file")"
    log "downloading $url"
    curl -fsS --retry 3 --connect-timeout 30 --max-time 900 -o "$file.part" "$url" ||
        die "cannot download $url"
    echo "$sum  $file.part" | sha256sum -c --quiet - || die "$url: sha256 mismatch"
    mv -f "$file.part" "$file"
}

# exit_if_cached RESULT: when the script's `cached` says so, prints RESULT (fd 3: the result line)
# and ends the script.
exit_if_cached() {
    if cached; then
        log "cached: $1"
        echo "$1" >&3
        exit 0
    fi
}

# lock_cache: serialises with the other scripts through $CACHE_DIR/.lock (held until exit).
lock_cache() {
    exec 9>"$CACHE_DIR/.lock"
    flock -w 3600 9 || die "could not lock $CACHE_DIR/.lock"
}
