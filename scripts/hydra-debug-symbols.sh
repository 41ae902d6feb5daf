#!/usr/bin/env bash
# hydra-debug-symbols.sh — separate debug information for the stock, stripped
# /usr/bin/mpiexec.hydra of Debian 12 (package mpich 4.0.2), whose -dbgsym package is not
# reachable here.
#
# Usage: scripts/hydra-debug-symbols.sh [CACHE_DIR]
#   CACHE_DIR defaults to ${MPIR_CACHE_DIR:-/var/cache/mpir-rs}. Everything downloaded or built
#   lives under it. Progress goes to stderr; the LAST line on stdout is the absolute path of the
#   debug directory, $CACHE_DIR/debug, holding .build-id/xx/yyyy….debug for the stock binary:
#       dir=$(scripts/hydra-debug-symbols.sh | tail -n1)
#       gdb -iex "set debug-file-directory $dir" /usr/bin/mpiexec.hydra
#   (gdb needs -iex, not -ex: a file named on the command line is loaded before -ex commands run.)
#
# How: hydra is rebuilt from `apt-get source mpich` exactly as debian/rules configures it (its
# own recipe runs; only the top-level dh_auto_configure is skipped), in a clean environment with
# the flags dpkg-buildflags gives, DEB_BUILD_PATH set to the build path recorded in the stock
# binary (so -ffile-prefix-map, which hydra embeds in .rodata, matches). The rebuilt binary's
# loaded sections must equal the stock ones byte for byte (checked; the script fails otherwise).
# Its debug sections are kept with `objcopy --only-keep-debug`, the stock .note.gnu.build-id is
# copied in, and gdb must then find the MPIR symbols and a 24-byte struct MPIR_PROCDESC.
#
# Cached: a valid debug file → exit 0 in well under a second. A build tree left by an earlier
# run is reused. Needs root for apt-get (run once as root; later cached runs need only read
# access). Adds /etc/apt/sources.list.d/mpir-rs-deb-src.sources (deb-src for <codename> main on
# the host of the configured <codename> main entry) when no source index has mpich.
# shellcheck disable=SC2015,SC2016  # A && B || C on purpose; '$(…)' strings are for apt/bash -c
set -Eeuo pipefail

STOCK=/usr/bin/mpiexec.hydra
BIN_PKG=mpich
MPIR_SYMBOLS=(MPIR_Breakpoint MPIR_proctable MPIR_proctable_size MPIR_debug_state
    MPIR_being_debugged MPIR_i_am_starter MPIR_partial_attach_ok MPIR_debug_abort_string)
# Tools and headers the rebuild needs. mpich/libmpich-dev: the stock binary and its headers;
# libhwloc-dev, libslurm-dev: hydra's configure detects them (the stock binary links both;
# without them the build differs). Other mpich build dependencies (valgrind, gfortran, ucx, …)
# change nothing in hydra: the result is byte-identical with or without them.
PACKAGES=(mpich libmpich-dev gdb binutils dpkg-dev gcc libc6-dev make
    libhwloc-dev libslurm-dev)
DEB_SRC_LIST=/etc/apt/sources.list.d/mpir-rs-deb-src.sources

exec 3>&1 1>&2 </dev/null          # fd 3: the result line; all other output goes to stderr
log() { printf '[hydra-debug-symbols %(%T)T] %s\n' -1 "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
on_err() { log "ERROR: line $2: \"$3\" failed (exit $1)"; exit "$1"; }
trap 'on_err $? $LINENO "$BASH_COMMAND"' ERR
have() { command -v "$1" >/dev/null 2>&1; }

case "${1:-}" in
    -h|--help) sed -n '2,/^# shellcheck/{/^# shellcheck/d; s/^# \{0,1\}//p}' "$0" >&3; exit 0 ;;
esac
[ $# -le 1 ] || die "usage: $0 [CACHE_DIR]"
CACHE_DIR=${1:-${MPIR_CACHE_DIR:-/var/cache/mpir-rs}}
case "$CACHE_DIR" in *:*) die "CACHE_DIR must not contain ':' (gdb's debug-file-directory separator)";; esac
if [ -d "$CACHE_DIR" ]; then CACHE_DIR=$(cd -- "$CACHE_DIR" && pwd -P); else CACHE_DIR=$(realpath -m -- "$CACHE_DIR"); fi
DEBUG_DIR=$CACHE_DIR/debug

build_id() {   # hex build-id of an ELF file, or nothing
    local notes
    notes=$(readelf -n "$1" 2>/dev/null) || return 0
    sed -n 's/.*Build ID: *\([0-9a-f][0-9a-f]*\).*/\1/p' <<<"$notes" | sed -n 1p
}

# gdb must resolve every MPIR symbol and see struct MPIR_PROCDESC as 24 bytes through the debug
# directory $1 alone. Prints gdb's output.
gdb_check() {
    local dir=$1 out s ok=0
    local args=(-nx -batch -iex 'set debuginfod enabled off' -iex "set debug-file-directory $dir"
        -ex 'ptype/o struct MPIR_PROCDESC' -ex 'print sizeof(struct MPIR_PROCDESC)')
    for s in "${MPIR_SYMBOLS[@]}"; do args+=(-ex "info address $s"); done
    out=$(gdb "${args[@]}" "$STOCK" 2>&1 </dev/null) || ok=1
    printf '%s\n' "$out"
    [ $ok -eq 0 ] || return 1
    grep -q '/\* total size (bytes): *24 \*/' <<<"$out" || return 1
    grep -qx '[$]1 = 24' <<<"$out" || return 1
    grep -q '^Symbol "MPIR_Breakpoint" is a function at address 0x' <<<"$out" || return 1
    for s in "${MPIR_SYMBOLS[@]}"; do
        grep -Eq "^Symbol \"$s\" is .* at address 0x[0-9a-f]+" <<<"$out" || return 1
    done
}

BID='' DEBUG_FILE=''
locate_debug_file() {
    BID=$(build_id "$STOCK")
    [[ $BID =~ ^[0-9a-f]{4,}$ ]] || return 1
    DEBUG_FILE=$DEBUG_DIR/.build-id/${BID:0:2}/${BID:2}.debug
}

cached_ok() {
    [ -f "$STOCK" ] && have readelf && have gdb || return 1
    locate_debug_file || return 1
    [ -s "$DEBUG_FILE" ] && [ "$(build_id "$DEBUG_FILE")" = "$BID" ] || return 1
    gdb_check "$DEBUG_DIR" >/dev/null
}

if cached_ok; then
    log "cached: $DEBUG_FILE (build-id $BID) is valid"
    echo "$DEBUG_DIR" >&3
    exit 0
fi

# ---------------------------------------------------------------------------------------------
# Slow path.
mkdir -p -- "$CACHE_DIR"
exec 9>"$CACHE_DIR/.lock"
flock -w 3600 9 || die "could not lock $CACHE_DIR/.lock"
if cached_ok; then          # another run may have finished meanwhile
    log "cached: $DEBUG_FILE (build-id $BID) is valid"
    echo "$DEBUG_DIR" >&3
    exit 0
fi
log "building debug information under $CACHE_DIR"
mkdir -p "$CACHE_DIR"/{src,build,logs,work}
LOGS=$CACHE_DIR/logs

# shellcheck source=lib/apt.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/apt.sh"

ensure_packages "${PACKAGES[@]}"
[ -f "$STOCK" ] || die "$STOCK does not exist even though $BIN_PKG is installed"
owner=$(dpkg-query -S "$STOCK" 2>/dev/null || true)
[[ $owner == "$BIN_PKG:"* || $owner == "$BIN_PKG: "* ]] || die "$STOCK is not owned by package $BIN_PKG ($owner)"
locate_debug_file || die "$STOCK has no build-id"
SRC_PKG=$(dpkg-query -W -f='${source:Package}' "$BIN_PKG")
SRC_VER=$(dpkg-query -W -f='${source:Version}' "$BIN_PKG")
BIN_VER=$(dpkg-query -W -f='${Version}' "$BIN_PKG")
log "stock $STOCK: $BIN_PKG $BIN_VER (source $SRC_PKG $SRC_VER), build-id $BID"

# What the stock binary records about its own build (hydra embeds CC+flags and configure args).
STOCK_INFO=$(timeout 30 "$STOCK" -info 2>&1) || die "$STOCK -info failed"
STOCK_CC=$(sed -n 's/^ *CC: *//p' <<<"$STOCK_INFO")
STOCK_ARGS=$(sed -n 's/^ *Configure options: *//p' <<<"$STOCK_INFO")
[ -n "$STOCK_CC" ] && [ -n "$STOCK_ARGS" ] ||
    die "cannot read CC/configure options from $STOCK -info"
STOCK_BUILD_PATH=$(sed -n 's/.*-ffile-prefix-map=\([^ =]*\)=\. .*/\1/p' <<<"$STOCK_CC")
[ -n "$STOCK_BUILD_PATH" ] || die "no -ffile-prefix-map in the stock CC line: $STOCK_CC"
log "stock build path: $STOCK_BUILD_PATH"

# --- Source package --------------------------------------------------------------------------
SRC_DIR=$CACHE_DIR/src
VER_NOEPOCH=${SRC_VER#*:}
DSC=$SRC_DIR/${SRC_PKG}_${VER_NOEPOCH}.dsc

source_index_has_version() {
    local out
    out=$(apt-cache showsrc --only-source "$SRC_PKG" 2>/dev/null) || return 1
    grep -qx "Version: $SRC_VER" <<<"$out"
}
ensure_source_index() {
    source_index_has_version && return 0
    [ "$(id -u)" -eq 0 ] || die "not root: cannot add a deb-src entry"
    local codename uri existing
    # shellcheck disable=SC1091
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    [ -n "$codename" ] || die "no VERSION_CODENAME in /etc/os-release"
    existing=$(apt-get indextargets --format '$(REPO_URI)' "Identifier: Sources" "Release: $codename" "Component: main" 2>/dev/null | sed '/^$/d')
    if [ -n "$existing" ] && [ ! -f "$DEB_SRC_LIST" ]; then
        log "a deb-src entry for $codename main exists; updating all package lists"
        APT_UPDATED=0; apt_update
    else
        uri=$(apt-get indextargets --format '$(REPO_URI)' "Identifier: Packages" "Release: $codename" "Component: main" 2>/dev/null | sed -n '/./{p;q}')
        [ -n "$uri" ] || die "no 'deb … $codename main' entry in the apt sources to derive a deb-src line from"
        log "adding $DEB_SRC_LIST: deb-src ${uri%/} $codename main"
        {
            echo "# Added by mpir-rs scripts/hydra-debug-symbols.sh (source of $SRC_PKG for debug symbols)."
            echo "Types: deb-src"
            echo "URIs: ${uri%/}"
            echo "Suites: $codename"
            echo "Components: main"
            [ ! -f /usr/share/keyrings/debian-archive-keyring.gpg ] ||
                echo "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg"
        } >"$DEB_SRC_LIST.tmp"
        mv -f "$DEB_SRC_LIST.tmp" "$DEB_SRC_LIST"
        log "apt-get update (only $DEB_SRC_LIST)"
        apt-get update -q -o Dir::Etc::sourcelist="$DEB_SRC_LIST" -o Dir::Etc::sourceparts=- \
            -o APT::Get::List-Cleanup=0
    fi
    source_index_has_version || die "no source package $SRC_PKG $SRC_VER in the apt source indices"
}

dsc_complete() {   # the .dsc and every file it lists are present
    [ -f "$DSC" ] || return 1
    local f
    while read -r f; do
        [ -f "$SRC_DIR/$f" ] || return 1
    done < <(awk '/^Files:/ {on = 1; next} /^[^ ]/ {on = 0} on && NF == 3 {print $3}' "$DSC")
}

TREE=$CACHE_DIR/build/${SRC_PKG}_${VER_NOEPOCH}
HYDRA=$TREE/src/pm/hydra
if [ ! -f "$TREE/.mpir-extracted" ]; then
    if ! dsc_complete; then
        ensure_source_index
        log "apt-get source $SRC_PKG=$SRC_VER"
        (cd "$SRC_DIR" && apt-get source -q --download-only -o APT::Sandbox::User=root "$SRC_PKG=$SRC_VER")
    fi
    log "unpacking $(basename "$DSC")"
    rm -rf "$TREE" "$TREE.tmp"
    dpkg-source -x "$DSC" "$TREE.tmp" >"$LOGS/dpkg-source.log" 2>&1 ||
        { tail -n 20 "$LOGS/dpkg-source.log"; die "dpkg-source -x failed"; }
    # Only debian/ and src/pm/hydra are used; drop the rest of MPICH (≈400 MB).
    find "$TREE.tmp" -mindepth 1 -maxdepth 1 ! -name debian ! -name src -exec rm -rf {} +
    find "$TREE.tmp/src" -mindepth 1 -maxdepth 1 ! -name pm -exec rm -rf {} +
    find "$TREE.tmp/src/pm" -mindepth 1 -maxdepth 1 ! -name hydra -exec rm -rf {} +
    touch "$TREE.tmp/.mpir-extracted"
    mv "$TREE.tmp" "$TREE"
else
    log "reusing source tree $TREE"
fi

# --- Configure and build, in a clean environment like dpkg-buildpackage's ---------------------
SHIM=$CACHE_DIR/work/shim
mkdir -p "$SHIM" "$CACHE_DIR/work/home"
cat >"$SHIM/dh_auto_configure" <<'EOF'
#!/bin/sh
# hydra-debug-symbols.sh: skip MPICH's top-level configure; debian/rules then runs hydra's own.
exit 0
EOF
chmod +x "$SHIM/dh_auto_configure"
SDE=$(dpkg-parsechangelog -l "$TREE/debian/changelog" -STimestamp)
JOBS=$(nproc 2>/dev/null || echo 2)

build_env() {
    env -i PATH="$SHIM:/usr/sbin:/usr/bin:/sbin:/bin" HOME="$CACHE_DIR/work/home" LC_ALL=C.UTF-8 \
        SHELL=/bin/sh DEB_BUILD_PATH="$STOCK_BUILD_PATH" SOURCE_DATE_EPOCH="$SDE" \
        bash -c 'set -e; eval "$(dpkg-architecture -s)"; eval "$(dpkg-buildflags --export=sh)"; exec "$@"' \
        build-env "$@"
}
config_h_value() {   # NAME → the string #defined in hydra's config header
    sed -n "s/^#define $1 \"\\(.*\\)\"\$/\\1/p" "$HYDRA/include/hydra_config.h"
}

CONF_KEY="$SRC_VER|$STOCK_BUILD_PATH|$STOCK_ARGS"
if [ -f "$HYDRA/config.status" ] && [ -f "$HYDRA/.mpir-configured" ] &&
    [ "$(cat "$HYDRA/.mpir-configured")" = "$CONF_KEY" ]; then
    log "reusing configured hydra tree"
else
    rm -f "$HYDRA/.mpir-configured"
    log "configuring hydra (debian/rules override_dh_auto_configure; log: $LOGS/configure.log)"
    (cd "$TREE" && build_env make -f debian/rules override_dh_auto_configure) >"$LOGS/configure.log" 2>&1 ||
        { tail -n 30 "$LOGS/configure.log"; die "hydra configure failed"; }
    grep -F '( cd src/pm/hydra && ./configure' "$LOGS/configure.log" | sed 's/^/    /' >&2 || true
    got_cc=$(config_h_value HYDRA_CC)
    got_args=$(config_h_value HYDRA_CONFIGURE_ARGS_CLEAN)
    if [ "$got_cc" != "$STOCK_CC" ] || [ "$got_args" != "$STOCK_ARGS" ]; then
        log "stock CC:        [$STOCK_CC]"
        log "rebuilt CC:      [$got_cc]"
        log "stock configure: [$STOCK_ARGS]"
        log "rebuilt config.: [$got_args]"
        die "the configure line does not reproduce the stock one"
    fi
    echo "$CONF_KEY" >"$HYDRA/.mpir-configured"
fi

log "building mpiexec.hydra (make -j$JOBS; log: $LOGS/make.log)"
{ build_env make -C "$HYDRA/mpl" -j"$JOBS" && build_env make -C "$HYDRA" -j"$JOBS" mpiexec.hydra; } \
    >"$LOGS/make.log" 2>&1 || { tail -n 30 "$LOGS/make.log"; die "hydra build failed"; }
REBUILT=$HYDRA/mpiexec.hydra
[ -f "$REBUILT" ] || die "the build produced no $REBUILT"

# --- The rebuilt binary's loaded image must equal the stock one -------------------------------
alloc_sections() {   # name type address size flags align, for every SHF_ALLOC section
    readelf -SW "$1" | sed -n 's/^ *\[ *[0-9][0-9]*\] //p' |
        awk 'NF == 10 && $7 ~ /A/ { print $1, $2, $3, $5, $7, $10 }'
}
load_layout() {      # entry point and program headers
    readelf -hW "$1" | grep 'Entry point'
    readelf -lW "$1" | sed -n '/^Program Headers:/,/^$/p'
}
log "comparing the loaded sections of $STOCK and the rebuilt binary"
WORK=$CACHE_DIR/work
diff -u <(load_layout "$STOCK") <(load_layout "$REBUILT") >"$LOGS/layout.diff" ||
    { cat "$LOGS/layout.diff"; die "program headers/entry point differ from the stock binary"; }
diff -u <(alloc_sections "$STOCK") <(alloc_sections "$REBUILT") >"$LOGS/sections.diff" ||
    { cat "$LOGS/sections.diff"; die "the allocated section tables differ from the stock binary"; }
differ=() compared=0
while read -r name type _; do
    [ "$type" != NOBITS ] && [ "$name" != .note.gnu.build-id ] || continue
    objcopy -O binary --only-section="$name" "$STOCK" "$WORK/stock.sec"
    objcopy -O binary --only-section="$name" "$REBUILT" "$WORK/rebuilt.sec"
    if cmp -s "$WORK/stock.sec" "$WORK/rebuilt.sec"; then
        compared=$((compared + 1))
    else
        n=$({ cmp -l "$WORK/stock.sec" "$WORK/rebuilt.sec" 2>/dev/null || true; } | wc -l)
        differ+=("$name ($n bytes differ, sizes $(stat -c %s "$WORK/stock.sec")/$(stat -c %s "$WORK/rebuilt.sec"))")
    fi
done < <(alloc_sections "$STOCK")
rm -f "$WORK/stock.sec" "$WORK/rebuilt.sec"
[ ${#differ[@]} -eq 0 ] || die "rebuilt sections differ from the stock ones: ${differ[*]}"
[ $compared -gt 10 ] || die "only $compared sections compared; something is wrong"
log "identical: $compared loaded sections (all but .note.gnu.build-id and NOBITS), program headers, entry point"

# --- Debug file: the rebuilt debug sections under the stock build-id --------------------------
STAGE=$WORK/stage
rm -rf "$STAGE"
staged=$STAGE/.build-id/${BID:0:2}/${BID:2}.debug
mkdir -p "$(dirname "$staged")"
objcopy -O binary --only-section=.note.gnu.build-id "$STOCK" "$WORK/build-id.note"
objcopy --only-keep-debug "$REBUILT" "$staged"
objcopy --update-section .note.gnu.build-id="$WORK/build-id.note" "$staged"
rm -f "$WORK/build-id.note"
[ "$(build_id "$staged")" = "$BID" ] || die "the debug file does not carry the stock build-id"
chmod 0644 "$staged"
gdb_check "$STAGE" >"$LOGS/gdb-check.log" 2>&1 ||
    { cat "$LOGS/gdb-check.log"; die "gdb does not see the MPIR symbols/types through $staged"; }
mkdir -p "$(dirname "$DEBUG_FILE")"
mv -f "$staged" "$DEBUG_FILE"
rm -rf "$STAGE"

gdb_check "$DEBUG_DIR" >"$LOGS/gdb-check.log" 2>&1 ||
    { cat "$LOGS/gdb-check.log"; die "gdb check through $DEBUG_DIR failed"; }
sed 's/^/    /' "$LOGS/gdb-check.log" >&2
log "done in ${SECONDS}s: $DEBUG_FILE"
echo "$DEBUG_DIR" >&3
