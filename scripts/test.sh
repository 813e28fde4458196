#!/usr/bin/env bash
# Runs every test of meshlb. First installs the Debian packages the tests need when they are
# missing (as root, via apt-get), so it passes on a fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages the test suite uses (command -> package). The foundation's tests need none
# yet; later parts add slapd, opensmtpd, bind9-dnsutils, iproute2 and friends here.
declare -A NEEDED=()

missing=()
for cmd in "${!NEEDED[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${NEEDED[$cmd]}")
done
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing packages: ${missing[*]} (run as root to install them)" >&2
    exit 1
  fi
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
fi

cargo test --workspace --locked "$@"
