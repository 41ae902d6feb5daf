#!/usr/bin/env bash
# ci-impi.sh — Intel MPI for the tests (issue 19): a venv with the PyPI wheels `impi-rt` and
# `impi-devel` 2021.19.0, installed with --no-deps. The runtime wheel declares a dependency on
# `libfabric>=2.6`, which the index does not have; Intel MPI runs on one node over shared
# memory without it (../shared/notes/real-peers-2.md §3). Its `mpiexec.hydra` is a non-PIE
# executable with symbols and DWARF; its libraries export no message queues.
#
# Usage: scripts/ci-impi.sh [PREFIX]
#   PREFIX defaults to ${MPIR_IMPI_PREFIX:-/var/cache/mpir-rs/venv-impi}. Progress goes to
#   stderr; the LAST line on stdout is the prefix (bin/mpiexec.hydra, bin/mpicc, lib/):
#       export MPIR_IMPI_PREFIX=$(bash scripts/ci-impi.sh | tail -n1)
#
# The wheels are pinned by version and sha256 (pip --require-hashes) and kept in
# /var/cache/mpir-rs/wheels; the venv is made once and reused while its stamp matches.
set -Eeuo pipefail

VERSION=2021.19.0
HASHES=(
    "impi-rt==$VERSION --hash=sha256:708b4336c9d303a3d807b58054c502ed4f716dfb074dfa48904180b46d14bb40"
    "impi-devel==$VERSION --hash=sha256:50efbbc6eb3c41681fac95d2e9443af128d73b6bfbb61d827d894f93bab4b6ad"
)
PREFIX=${1:-${MPIR_IMPI_PREFIX:-/var/cache/mpir-rs/venv-impi}}
WHEELS=${MPIR_WHEEL_CACHE:-/var/cache/mpir-rs/wheels}
PYTHON=${PYTHON:-python3}

command -v "$PYTHON" >/dev/null || { echo "ci-impi.sh: no $PYTHON on PATH" >&2; exit 1; }
if ! "$PYTHON" -c 'import venv, ensurepip' 2>/dev/null; then
    apt-get update >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3-venv >&2
fi
stamp="impi $VERSION $(printf '%s\n' "${HASHES[@]}" | sha256sum | cut -c1-16)"
if [[ -x $PREFIX/bin/mpiexec.hydra && -f $PREFIX/.mpir-stamp && $(<"$PREFIX/.mpir-stamp") == "$stamp" ]]; then
    echo "ci-impi.sh: cached $PREFIX ($stamp)" >&2
    echo "$PREFIX"
    exit 0
fi

echo "ci-impi.sh: making $PREFIX ($stamp)" >&2
mkdir -p "$WHEELS"
req=$(mktemp)
trap 'rm -f "$req"' EXIT
printf '%s\n' "${HASHES[@]}" >"$req"
rm -rf "$PREFIX"
mkdir -p "$(dirname "$PREFIX")"
"$PYTHON" -m venv "$PREFIX"
pip=("$PREFIX/bin/python" -m pip --disable-pip-version-check --quiet)
# Download (or reuse) the pinned wheels, then install from the cache only.
"${pip[@]}" download --no-deps --require-hashes -r "$req" -d "$WHEELS" >&2
"${pip[@]}" install --no-deps --require-hashes --no-index --find-links "$WHEELS" -r "$req" >&2
[[ -x $PREFIX/bin/mpiexec.hydra ]] || { echo "ci-impi.sh: no bin/mpiexec.hydra in $PREFIX" >&2; exit 1; }
printf '%s\n' "$stamp" >"$PREFIX/.mpir-stamp"
echo "$PREFIX"
