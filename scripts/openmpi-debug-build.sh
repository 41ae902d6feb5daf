#!/usr/bin/env bash
# openmpi-debug-build.sh — Open MPI 4.1.4 built from Debian's pinned source tarball in a
# configuration unlike Debian's (issue 30): --enable-debug (every opal_object_t carries a magic
# number, list items a reference count and owner, mutexes their debug fields: the layouts of the
# communicator, requests and ob1 fragments all move), PML ob1 and every other component linked
# into libmpi (--disable-dlopen), Debian's external hwloc, libevent and PMIx. Its ranks are the
# real processes on which the choice between shipped layouts is exercised. Its libraries are
# installed stripped of their debug information, as a distribution ships them, so that the
# shipped layouts (not the build's own DWARF) are what a tool reads them with; the DWARF is kept
# apart in oracle/ (no debuglink, no build-id directory points at it), as the oracle the
# generated layouts are checked against.
#
# Usage: scripts/openmpi-debug-build.sh [CACHE_DIR]
#   CACHE_DIR defaults to ${MPIR_CACHE_DIR:-/var/cache/mpir-rs}. Progress goes to stderr; the
#   LAST line on stdout is the install prefix (bin/mpirun, bin/mpicc, lib/libmpi.so,
#   include/openmpi/ with the internal headers, oracle/libmpi.so.debug with the DWARF):
#       export MPIR_OMPI_DEBUG_PREFIX=$(bash scripts/openmpi-debug-build.sh | tail -n1)
#
# About 12 minutes cold on 2 cores; cached while the stamp (source checksum + recipe) matches and
# mpirun answers. Serialised with the other scripts through $CACHE_DIR/.lock.
set -Eeuo pipefail

RECIPE=2
VERSION=4.1.4
TARBALL=openmpi_$VERSION.orig.tar.xz
URL=http://deb.debian.org/debian/pool/main/o/openmpi/$TARBALL
SHA256=ddaee7dbdb01eb4fab1fda5b5e03e8bbff026711806c095c1f39bb410f99f263
PACKAGES=(gcc g++ libc6-dev make binutils xz-utils curl perl libhwloc-dev libevent-dev libpmix-dev)
CONFIGURE=(--enable-debug --with-devel-headers --disable-dlopen --disable-mpi-fortran
    --disable-oshmem --disable-io-romio --disable-man-pages --without-ucx --without-verbs
    --without-ofi --without-psm --without-psm2 --without-cuda --with-hwloc=external
    --with-libevent=external --with-pmix=/usr/lib/x86_64-linux-gnu/pmix2
    --disable-dependency-tracking --disable-silent-rules)

exec 3>&1 1>&2 </dev/null          # fd 3: the result line; all other output goes to stderr
log() { printf '[openmpi-debug-build %(%T)T] %s\n' -1 "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
trap 'log "ERROR: line $LINENO: \"$BASH_COMMAND\" failed (exit $?)"' ERR
# shellcheck source=lib/fetch.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib/fetch.sh"

case "${1:-}" in
    -h|--help) sed -n '2,/^set -Eeuo/{/^set -Eeuo/d; s/^# \{0,1\}//p}' "$0" >&3; exit 0 ;;
esac
[ $# -le 1 ] || die "usage: $0 [CACHE_DIR]"
CACHE_DIR=${1:-${MPIR_CACHE_DIR:-/var/cache/mpir-rs}}
mkdir -p -- "$CACHE_DIR"
CACHE_DIR=$(cd -- "$CACHE_DIR" && pwd -P)
PREFIX=$CACHE_DIR/openmpi-$VERSION-debug
stamp_text() { printf 'recipe=%s\nsource=%s sha256 %s\nconfigure=%s\n' "$RECIPE" "$TARBALL" "$SHA256" "${CONFIGURE[*]}"; }
cached() {
    [ -x "$PREFIX/bin/mpirun" ] && [ -f "$PREFIX/.mpir-stamp" ] &&
        [ "$(<"$PREFIX/.mpir-stamp")" = "$(stamp_text)" ] && "$PREFIX/bin/ompi_info" --version >/dev/null 2>&1
}

exit_if_cached "$PREFIX"
lock_cache
exit_if_cached "$PREFIX"

ensure_packages "${PACKAGES[@]}"
SRC=$CACHE_DIR/src/$TARBALL
fetch_pinned "$URL" "$SHA256" "$SRC"

WORK=$(mktemp -d "$CACHE_DIR/openmpi-debug.tmp.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
log "extracting $TARBALL"
tar -xJf "$SRC" -C "$WORK"
TREE=$WORK/openmpi-$VERSION
[ -x "$TREE/configure" ] || die "no configure in $TARBALL"
rm -rf "$PREFIX"
log "configuring Open MPI $VERSION (debug; log: $WORK/configure.log)"
if ! (cd "$TREE" && ./configure --prefix="$PREFIX" "${CONFIGURE[@]}" >"$WORK/configure.log" 2>&1); then
    tail -n 30 "$WORK/configure.log" >&2
    die "configure failed"
fi
log "building (make -j$(nproc); log: $WORK/make.log)"
if ! (cd "$TREE" && make -j"$(nproc)" >"$WORK/make.log" 2>&1 && make install >>"$WORK/make.log" 2>&1); then
    tail -n 40 "$WORK/make.log" >&2
    die "build failed"
fi
# The generator of shipped layouts reads this build's configured headers, and the ob1
# component's headers (not installed by --with-devel-headers) from the tree.
mkdir -p "$PREFIX/include/openmpi/ompi/mca/pml/ob1"
cp "$TREE"/ompi/mca/pml/ob1/*.h "$PREFIX/include/openmpi/ompi/mca/pml/ob1/"
mkdir -p "$PREFIX/include/openmpi/ompi/peruse"
cp "$TREE/ompi/peruse/peruse.h" "$PREFIX/include/openmpi/ompi/peruse/"
"$PREFIX/bin/ompi_info" | grep -q "Internal debug support: yes" || die "the build is not a debug build"
# The libraries as a distribution ships them: no DWARF (kept apart as the oracle).
mkdir -p "$PREFIX/oracle"
for lib in "$PREFIX"/lib/lib*.so.*; do
    [ -f "$lib" ] && [ ! -L "$lib" ] || continue
    name=$(basename "$lib")
    objcopy --only-keep-debug "$lib" "$PREFIX/oracle/${name%%.so.*}.so.debug"
    strip --strip-debug "$lib"
done
[ -s "$PREFIX/oracle/libmpi.so.debug" ] || die "no DWARF kept for libmpi"
stamp_text >"$PREFIX/.mpir-stamp"
log "installed $PREFIX"
echo "$PREFIX" >&3
