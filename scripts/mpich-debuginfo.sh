#!/usr/bin/env bash
# mpich-debuginfo.sh — a debugger-enabled MPICH (configure --enable-debuginfo), built from
# Debian 12's own source package of mpich (4.0.2), for tests that need what stock MPICH lacks:
# MPIR_debug_gate and the message-queue symbols (MPIR_All_communicators, MPIR_Sendq_head, …) in
# the ranks, the message-queue DLL libtvmpich.so (named by MPIR_dll_name), DWARF in libmpi, and
# an unstripped mpiexec.hydra.
#
# Usage: scripts/mpich-debuginfo.sh [CACHE_DIR]
#   CACHE_DIR defaults to ${MPIR_CACHE_DIR:-/var/cache/mpir-rs}. Everything downloaded or built
#   lives under it; nothing is installed outside it except apt packages. Progress goes to
#   stderr; the LAST line on stdout is the absolute install prefix, $CACHE_DIR/mpich-debuginfo:
#       prefix=$(scripts/mpich-debuginfo.sh | tail -n1)
#       "$prefix/bin/mpicc" -g app.c -o app      # RUNPATH points at $prefix/lib
#       MPIEXEC_DEBUG=1 "$prefix/bin/mpiexec" -n 2 ./app &
#   It holds bin/{mpicc,mpiexec,mpiexec.hydra,hydra_pmi_proxy}, include/, lib/libmpi.so*
#   (unstripped, with DWARF) and lib/libtvmpich.so*.
#
# The gate: with this build every rank calls MPII_Wait_for_debugger() near the end of MPI_Init
# (src/mpi/debugger/dbginit.c): it sets MPIR_debug_state = 1, sets up the send-queue list and,
# if the environment variable MPIEXEC_DEBUG is set in the rank (any value, even empty: the test
# is getenv() != NULL; mpiexec.hydra passes the caller's environment on), busy-spins on
# `while (!MPIR_debug_gate);` until a debugger writes a non-zero int to MPIR_debug_gate.
# Without MPIEXEC_DEBUG there is no wait; mpiexec knows nothing about the gate. MPICH is built
# with MPICH_STARTER_MPIEXEC, so the ranks have no MPIR_proctable and no MPIR_Breakpoint (the
# proctable and breakpoint are mpiexec.hydra's).
#
# How: `apt-get source mpich` (the version of the installed mpich package, else the newest one
# in the source index; the download is shared with scripts/hydra-debug-symbols.sh), unpacked
# with Debian's patches into $CACHE_DIR/mpich-debuginfo.d/, configured out of tree with
#   --enable-debuginfo --enable-fast=O1 --with-device=ch3:nemesis --disable-fortran
#   --disable-cxx --disable-romio --without-yaksa --with-pm=hydra --enable-shared
#   --disable-static CFLAGS="-g -O1"
# (hwloc: the system's, libhwloc-dev), in a clean environment (the caller's CC, CFLAGS,
# MAKEFLAGS, cwd … do not matter), `make -j$(nproc)`, `make install DESTDIR=<stage>`, then the
# staged prefix is renamed into place. An interrupted run's configured/partly built tree is
# reused (a tree configured with another recipe is deleted). Afterwards a self-test compiles
# an MPI program with the installed mpicc and runs it on 2 ranks, once plainly and once with
# MPIEXEC_DEBUG=1: both ranks must be spinning in MPII_Wait_for_debugger, gdb sets
# MPIR_debug_gate=1 in each, and the job must then finish. gdb must also resolve the types and
# symbols libtvmpich.so looks up. Only then is the stamp written. (The ranks need /sys for
# hwloc and a resolvable host name for nemesis' TCP module, as any MPICH job does.) DWARF paths
# point into mpich-debuginfo.d/source-<version>/ and build-<version>/, which are kept (≈570 MB).
#
# Cached: the stamp (source version + recipe + configure line) matches, the files are there,
# libmpi has .debug_info and the symbol MPIR_debug_gate → exit 0 in well under a second.
# Needs root for apt-get (missing packages, deb-src entry) on the first run only. Serialised
# with scripts/hydra-debug-symbols.sh through $CACHE_DIR/.lock.
# shellcheck disable=SC2015,SC2016  # A && B || C on purpose; '$(…)' strings are for apt
set -Eeuo pipefail

SRC_PKG=mpich
RECIPE=1          # bump when the build or the self-test changes in a way the stamp must see
CONFIGURE_ARGS=(--enable-debuginfo --enable-fast=O1 --with-device=ch3:nemesis
    --disable-fortran --disable-cxx --disable-romio --without-yaksa --with-pm=hydra
    --enable-shared --disable-static)
BUILD_CFLAGS="-g -O1"
# Build tools and libraries the configure line needs (found by running it on a bare bookworm,
# debootstrap --variant=minbase): python3 for test/mpi's configure; libhwloc-dev keeps the
# result independent of whether it happens to be installed (configure prefers the system hwloc
# and otherwise builds the embedded one).
PACKAGES=(gcc g++ libc6-dev make binutils python3 gdb dpkg-dev procps libhwloc-dev)
DEB_SRC_LIST=/etc/apt/sources.list.d/mpir-rs-deb-src.sources
# Types and symbols libtvmpich.so (src/mpi/debugger/dll_mpich.c, ch3 device) looks up.
DLL_TYPES=(MPIR_Comm_list MPIR_Comm MPIR_Request MPIDI_Request MPIDI_Message_match
    MPIDI_Message_match_parts_t MPIR_Sendq)
DLL_SYMBOLS=(MPIR_All_communicators MPIR_Sendq_head MPID_Recvq_posted_head_ptr
    MPID_Recvq_unexpected_head_ptr MPII_Wait_for_debugger MPIR_debug_gate MPIR_dll_name
    MPIR_debug_state MPIR_being_debugged)

exec 3>&1 1>&2 </dev/null          # fd 3: the result line; all other output goes to stderr
log() { printf '[mpich-debuginfo %(%T)T] %s\n' -1 "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
on_err() { log "ERROR: line $2: \"$3\" failed (exit $1)"; exit "$1"; }
trap 'on_err $? $LINENO "$BASH_COMMAND"' ERR
have() { command -v "$1" >/dev/null 2>&1; }

case "${1:-}" in
    -h|--help) sed -n '2,/^# shellcheck/{/^# shellcheck/d; s/^# \{0,1\}//p}' "$0" >&3; exit 0 ;;
esac
[ $# -le 1 ] || die "usage: $0 [CACHE_DIR]"
CACHE_DIR=${1:-${MPIR_CACHE_DIR:-/var/cache/mpir-rs}}
if [ -d "$CACHE_DIR" ]; then CACHE_DIR=$(cd -- "$CACHE_DIR" && pwd -P); else CACHE_DIR=$(realpath -m -- "$CACHE_DIR"); fi
case "$CACHE_DIR" in *[[:space:]]*) die "CACHE_DIR must not contain white space (libtool, mpicc)";; esac
PREFIX=$CACHE_DIR/mpich-debuginfo
STAMP=$PREFIX/.mpir-stamp
WORK=$CACHE_DIR/mpich-debuginfo.d
CONFIGURE_LINE="--prefix=$PREFIX ${CONFIGURE_ARGS[*]} CFLAGS=$BUILD_CFLAGS"

# The source version wanted: the installed mpich package's (tests compare with the stock
# one), or, when mpich is not installed, whatever the stamp records (fast path) / the newest
# in the source index (slow path).
installed_src_ver() {
    local st
    st=$(dpkg-query -W -f='${db:Status-Abbrev}' "$SRC_PKG" 2>/dev/null) || return 0
    [ "$st" = "ii " ] || return 0
    dpkg-query -W -f='${source:Version}' "$SRC_PKG" 2>/dev/null || true
}
stamp_text() {   # $1 = source version
    printf 'recipe=%s\nsource=%s %s\nconfigure=%s\n' "$RECIPE" "$SRC_PKG" "$1" "$CONFIGURE_LINE"
}
real_file() { readlink -f -- "$1" 2>/dev/null; }

# The installed tree's files, DWARF and gate symbol (fast: readelf/nm only, no gdb).
files_ok() {
    local p=$1 f lib out
    for f in bin/mpicc lib/libmpi.so lib/libtvmpich.so; do
        [ -e "$p/$f" ] || return 1
    done
    [ -x "$p/bin/mpiexec.hydra" ] || [ -x "$p/bin/mpiexec" ] || return 1
    lib=$(real_file "$p/lib/libmpi.so") && [ -f "$lib" ] || return 1
    # (no `tool | grep -q`: with pipefail an early grep exit fails the pipeline with SIGPIPE)
    out=$(readelf -SW "$lib" 2>/dev/null) && grep -q ' \.debug_info ' <<<"$out" || return 1
    out=$(nm --defined-only "$lib" 2>/dev/null) && grep -Eq ' [BbDdGgSs] MPIR_debug_gate$' <<<"$out" || return 1
}

cached_ok() {
    [ -f "$STAMP" ] && have readelf && have nm || return 1
    local want got
    got=$(<"$STAMP")
    want=$(installed_src_ver)
    if [ -z "$want" ]; then     # mpich not installed: accept the version the stamp records
        want=$(sed -n 's/^source=[^ ]* //p' <<<"$got")
        [ -n "$want" ] || return 1
    fi
    [ "$got" = "$(stamp_text "$want")" ] || return 1
    files_ok "$PREFIX"
}

if cached_ok; then
    log "cached: $PREFIX is valid ($(sed -n 's/^source=//p' "$STAMP"))"
    echo "$PREFIX" >&3
    exit 0
fi

# ---------------------------------------------------------------------------------------------
# Slow path.
mkdir -p -- "$CACHE_DIR"
exec 9>"$CACHE_DIR/.lock"
flock -w 3600 9 || die "could not lock $CACHE_DIR/.lock"
if cached_ok; then          # another run may have finished meanwhile
    log "cached: $PREFIX is valid"
    echo "$PREFIX" >&3
    exit 0
fi
log "building a debugger-enabled MPICH into $PREFIX"
LOGS=$WORK/logs
mkdir -p "$CACHE_DIR/src" "$WORK" "$LOGS" "$WORK/home"

# shellcheck source=lib/apt.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/apt.sh"
ensure_packages "${PACKAGES[@]}"

# --- Source package (same download directory and deb-src entry as hydra-debug-symbols.sh) -----
SRC_DIR=$CACHE_DIR/src
SRC_VER=$(installed_src_ver)

source_index_versions() {   # versions of $SRC_PKG in the source indices, newest first
    local out
    out=$(apt-cache showsrc --only-source "$SRC_PKG" 2>/dev/null) || return 0
    sed -n 's/^Version: //p' <<<"$out" | sort -u | sort -r -V
}
source_index_has() {        # $1 = version, or empty for "any"
    local vers
    vers=$(source_index_versions)
    [ -n "$vers" ] || return 1
    [ -z "$1" ] || grep -qxF -- "$1" <<<"$vers"
}
ensure_source_index() {     # $1 = version wanted, or empty
    source_index_has "$1" && return 0
    [ "$(id -u)" -eq 0 ] || die "not root: cannot add a deb-src entry"
    local codename uri existing
    # shellcheck disable=SC1091
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    [ -n "$codename" ] || die "no VERSION_CODENAME in /etc/os-release"
    existing=$(apt-get indextargets --format '$(REPO_URI)' "Identifier: Sources" "Release: $codename" "Component: main" 2>/dev/null | sed '/^$/d')
    if [ -n "$existing" ]; then
        log "a deb-src entry for $codename main exists; updating all package lists"
        APT_UPDATED=0; apt_update
    else
        uri=$(apt-get indextargets --format '$(REPO_URI)' "Identifier: Packages" "Release: $codename" "Component: main" 2>/dev/null | sed -n '/./{p;q}')
        [ -n "$uri" ] || die "no 'deb … $codename main' entry in the apt sources to derive a deb-src line from"
        log "adding $DEB_SRC_LIST: deb-src ${uri%/} $codename main"
        {
            echo "# Added by mpir-rs scripts (source of $SRC_PKG for debug symbols and a debuginfo build)."
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
    source_index_has "$1" || die "no source package $SRC_PKG ${1:-(any version)} in the apt source indices"
}
dsc_complete() {   # $1 = .dsc: it and every file it lists are present
    [ -f "$1" ] || return 1
    local f
    while read -r f; do
        [ -f "$SRC_DIR/$f" ] || return 1
    done < <(awk '/^Files:/ {on = 1; next} /^[^ ]/ {on = 0} on && NF == 3 {print $3}' "$1")
}

if [ -z "$SRC_VER" ]; then
    ensure_source_index ""
    SRC_VER=$(source_index_versions | sed -n 1p)
    log "$SRC_PKG is not installed; using the newest source version, $SRC_VER"
fi
VER_NOEPOCH=${SRC_VER#*:}
DSC=$SRC_DIR/${SRC_PKG}_${VER_NOEPOCH}.dsc
SOURCE=$WORK/source-$VER_NOEPOCH        # Debian's source tree, patched, never configured in
BUILD=$WORK/build-$VER_NOEPOCH          # the out-of-tree build directory
STAMP_TEXT=$(stamp_text "$SRC_VER")

if [ -f "$SOURCE/.mpir-extracted" ] && [ -x "$SOURCE/configure" ]; then
    log "reusing source tree $SOURCE"
else
    if ! dsc_complete "$DSC"; then
        ensure_source_index "$SRC_VER"
        log "apt-get source $SRC_PKG=$SRC_VER"
        (cd "$SRC_DIR" && apt-get source -q --download-only -o APT::Sandbox::User=root "$SRC_PKG=$SRC_VER")
        dsc_complete "$DSC" || die "apt-get source did not produce $DSC and its files"
    fi
    log "unpacking $(basename "$DSC") into $SOURCE"
    rm -rf "$SOURCE" "$BUILD" "$WORK/unpack.tmp"
    mkdir -p "$WORK/unpack.tmp"
    # dpkg-source puts a copy of the orig tarball next to the tree: unpack in a scratch dir.
    dpkg-source -x "$DSC" "$WORK/unpack.tmp/tree" >"$LOGS/dpkg-source.log" 2>&1 ||
        { tail -n 20 "$LOGS/dpkg-source.log"; die "dpkg-source -x failed"; }
    [ -x "$WORK/unpack.tmp/tree/configure" ] || die "the unpacked source has no configure script"
    touch "$WORK/unpack.tmp/tree/.mpir-extracted"
    mv "$WORK/unpack.tmp/tree" "$SOURCE"
    rm -rf "$WORK/unpack.tmp"
fi
# Other versions' trees are stale.
for d in "$WORK"/source-* "$WORK"/build-*; do
    [ -e "$d" ] && [ "$d" != "$SOURCE" ] && [ "$d" != "$BUILD" ] || continue
    log "removing stale $d"; rm -rf "$d"
done

# --- Configure and build, out of tree, in a clean environment --------------------------------
JOBS=$(nproc 2>/dev/null || echo 2)
build_env() {
    env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME="$WORK/home" LC_ALL=C.UTF-8 TZ=UTC \
        SHELL=/bin/sh "$@"
}
if [ -f "$BUILD/config.status" ] && [ -f "$BUILD/.mpir-configured" ] &&
    [ "$(cat "$BUILD/.mpir-configured")" = "$STAMP_TEXT" ]; then
    log "reusing configured build tree $BUILD"
else
    rm -rf "$BUILD"
    mkdir -p "$BUILD"
    log "configuring (≈1.2 min; log: $LOGS/configure.log): configure $CONFIGURE_LINE"
    (cd "$BUILD" && build_env "$SOURCE/configure" --prefix="$PREFIX" "${CONFIGURE_ARGS[@]}" \
        CFLAGS="$BUILD_CFLAGS") >"$LOGS/configure.log" 2>&1 ||
        { tail -n 30 "$LOGS/configure.log"; die "configure failed (see $LOGS/configure.log and $BUILD/config.log)"; }
    echo "$STAMP_TEXT" >"$BUILD/.mpir-configured"
fi

log "building (make -j$JOBS, ≈3 min on 2 cores; log: $LOGS/make.log)"
build_env make -C "$BUILD" -j"$JOBS" >"$LOGS/make.log" 2>&1 ||
    { grep -E -m 20 -B 2 -A 8 '(error|Error) ' "$LOGS/make.log" | tail -n 40; die "make failed (see $LOGS/make.log)"; }

STAGE=$WORK/stage
rm -rf "$STAGE"
log "make install DESTDIR=$STAGE (log: $LOGS/install.log)"
build_env make -C "$BUILD" install DESTDIR="$STAGE" >"$LOGS/install.log" 2>&1 ||
    { tail -n 30 "$LOGS/install.log"; die "make install failed"; }
files_ok "$STAGE$PREFIX" ||
    die "the staged install $STAGE$PREFIX lacks files, DWARF in libmpi or MPIR_debug_gate"

# --- Into place: the stamp is written only after the self-test below --------------------------
rm -rf "$PREFIX.old"
[ ! -e "$PREFIX" ] || mv "$PREFIX" "$PREFIX.old"
mv "$STAGE$PREFIX" "$PREFIX"
rm -rf "$PREFIX.old" "$STAGE"
log "installed into $PREFIX"

# --- Self-test ---------------------------------------------------------------------------------
LIBMPI=$(real_file "$PREFIX/lib/libmpi.so")
DLL=$(real_file "$PREFIX/lib/libtvmpich.so")
MPIEXEC=$PREFIX/bin/mpiexec.hydra
[ -x "$MPIEXEC" ] || MPIEXEC=$PREFIX/bin/mpiexec
GDB=(gdb -nx -batch -iex 'set debuginfod enabled off')

# 1. Types and symbols through gdb, and MPIR_dll_name naming the installed DLL.
args=()
for t in "${DLL_TYPES[@]}"; do args+=(-ex "ptype $t"); done
for s in "${DLL_SYMBOLS[@]}"; do args+=(-ex "info address $s"); done
args+=(-ex 'print MPIR_dll_name')
"${GDB[@]}" "${args[@]}" "$LIBMPI" >"$LOGS/gdb-types.log" 2>&1 ||
    { cat "$LOGS/gdb-types.log"; die "gdb failed on $LIBMPI"; }
for t in "${DLL_TYPES[@]}"; do
    grep -q "^No symbol \"$t\"" "$LOGS/gdb-types.log" && die "gdb: no type $t in $LIBMPI"
done
for s in "${DLL_SYMBOLS[@]}"; do
    grep -Eq "^Symbol \"$s\" is .*(at address|at offset) 0x[0-9a-f]+" "$LOGS/gdb-types.log" ||
        { grep -F "$s" "$LOGS/gdb-types.log" >&2 || true; die "gdb: no address for $s in $LIBMPI"; }
done
grep -Fq "= \"$PREFIX/lib/libtvmpich.so\"" "$LOGS/gdb-types.log" ||
    { grep -A1 -F 'MPIR_dll_name' "$LOGS/gdb-types.log" | tail -n 3 >&2; die "MPIR_dll_name is not \"$PREFIX/lib/libtvmpich.so\""; }
[ -f "$DLL" ] || die "$PREFIX/lib/libtvmpich.so is dangling"
grep -q ' T mqs_setup_basic_callbacks$' <<<"$(nm -D --defined-only "$DLL")" ||
    die "$DLL does not export mqs_setup_basic_callbacks"
log "gdb sees the DLL's ${#DLL_TYPES[@]} types and ${#DLL_SYMBOLS[@]} symbols; MPIR_dll_name = $PREFIX/lib/libtvmpich.so"

# 2. Compile with the installed mpicc and run 2 ranks.
T=$WORK/selftest
rm -rf "$T"; mkdir -p "$T"
cat >"$T/hello.c" <<'EOF'
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    printf("mpir-selftest rank %d of %d pid %d\n", rank, size, (int) getpid());
    fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
EOF
APP=$T/hello
run_env() {     # the caller's MPI/hydra variables (MPIEXEC_DEBUG, HYDRA_*, MPIR_CVAR_*) stay out
    env -i PATH="$PREFIX/bin:/usr/bin:/bin" HOME="$WORK/home" LC_ALL=C.UTF-8 "$@"
}
(cd "$T" && run_env "$PREFIX/bin/mpicc" -g -O0 -o "$APP" hello.c) >"$LOGS/selftest.log" 2>&1 ||
    { cat "$LOGS/selftest.log"; die "the installed mpicc cannot compile an MPI program"; }
grep -Eq "(RUNPATH|RPATH).*\[$PREFIX/lib\]" <<<"$(readelf -d "$APP")" ||
    die "$APP has no RUNPATH to $PREFIX/lib (mpicc wrapper flags?)"
expect_ranks() {   # $1 = output file: one line from each of 2 ranks
    grep -q '^mpir-selftest rank 0 of 2 ' "$1" && grep -q '^mpir-selftest rank 1 of 2 ' "$1"
}
rc=0
(cd "$T" && run_env timeout 60 "$MPIEXEC" -n 2 "$APP") >"$T/plain.out" 2>"$T/plain.err" || rc=$?
{ [ $rc -eq 0 ] && expect_ranks "$T/plain.out"; } ||
    { cat "$T/plain.out" "$T/plain.err" >&2; die "mpiexec -n 2 failed (exit $rc) or not both ranks printed"; }
log "mpiexec -n 2: both ranks ran ($(tr '\n' ';' <"$T/plain.out"))"

# 3. The gate: with MPIEXEC_DEBUG=1 both ranks must spin in MPII_Wait_for_debugger until
#    MPIR_debug_gate is set, and then finish.
JOB=''
kill_job() { [ -z "$JOB" ] || kill -TERM "$JOB" 2>/dev/null || true; }
trap kill_job EXIT
(cd "$T" && exec env -i PATH="$PREFIX/bin:/usr/bin:/bin" HOME="$WORK/home" LC_ALL=C.UTF-8 \
    MPIEXEC_DEBUG=1 timeout 120 "$MPIEXEC" -n 2 "$APP") >"$T/gate.out" 2>"$T/gate.err" &
JOB=$!
ranks=()
descends_from() {   # $1 = pid, $2 = ancestor pid
    local p=$1
    while [ -n "$p" ] && [ "$p" -gt 1 ]; do
        [ "$p" = "$2" ] && return 0
        p=$(awk '$1 == "PPid:" {print $2}' "/proc/$p/status" 2>/dev/null) || return 1
    done
    return 1
}
find_ranks() {  # processes running $APP under our mpiexec (ranks are children of hydra_pmi_proxy)
    local d pids=()
    for d in /proc/[0-9]*; do
        [ "$(readlink "$d/exe" 2>/dev/null)" = "$APP" ] && descends_from "${d#/proc/}" "$JOB" &&
            pids+=("${d#/proc/}")
    done
    ranks=("${pids[@]}")
}
for _ in $(seq 100); do
    find_ranks
    [ ${#ranks[@]} -lt 2 ] || break
    kill -0 "$JOB" 2>/dev/null || break
    sleep 0.2
done
[ ${#ranks[@]} -eq 2 ] ||
    { cat "$T/gate.out" "$T/gate.err" >&2; die "expected 2 ranks of $APP, found ${#ranks[@]}"; }
sleep 2
if grep -q mpir-selftest "$T/gate.out"; then
    cat "$T/gate.out" >&2; die "with MPIEXEC_DEBUG=1 a rank got past MPI_Init without the gate"
fi
for pid in "${ranks[@]}"; do
    grep -q " $PREFIX/lib/libmpi\.so" "/proc/$pid/maps" ||
        die "rank $pid did not load $PREFIX/lib/libmpi.so"
    "${GDB[@]}" -p "$pid" -ex bt -ex 'print MPIR_debug_gate' -ex 'set var MPIR_debug_gate=1' \
        -ex 'print MPIR_debug_gate' -ex detach >"$T/gdb-$pid.log" 2>&1 ||
        { cat "$T/gdb-$pid.log" >&2; die "gdb -p $pid failed"; }
    grep -q 'MPII_Wait_for_debugger' "$T/gdb-$pid.log" && grep -qx '[$]1 = 0' "$T/gdb-$pid.log" &&
        grep -qx '[$]2 = 1' "$T/gdb-$pid.log" ||
        { cat "$T/gdb-$pid.log" >&2; die "rank $pid was not waiting on MPIR_debug_gate in MPII_Wait_for_debugger"; }
done
rc=0
wait "$JOB" || rc=$?
JOB=''
{ [ $rc -eq 0 ] && expect_ranks "$T/gate.out"; } ||
    { cat "$T/gate.out" "$T/gate.err" >&2; die "after MPIR_debug_gate=1 the job did not finish cleanly (exit $rc)"; }
log "MPIEXEC_DEBUG=1: ranks ${ranks[*]} spun in MPII_Wait_for_debugger; MPIR_debug_gate=1 released them"
rm -rf "$T"

echo "$STAMP_TEXT" >"$STAMP.tmp"
mv -f "$STAMP.tmp" "$STAMP"
cached_ok || die "the fresh install does not pass the cached check"
log "done in ${SECONDS}s: $PREFIX ($SRC_PKG $SRC_VER)"
echo "$PREFIX" >&3
