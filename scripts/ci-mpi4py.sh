#!/usr/bin/env bash
# ci-mpi4py.sh — Python MPI ranks for the tests: mpi4py built from source against each of
# Debian's MPI stacks, in venvs of Debian's own interpreter (/usr/bin/python3, not the pyenv
# python3 that is first on PATH), and py-spy (the peer that dumps a Python rank's stack).
#
# Usage: scripts/ci-mpi4py.sh [DIR]
#   DIR defaults to ${MPIR_MPI4PY_DIR:-/var/cache/mpir-rs/mpi4py} and holds
#       openmpi/     venv with mpi4py linked to Debian's Open MPI (libmpi.so.40; MPICC=mpicc.openmpi)
#       mpich/       venv with mpi4py linked to Debian's MPICH (libmpich.so.12; MPICC=mpicc.mpich)
#       bin/py-spy   py-spy's binary (static-pie, from its PyPI wheel; no venv needed)
#       *-build.log  what the two pip builds printed
#   Progress goes to stderr; the LAST line on stdout is DIR's absolute path:
#       export MPIR_MPI4PY_DIR=$(bash scripts/ci-mpi4py.sh | tail -n1)
#
# Cached: the directory is reused while its stamp (the pins + the interpreter's version + the
# Debian versions of both MPI stacks) matches and the checks below pass, in about half a
# second. The stamp is written last, so an interrupted run is made again the next time (a venv
# names its own directory in its scripts' #! lines: it is made in place, not moved there).
# Cold: two unoptimised source builds of mpi4py, side by side (~1 min on 2 cores);
# build isolation fetches setuptools and Cython from PyPI.
set -Eeuo pipefail

MPI4PY_PIN=mpi4py==4.1.2
PYSPY_PIN=py-spy==0.4.3
MPI4PY_CFLAGS=-O0
DIR=${1:-${MPIR_MPI4PY_DIR:-/var/cache/mpir-rs/mpi4py}}
# Debian's interpreter on purpose: python3 on PATH may be pyenv's (another libpython, another
# version), which the tests' rank programs are not meant to run on.
PYTHON=/usr/bin/python3

exec 3>&1 1>&2 </dev/null # fd 3: the result line; all other output goes to stderr
log() { printf '[ci-mpi4py %(%T)T] %s\n' -1 "$*" >&2; }
trap 'log "ERROR: line $LINENO: \"$BASH_COMMAND\" failed (exit $?)"' ERR

# python3-dev: Python.h for the extension; python3-venv: ensurepip for Debian's venvs; the
# -dev packages of both MPI stacks: their mpicc wrappers and headers.
packages=(gcc python3-dev python3-venv openmpi-bin libopenmpi-dev mpich libmpich-dev)
missing=()
for p in "${packages[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
fi
[[ -x $PYTHON ]] || { log "ERROR: no $PYTHON"; exit 1; }
for cc in mpicc.openmpi mpicc.mpich; do
    command -v "$cc" >/dev/null || { log "ERROR: no $cc on PATH"; exit 1; }
done

mkdir -p "$(dirname "$DIR")"
DIR=$(cd "$(dirname "$DIR")" && pwd)/$(basename "$DIR")
pyver=$("$PYTHON" -c 'import sys; print(sys.version.split()[0])')
ompi_ver=$(dpkg-query -W -f='${Version}' libopenmpi-dev)
mpich_ver=$(dpkg-query -W -f='${Version}' libmpich-dev)
stamp="python $pyver $MPI4PY_PIN CFLAGS=$MPI4PY_CFLAGS $PYSPY_PIN openmpi $ompi_ver mpich $mpich_ver"

# check MPI: the venv's mpi4py was compiled against MPI's headers (MPI.get_vendor(), from the
# headers' macros), is linked to its libmpi (ldd) and that library names itself
# (MPI.Get_library_version()). MPI is not initialised (rc.initialize=False): both calls are
# allowed before MPI_Init, and a singleton Open MPI init as root outside mpirun is fragile.
# mpi4py 4's get_config() is {} unless a packager leaves an mpi.cfg: the build writes one that
# names the mpicc it used, and that is checked too.
check() {
    local mpi=$1 quiet=${2:-}
    local py=$DIR/$mpi/bin/python want_name want_lib other_lib
    case $mpi in
        openmpi) want_name='Open MPI' want_lib='libmpi\.so\.40' other_lib='libmpich' ;;
        mpich) want_name='MPICH' want_lib='libmpi(ch)?\.so\.12' other_lib='libmpi\.so\.40' ;;
    esac
    [[ -x $py ]] || { [[ $quiet ]] || log "ERROR: no $py"; return 1; }
    local out
    out=$("$py" -c '
import mpi4py
mpi4py.rc.initialize = False
mpi4py.rc.finalize = False
from mpi4py import MPI
print("mpicc=" + mpi4py.get_config().get("mpicc", ""))
print("vendor=%s %s" % (MPI.get_vendor()[0], ".".join(map(str, MPI.get_vendor()[1]))))
print("module=" + MPI.__file__)
print("library=" + MPI.Get_library_version().rstrip("\0").splitlines()[0].strip())
' 2>&1) || { [[ $quiet ]] || log "ERROR: $mpi: mpi4py does not import: $out"; return 1; }
    local cfg_cc vendor module library
    cfg_cc=$(sed -n 's/^mpicc=//p' <<<"$out")
    vendor=$(sed -n 's/^vendor=//p' <<<"$out")
    module=$(sed -n 's/^module=//p' <<<"$out")
    library=$(sed -n 's/^library=//p' <<<"$out")
    if [[ $cfg_cc != *"mpicc.$mpi" || $vendor != "$want_name "* || $library != *"$want_name"* ]]; then
        [[ $quiet ]] || log "ERROR: $mpi: not $want_name: get_config() mpicc '$cfg_cc'," \
            "get_vendor() '$vendor', Get_library_version() '$library'"
        return 1
    fi
    local libs
    libs=$(ldd "$module" | grep -E 'libmpi' || true)
    if ! grep -qE "$want_lib" <<<"$libs" || grep -qE "$other_lib" <<<"$libs"; then
        [[ $quiet ]] || log "ERROR: $mpi: $module links '$libs', not $want_lib"
        return 1
    fi
    [[ $quiet ]] || log "$mpi: $vendor; $library; mpicc $cfg_cc;" \
        "$(awk '{print $1, $2, $3}' <<<"$libs" | paste -sd ' ')"
}
works() {
    check openmpi quiet && check mpich quiet && [[ -x $DIR/bin/py-spy ]] &&
        "$DIR/bin/py-spy" --version >/dev/null 2>&1
}

if [[ -f $DIR/.mpir-stamp && $(<"$DIR/.mpir-stamp") == "$stamp" ]] && works; then
    log "cached $DIR ($stamp)"
    echo "$DIR" >&3
    exit 0
fi

log "making $DIR ($stamp)"
rm -rf "$DIR"
mkdir -p "$DIR/bin"

# build MPI: a venv of Debian's python3 with mpi4py compiled from source by MPI's mpicc, and an
# mpi.cfg that names that mpicc (read by mpi4py.get_config()).
build() {
    local mpi=$1 cc
    cc=$(command -v "mpicc.$mpi")
    "$PYTHON" -m venv "$DIR/$mpi"
    # --no-cache-dir: pip keys a wheel it built from an sdist by the sdist alone, so the second
    # build would otherwise reuse the first one's wheel, linked to the other MPI.
    # --no-binary: PyPI also has binary mpi4py wheels, not built with this stack's mpicc; the
    # tests want the extension compiled and linked against this stack's headers and libmpi.
    # -O0: the extension is one 200,000-line C file; optimising it takes ~4.5 min of the cold
    # run, unoptimised ~35 s, and the tests need its calls, not its speed.
    CFLAGS=$MPI4PY_CFLAGS MPICC=$cc MPI4PY_BUILD_MPICC=$cc \
        "$DIR/$mpi/bin/python" -m pip install --quiet --disable-pip-version-check \
        --no-cache-dir --no-binary mpi4py "$MPI4PY_PIN"
    local pkg
    pkg=$("$DIR/$mpi/bin/python" -c 'import mpi4py, os; print(os.path.dirname(mpi4py.__file__))')
    printf '[mpi]\nmpicc = %s\n' "$cc" >"$pkg/mpi.cfg"
}
# Each build is one large Cython module compiled by one gcc (~4.5 min): run the two side by side.
pids=()
for mpi in openmpi mpich; do
    log "$mpi: venv of $PYTHON ($pyver), $MPI4PY_PIN from source with mpicc.$mpi" \
        "(log: $DIR/$mpi-build.log)"
    build "$mpi" >"$DIR/$mpi-build.log" 2>&1 &
    pids+=($!)
done
failed=0
for i in 0 1; do
    mpi=$([[ $i == 0 ]] && echo openmpi || echo mpich)
    if ! wait "${pids[$i]}"; then
        log "ERROR: $mpi: the mpi4py build failed:"
        sed 's/^/    /' "$DIR/$mpi-build.log" >&2
        failed=1
    fi
done
((failed == 0)) || exit 1
for mpi in openmpi mpich; do
    check "$mpi" || exit 1
done

log "py-spy: $PYSPY_PIN (binary wheel)"
tmp=$(mktemp -d "$DIR/.py-spy.XXXXXX")
"$DIR/openmpi/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
    --only-binary=:all: --target "$tmp" "$PYSPY_PIN"
[[ -x $tmp/bin/py-spy ]] || { log "ERROR: the $PYSPY_PIN wheel left no bin/py-spy"; exit 1; }
cp "$tmp/bin/py-spy" "$DIR/bin/py-spy"
rm -rf "$tmp"
got=$("$DIR/bin/py-spy" --version)
[[ $got == "py-spy ${PYSPY_PIN#py-spy==}" ]] || { log "ERROR: bin/py-spy says '$got'"; exit 1; }
log "$got"

works || { log "ERROR: $DIR does not check out"; exit 1; }
printf '%s\n' "$stamp" >"$DIR/.mpir-stamp"
echo "$DIR" >&3
