#!/usr/bin/env bash
# Install Debian's headless Chromium + chromedriver (if missing) for the
# HTML-report browser tests.
#
# Output contract: the LAST TWO lines on stdout are always
#   CHROMIUM=/abs/path/to/chromium
#   CHROMEDRIVER=/abs/path/to/chromedriver
# (everything apt prints goes to stderr), so callers can do
#   eval "$(bash ci-chromium.sh | tail -n 2)"; export MPIR_CHROMIUM=$CHROMIUM MPIR_CHROMEDRIVER=$CHROMEDRIVER
# Exits non-zero if either binary cannot be found/installed.
set -euo pipefail

find_chromium() {
  local c
  for c in "${MPIR_CHROMIUM:-}" /usr/bin/chromium "$(command -v chromium 2>/dev/null || true)"; do
    if [[ -n "$c" && -x "$c" ]]; then echo "$c"; return 0; fi
  done
  return 1
}
find_driver() {
  local c
  for c in "${MPIR_CHROMEDRIVER:-}" "$(command -v chromedriver 2>/dev/null || true)" /usr/bin/chromedriver; do
    if [[ -n "$c" && -x "$c" ]]; then echo "$c"; return 0; fi
  done
  return 1
}

if ! find_chromium >/dev/null || ! find_driver >/dev/null; then
  if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; else SUDO=; fi
  export DEBIAN_FRONTEND=noninteractive
  # Only refresh the package lists when apt does not know the packages yet
  # (fresh image with empty /var/lib/apt/lists) or the first install fails.
  if ! apt-cache show chromium chromium-driver >/dev/null 2>&1; then
    echo "ci-chromium: apt-get update" >&2
    $SUDO apt-get update -q >&2
  fi
  echo "ci-chromium: installing chromium chromium-driver" >&2
  if ! $SUDO apt-get install -y -q --no-install-recommends chromium chromium-driver >&2; then
    echo "ci-chromium: install failed; retrying after apt-get update" >&2
    $SUDO apt-get update -q >&2
    $SUDO apt-get install -y -q --no-install-recommends chromium chromium-driver >&2
  fi
fi

CHROMIUM=$(find_chromium) || { echo "ci-chromium: chromium not found after install" >&2; exit 1; }
CHROMEDRIVER=$(find_driver) || { echo "ci-chromium: chromedriver not found after install" >&2; exit 1; }
# Versions to stderr for the CI log (chromium --version is cheap and headless-safe).
"$CHROMIUM" --version >&2 2>/dev/null || true
"$CHROMEDRIVER" --version >&2 || true
echo "CHROMIUM=$CHROMIUM"
echo "CHROMEDRIVER=$CHROMEDRIVER"
