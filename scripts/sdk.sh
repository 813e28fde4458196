#!/usr/bin/env bash
# Installs Cloudflare's official SDKs, pinned, where tests/sdk.rs finds them: the Python SDK
# (tests/sdk/requirements.txt, from PyPI) in a virtualenv and the TypeScript SDK
# (tests/sdk/package-lock.json, from npm) in node_modules, both under target/sdk (or
# $MESHLB_SDK_DIR). Does nothing when the pins have not changed since the last install.
set -euo pipefail
cd "$(dirname "$0")/.."

dir="${MESHLB_SDK_DIR:-$PWD/target/sdk}"
stamp="$dir/installed"
want="$(cat tests/sdk/requirements.txt tests/sdk/package-lock.json | sha256sum | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi

rm -rf "$dir"
mkdir -p "$dir/node"
python3 -m venv "$dir/venv"
"$dir/venv/bin/pip" install --quiet --disable-pip-version-check -r tests/sdk/requirements.txt
cp tests/sdk/package.json tests/sdk/package-lock.json "$dir/node/"
(cd "$dir/node" && npm ci --silent --no-audit --no-fund)
echo "$want" > "$stamp"
