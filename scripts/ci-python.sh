#!/usr/bin/env bash
# ci-python.sh — the Python tool chain the mpir-py tests need (issue 22): a venv with maturin
# (builds the wheel), pytest (runs mpir-py/tests), mypy (stubtest checks the committed type
# stubs against the built module) and jsonschema (the tests validate the JSON documents against
# docs/schema). Versions are pinned; the venv is made once and reused.
#
# Usage: scripts/ci-python.sh [VENV_DIR]
#   VENV_DIR defaults to ${MPIR_PY_VENV:-/var/cache/mpir-rs/py-venv}. Progress goes to stderr;
#   the LAST line on stdout is the venv's absolute path:
#       export MPIR_PY_VENV=$(bash scripts/ci-python.sh | tail -n1)
#
# Cached: the stamp (the pins + the interpreter's version) matches → exit 0 in well under a
# second. The stamp is written last, so an interrupted run is made again the next time (a venv
# names its own directory in its scripts' #! lines: it is made in place, not moved there).
set -Eeuo pipefail

PINS=(maturin==1.16.0 pytest==9.2.0 mypy==2.4.1 jsonschema==4.26.0)
VENV=${1:-${MPIR_PY_VENV:-/var/cache/mpir-rs/py-venv}}
PYTHON=${PYTHON:-python3}

command -v "$PYTHON" >/dev/null || { echo "ci-python.sh: no $PYTHON on PATH" >&2; exit 1; }
if ! "$PYTHON" -c 'import venv, ensurepip' 2>/dev/null; then
    # Debian's python3 makes venvs only with python3-venv.
    apt-get update >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3-venv >&2
fi
stamp="python $("$PYTHON" -c 'import sys; print(sys.version.split()[0])') ${PINS[*]}"
if [[ -x $VENV/bin/python && -f $VENV/.mpir-stamp && $(<"$VENV/.mpir-stamp") == "$stamp" ]]; then
    echo "ci-python.sh: cached venv $VENV ($stamp)" >&2
    echo "$VENV"
    exit 0
fi

echo "ci-python.sh: making $VENV ($stamp)" >&2
rm -rf "$VENV"
mkdir -p "$(dirname "$VENV")"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${PINS[@]}" >&2
printf '%s\n' "$stamp" >"$VENV/.mpir-stamp"
echo "$VENV"
