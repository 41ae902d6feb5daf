#!/usr/bin/env bash
# openmpi-types-sidecar.sh — a DWARF-only "types sidecar" for stock Open MPI, so that Open
# MPI's message-queue DLL (libompi_dbg_msgq.so) can be hosted against ranks of an unmodified,
# stripped Open MPI: the DLL asks the debugger for the layouts of ~19 internal types
# (opal_list_item_t, ompi_communicator_t, mca_pml_base_request_t, …) that no installed file
# describes. mpir-target reads them from this object
# (mpir_target::debuginfo::DebugOptions::types_sidecars). The object also describes the PML
# ob1 types mpir-mqd's native walker reads for unexpected messages (mca_pml_ob1_comm_t,
# mca_pml_ob1_recv_frag_t, the match and rendezvous headers, …), which the DLL leaves out.
#
# Usage: scripts/openmpi-types-sidecar.sh [CACHE_DIR]
#   CACHE_DIR defaults to ${MPIR_CACHE_DIR:-/var/cache/mpir-rs}. Progress goes to stderr; the
#   LAST line on stdout is the absolute path of the object:
#       sidecar=$(scripts/openmpi-types-sidecar.sh | tail -n1)
#
# How: Debian's libopenmpi-dev ships Open MPI's internal headers and the build's
# opal_config.h under /usr/lib/<triplet>/openmpi/include/openmpi/, all but
# ompi/peruse/peruse.h and the PML ob1 component's headers (ompi/mca/pml/ob1/*.h), which are
# taken from the source package (`apt-get source --download-only openmpi` of the installed
# version; only those files are extracted from the upstream tarball). A C file that includes the headers and declares one variable of each
# type the DLL needs is compiled with `gcc -g -c -fno-eliminate-unused-debug-types` — same
# compiler ABI and configuration as the installed library, so the layouts match a live rank.
# The object is checked to describe every needed type.
#
# Cached: the stamp (Open MPI source version + recipe) matches and the object is there → exit 0
# in well under a second. Needs root for apt-get (missing packages, the deb-src entry) on the
# first run only. Serialised with the other scripts through $CACHE_DIR/.lock.
# shellcheck disable=SC2016  # '$(…)' strings are for apt
set -Eeuo pipefail

RECIPE=3
PACKAGES=(gcc libc6-dev libopenmpi-dev binutils dpkg-dev xz-utils)
DEB_SRC_LIST=/etc/apt/sources.list.d/mpir-rs-deb-src.sources
# TYPES and HEADERS: the types the sidecar describes, the headers that declare them.
# shellcheck source=lib/openmpi-types.sh
. "$(dirname -- "${BASH_SOURCE[0]}")/lib/openmpi-types.sh"

exec 3>&1 1>&2 </dev/null          # fd 3: the result line; all other output goes to stderr
log() { printf '[openmpi-types-sidecar %(%T)T] %s\n' -1 "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
trap 'log "ERROR: line $LINENO: \"$BASH_COMMAND\" failed (exit $?)"' ERR

case "${1:-}" in
    -h|--help) sed -n '2,/^# shellcheck/{/^# shellcheck/d; s/^# \{0,1\}//p}' "$0" >&3; exit 0 ;;
esac
[ $# -le 1 ] || die "usage: $0 [CACHE_DIR]"
CACHE_DIR=${1:-${MPIR_CACHE_DIR:-/var/cache/mpir-rs}}
mkdir -p -- "$CACHE_DIR"
CACHE_DIR=$(cd -- "$CACHE_DIR" && pwd -P)
OUT_DIR=$CACHE_DIR/openmpi-types
SRC_DIR=$CACHE_DIR/src

installed_ver() { dpkg-query -W -f='${source:Version}' libopenmpi-dev 2>/dev/null || true; }
object_for() { echo "$OUT_DIR/openmpi-${1#*:}-types-r$RECIPE.o"; }
stamp_text() { printf 'recipe=%s\nsource=openmpi %s\ntypes=%s\n' "$RECIPE" "$1" "${TYPES[*]}"; }

cached() {
    local ver=$1 obj
    [ -n "$ver" ] || return 1
    obj=$(object_for "$ver")
    [ -s "$obj" ] && [ -f "$obj.stamp" ] && [ "$(<"$obj.stamp")" = "$(stamp_text "$ver")" ]
}

VER=$(installed_ver)
if cached "$VER"; then
    log "cached: $(object_for "$VER")"
    object_for "$VER" >&3
    exit 0
fi

exec 9>"$CACHE_DIR/.lock"
flock -w 3600 9 || die "could not lock $CACHE_DIR/.lock"

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
VER=$(installed_ver)
[ -n "$VER" ] || die "libopenmpi-dev is not installed"
if cached "$VER"; then
    object_for "$VER" >&3
    exit 0
fi
VER_NOEPOCH=${VER#*:}
UPSTREAM=${VER_NOEPOCH%-*}
INCLUDE=$(dirname "$(dpkg -L libopenmpi-dev | grep -m1 '/include/openmpi/ompi_config.h$')")
[ -d "$INCLUDE" ] || die "libopenmpi-dev ships no ompi_config.h"

# --- peruse.h from the source package ------------------------------------------------------
ORIG=$SRC_DIR/openmpi_$UPSTREAM.orig.tar.xz
if [ ! -s "$ORIG" ]; then
    mkdir -p "$SRC_DIR"
    if ! apt-cache showsrc --only-source openmpi 2>/dev/null | grep -qxF "Version: $VER"; then
        [ "$(id -u)" -eq 0 ] || die "not root: cannot add a deb-src entry"
        if [ ! -f "$DEB_SRC_LIST" ]; then
            # shellcheck disable=SC1091
            codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
            uri=$(apt-get indextargets --format '$(REPO_URI)' "Identifier: Packages" "Release: $codename" "Component: main" 2>/dev/null | sed -n '/./{p;q}')
            if [ -z "$codename" ] || [ -z "$uri" ]; then die "cannot derive a deb-src line"; fi
            log "adding $DEB_SRC_LIST: deb-src ${uri%/} $codename main"
            printf '# Added by mpir-rs scripts (Debian sources for debug information).\nTypes: deb-src\nURIs: %s\nSuites: %s\nComponents: main\n' \
                "${uri%/}" "$codename" >"$DEB_SRC_LIST.tmp"
            [ ! -f /usr/share/keyrings/debian-archive-keyring.gpg ] ||
                echo "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" >>"$DEB_SRC_LIST.tmp"
            mv -f "$DEB_SRC_LIST.tmp" "$DEB_SRC_LIST"
        fi
        log "apt-get update"
        apt-get update -q
    fi
    log "apt-get source --download-only openmpi=$VER"
    (cd "$SRC_DIR" && apt-get source -q --download-only -o APT::Sandbox::User=root "openmpi=$VER")
    [ -s "$ORIG" ] || die "apt-get source did not produce $ORIG"
fi

WORK=$(mktemp -d "$OUT_DIR.tmp.XXXXXX" 2>/dev/null || { mkdir -p "$OUT_DIR" && mktemp -d "$OUT_DIR.tmp.XXXXXX"; })
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/include/ompi/peruse"
tar -xJf "$ORIG" --wildcards -O '*/ompi/peruse/peruse.h' >"$WORK/include/ompi/peruse/peruse.h"
[ -s "$WORK/include/ompi/peruse/peruse.h" ] || die "no ompi/peruse/peruse.h in $ORIG"
mkdir -p "$WORK/include/ompi/mca/pml/ob1"
tar -xJf "$ORIG" -C "$WORK/include/ompi/mca/pml/ob1" --strip-components=5 --wildcards \
    '*/ompi/mca/pml/ob1/*.h'
[ -s "$WORK/include/ompi/mca/pml/ob1/pml_ob1_recvfrag.h" ] || die "no PML ob1 headers in $ORIG"

# --- the declarations ------------------------------------------------------------------------
{
    echo "/* Generated by mpir-rs scripts/openmpi-types-sidecar.sh for Open MPI $VER. */"
    echo '#include "ompi_config.h"'
    for h in "${HEADERS[@]}"; do echo "#include \"$h\""; done
    for t in "${TYPES[@]}"; do echo "$t mpir_sidecar_$t;"; done
} >"$WORK/types.c"
log "compiling the types of Open MPI $VER"
gcc -g -c -O0 -fno-eliminate-unused-debug-types -I"$INCLUDE" -I"$(dirname "$INCLUDE")" \
    -I"$WORK/include" -o "$WORK/types.o" "$WORK/types.c"
# A DWARF-only object: the variables' storage is irrelevant, only the type descriptions matter.
dump=$(readelf --debug-dump=info "$WORK/types.o")
for t in "${TYPES[@]}"; do
    grep -Eq "DW_AT_name +: (\(indirect string, offset: 0x[0-9a-f]+\): )?$t\$" <<<"$dump" ||
        die "the object does not describe $t"
done

mkdir -p "$OUT_DIR"
OBJ=$(object_for "$VER")
cp "$WORK/types.c" "${OBJ%.o}.c"
mv -f "$WORK/types.o" "$OBJ"
stamp_text "$VER" >"$OBJ.stamp"
log "wrote $OBJ"
echo "$OBJ" >&3
