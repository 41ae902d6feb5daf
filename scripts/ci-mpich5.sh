#!/usr/bin/env bash
# ci-mpich5.sh — MPICH 5.0.2 from PyPI (the `mpich` wheel), whose mpiexec.hydra is stripped,
# non-PIE and has no build-id: the starter without MPIR symbols whose table mpir-acquire finds
# by a validated memory search (issue 19, "Starters without symbols"). The wheel is installed
# with --no-deps into a venv (its bin/ has mpiexec.hydra, hydra_pmi_proxy and mpicc; lib/ has
# libmpi.so.12).
#
# Usage: scripts/ci-mpich5.sh [VENV_DIR]
#   VENV_DIR defaults to ${MPIR_MPICH5_PREFIX:-/var/cache/mpir-rs/venv-mpich5}. Progress goes to
#   stderr; the LAST line on stdout is the venv's absolute path (the prefix the tests want):
#       export MPIR_MPICH5_PREFIX=$(bash scripts/ci-mpich5.sh | tail -n1)
#
# Cached: the downloaded wheel stays in ${MPIR_WHEELS:-/var/cache/mpir-rs/wheels}; the venv is
# reused while its stamp (the pin + the interpreter's version) matches and its mpiexec.hydra
# runs, in well under a second. The stamp is written last, so an interrupted run is made again
# the next time (a venv names its own directory in its scripts' #! lines: it is made in place).
set -Eeuo pipefail

PIN=mpich==5.0.2
VENV=${1:-${MPIR_MPICH5_PREFIX:-/var/cache/mpir-rs/venv-mpich5}}
WHEELS=${MPIR_WHEELS:-/var/cache/mpir-rs/wheels}
PYTHON=${PYTHON:-python3}

exec 3>&1 1>&2 </dev/null # fd 3: the result line; all other output goes to stderr
log() { printf '[ci-mpich5 %(%T)T] %s\n' -1 "$*" >&2; }
trap 'log "ERROR: line $LINENO: \"$BASH_COMMAND\" failed (exit $?)"' ERR

command -v "$PYTHON" >/dev/null || { log "ERROR: no $PYTHON on PATH"; exit 1; }
if ! "$PYTHON" -c 'import venv, ensurepip' 2>/dev/null; then
    # Debian's python3 makes venvs only with python3-venv.
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3-venv
fi
stamp="python $("$PYTHON" -c 'import sys; print(sys.version.split()[0])') $PIN"
works() { [[ -x $VENV/bin/mpiexec.hydra && -x $VENV/bin/mpicc ]] && "$VENV/bin/mpichversion" >/dev/null 2>&1; }
if [[ -f $VENV/.mpir-stamp && $(<"$VENV/.mpir-stamp") == "$stamp" ]] && works; then
    log "cached venv $VENV ($stamp)"
    echo "$VENV" >&3
    exit 0
fi

log "making $VENV ($stamp)"
rm -rf "$VENV"
mkdir -p "$(dirname "$VENV")" "$WHEELS"
"$PYTHON" -m venv "$VENV"
# The venv's own pip (ensurepip) fetches the wheel: the system python3 may have none.
wheel=$(find "$WHEELS" -maxdepth 1 -name "mpich-${PIN#mpich==}-*.whl" -print -quit)
if [[ -z $wheel ]]; then
    log "downloading $PIN into $WHEELS"
    "$VENV/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps \
        --only-binary=:all: -d "$WHEELS" "$PIN"
    wheel=$(find "$WHEELS" -maxdepth 1 -name "mpich-${PIN#mpich==}-*.whl" -print -quit)
    [[ -n $wheel ]] || { log "ERROR: pip download left no mpich wheel in $WHEELS"; exit 1; }
fi
log "installing $wheel"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps "$wheel"
works || { log "ERROR: the venv's mpiexec.hydra/mpicc/mpichversion do not work"; exit 1; }
log "$("$VENV/bin/mpichversion" | head -n 1)"
printf '%s\n' "$stamp" >"$VENV/.mpir-stamp"
echo "$VENV" >&3
