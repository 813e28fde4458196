#!/usr/bin/env bash
# Runs every test of meshlb. First installs the Debian packages the tests need when they are
# missing (as root, via apt-get), so it passes on a fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages the test suite uses (file -> package): the prober's tests start a real
# OpenLDAP slapd and OpenSMTPD on loopback (the notification test reads mail back from it); the
# DNS tests query the server with dig, the proxy tests drive it with curl; the deploy test runs
# promtool and a real Prometheus server; the chaos suite builds its world in network namespaces
# with ip (it needs root); the demo is resolved through a real Unbound resolver; the layer-4
# tests put a real Redis, HAProxy (reading PROXY headers) and Unbound behind load balancers;
# tests/sdk.rs drives the API with Cloudflare's TypeScript SDK on Node.js; tests/console.rs
# drives the console in headless Chromium through ChromeDriver; tests/records.rs reads dnstap
# back with BIND's dnstap-read and collects it with fstrm_capture; tests/dns.rs checks DNS
# cookies and NSID with Knot's kdig too; tests/store.rs keeps the config in a real
# three-member etcd cluster.
declare -A NEEDED=(
  [/usr/sbin/slapd]=slapd
  [/usr/sbin/slapadd]=slapd
  [/usr/sbin/smtpd]=opensmtpd
  [/usr/bin/dig]=bind9-dnsutils
  [/usr/bin/dnstap-read]=bind9-dnsutils
  [/usr/bin/fstrm_capture]=fstrm-bin
  [/usr/bin/kdig]=knot-dnsutils
  [/usr/bin/etcd]=etcd-server
  [/usr/bin/curl]=curl
  [/usr/bin/openssl]=openssl
  [/usr/bin/promtool]=prometheus
  [/usr/bin/prometheus]=prometheus
  [/usr/sbin/ip]=iproute2
  [/usr/sbin/unbound]=unbound
  [/usr/sbin/haproxy]=haproxy
  [/usr/bin/redis-server]=redis-server
  [/usr/bin/redis-cli]=redis-tools
  [/usr/bin/node]=nodejs
  [/usr/bin/npm]=npm
  [/usr/bin/chromium]=chromium
  [/usr/bin/chromedriver]=chromium-driver
)

missing=()
for file in "${!NEEDED[@]}"; do
  [ -e "$file" ] || missing+=("${NEEDED[$file]}")
done
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing packages: ${missing[*]} (run as root to install them)" >&2
    exit 1
  fi
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
fi

# Cloudflare's official Python and TypeScript SDKs, pinned, for tests/sdk.rs (from PyPI and npm).
./scripts/sdk.sh

cargo test --workspace --locked "$@"
