#!/usr/bin/env bash
# ci-static-mpir.sh — a statically linked `mpir` (x86_64-unknown-linux-musl) built from this
# checkout, for the tests that send the agent to a node that does not share the front end's
# file system (issue 31; mpir-cli/tests/multinode_ship.rs, `mpir --agent-ship`). Checked: an ELF
# with no program interpreter (static), and it runs (`mpir --version`).
#
# Usage: scripts/ci-static-mpir.sh
#   Progress goes to stderr; the LAST line on stdout is the program's absolute path:
#       export MPIR_STATIC_MPIR=$(bash scripts/ci-static-mpir.sh | tail -n1)
#
# Needs musl-gcc (Debian's musl-tools: ring's and the embedded programs' C) and the Rust
# target (added with rustup when missing). The build is cargo's dev profile without debug
# information, stripped (the tests need a working agent, not a fast one), in a target directory
# outside the repository (${MPIR_STATIC_TARGET:-/var/cache/mpir-rs/musl-target}): cargo rebuilds
# only what changed (~4 min cold on 2 cores, seconds warm).
set -Eeuo pipefail
cd "$(dirname "$0")/.."

TARGET=x86_64-unknown-linux-musl
DIR=${MPIR_STATIC_TARGET:-/var/cache/mpir-rs/musl-target}

if ! command -v musl-gcc >/dev/null; then
    apt-get update >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends musl-tools >&2
fi
rustup target list --installed | grep -qx "$TARGET" || rustup target add "$TARGET" >&2
mkdir -p "$DIR"
CARGO_TARGET_DIR=$DIR CARGO_PROFILE_DEV_DEBUG=0 CARGO_PROFILE_DEV_STRIP=true \
    cargo build --locked -q -p mpir-cli --bin mpir --target "$TARGET" >&2
exe=$DIR/$TARGET/debug/mpir
[[ -x $exe ]] || { echo "ci-static-mpir.sh: no $exe" >&2; exit 1; }
# Static: no PT_INTERP program header.
if readelf -lW "$exe" | grep -q 'Requesting program interpreter'; then
    echo "ci-static-mpir.sh: $exe is dynamically linked" >&2
    exit 1
fi
"$exe" --version >&2
echo "ci-static-mpir.sh: $(stat -c %s "$exe") bytes, sha256 $(sha256sum "$exe" | cut -d' ' -f1)" >&2
realpath "$exe"
