#!/usr/bin/env bash
# Takes the screenshots of the console in docs/ from a running demo mesh: starts
# `meshlb demo --no-view` (40 nodes on loopback, an origin killed for a failover), waits until
# every prober is in and the failover happened, then renders the overview and a pool page in
# headless Chromium at 1280 px wide, light scheme.
#
# Needs: chromium (Debian).   ./scripts/console-screenshot.sh [OUT_DIR, default docs/images]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-docs/images}
mkdir -p "$OUT"
if [ -z "${MESHLB:-}" ]; then
  cargo build -q --bin meshlb
  MESHLB=target/debug/meshlb
fi
W=$(mktemp -d /tmp/meshlb-console-shot.XXXXXX)
ADMIN=127.0.0.1:17070
# stdin stays open (the demo ends when it closes) until this script ends.
sleep 600 | "$MESHLB" demo --no-view --admin "$ADMIN" --dns 127.0.0.1:15353 --proxy 127.0.0.1:18080 \
  --gossip-port 27946 --kill-origin us-1 > "$W/demo.log" 2>&1 &
DEMO=$!
trap 'kill $DEMO 2>/dev/null; pkill -P $$ sleep 2>/dev/null; wait 2>/dev/null; rm -rf "$W"' EXIT
for _ in $(seq 1 120); do
  grep -q "us-1" "$W/demo.log" 2>/dev/null && curl -sf "http://$ADMIN/console/overview" > /dev/null && break
  sleep 1
done
sleep 3
shot() {
  chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
    --disable-component-update --disable-sync --no-first-run --hide-scrollbars \
    --user-data-dir="$W/profile" --window-size=1280,"$2" --virtual-time-budget=4000 \
    --screenshot="$OUT/$1" "http://$ADMIN/ui/$3" 2> "$W/chromium.log"
  echo "$OUT/$1"
}
shot console-overview.png 1100 "#/"
shot console-pool.png 1000 "#/pool/us"
