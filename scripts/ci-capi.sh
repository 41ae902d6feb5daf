#!/usr/bin/env bash
# ci-capi.sh — the C API's part of CI (issue 22): the tools its tests need, and libmpir built
# and installed the way a C user does it, with cargo-c, then found through pkg-config.
#
# Usage: scripts/ci-capi.sh           (from .ci/run, before the workspace's tests)
#
#   1. apt: g++ (the C++ example), valgrind and gcc's libasan (the bad-input and sanitizer
#      tests), pkg-config. cargo: cbindgen (the header check, tests/header.rs) and cargo-c,
#      installed with `cargo install --locked --root` under $CACHE/cargo-bin and reinstalled
#      only when missing or of another version (cargo-c's first install takes ~10 min).
#   2. `cargo cinstall` of mpir-capi (debug profile) into a scratch DESTDIR: libmpir.so.0 with
#      its soname and links, libmpir.a, the committed mpir.h as is, mpir.pc.
#   3. examples/job.c compiled with `pkg-config --cflags --libs mpir` against that install and
#      run on the bundled demo job: the confirmed deadlock, the job released.
# The tests themselves (cargo test -p mpir-capi) run with the workspace's.
set -Eeuo pipefail
cd "$(dirname "$0")/.."

CACHE=${MPIR_CACHE_DIR:-/var/cache/mpir-rs}
BIN_ROOT=$CACHE/cargo-bin
# The newest releases that build with this workspace's toolchain (cargo-c 0.10.26 wants rustc
# 1.97).
CBINDGEN_VERSION=0.29.4
CARGO_C_VERSION=0.10.24+cargo-0.98.0

packages=(gcc g++ libasan8 valgrind pkg-config binutils)
missing=()
for p in "${packages[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
fi

# `cargo install` of NAME at VERSION under BIN_ROOT, unless that version is there.
install_tool() {
    local name=$1 version=$2
    if cargo install --list --root "$BIN_ROOT" 2>/dev/null | grep -qx "$name v$version:"; then
        return
    fi
    echo "installing $name $version under $BIN_ROOT" >&2
    cargo install --locked --quiet --root "$BIN_ROOT" "$name@$version"
}
install_tool cbindgen "$CBINDGEN_VERSION"
install_tool cargo-c "$CARGO_C_VERSION"
export PATH=$BIN_ROOT/bin:$PATH

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# 2. The install, as a packager does it.
cargo cinstall --locked -p mpir-capi --debug \
    --prefix /usr --libdir lib --destdir "$scratch/root"
root=$scratch/root/usr
ls -l "$root/lib" "$root/include" "$root/lib/pkgconfig"
test -L "$root/lib/libmpir.so"
test -e "$root/lib/libmpir.so.0"
test -f "$root/lib/libmpir.a"
readelf -d "$root/lib/libmpir.so.0" | grep -q 'Library soname: \[libmpir.so.0\]'
cmp "$root/include/mpir.h" mpir-capi/include/mpir.h
grep -q '^Libs:.*-lmpir' "$root/lib/pkgconfig/mpir.pc"

# 3. A C tool built through pkg-config, run on the demo job.
export PKG_CONFIG_SYSROOT_DIR=$scratch/root
export PKG_CONFIG_PATH=$root/lib/pkgconfig
read -r -a flags <<<"$(pkg-config --cflags --libs mpir)"
cc -std=c99 -Wall -Wextra -Werror -o "$scratch/job" mpir-capi/examples/job.c "${flags[@]}"
LD_LIBRARY_PATH=$root/lib "$scratch/job" | tee "$scratch/job.out"
grep -q '"verdict":"deadlock"' "$scratch/job.out"
grep -qx released "$scratch/job.out"
echo "libmpir: built and installed with cargo-c, found by pkg-config, job.c ran on the demo job"
