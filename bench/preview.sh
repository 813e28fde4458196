#!/usr/bin/env bash
# How long a monitor preview takes to come back from the mesh: one aggregator and three
# probers (WEU) on loopback, a pool of ORIGINS origins on 127.0.0.x served by one Python HTTP
# server each (404 on /missing). RUNS times: POST .../monitors/http/preview (path /missing,
# interval 2 s), then GET .../preview/{id} every 20 ms until every prober's outcome of every
# origin is in. Prints one JSON line: the median and the largest time, in ms, and the
# previewed monitor's interval (the promise is two intervals). Loopback only.
#
# Needs: python3, curl.   RUNS=10 ORIGINS=4 GOSSIP_MS=100 ./bench/preview.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-10}
ORIGINS=${ORIGINS:-4}
GOSSIP_MS=${GOSSIP_MS:-100}
if [ -z "${MESHLB:-}" ]; then
  cargo build --release -q --bin meshlb
  MESHLB=target/release/meshlb
fi
W=$(mktemp -d /tmp/meshlb-preview-bench.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$W"
}
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ORIGIN_PORT=$(port)
mkdir -p "$W/www"
echo ok > "$W/www/index.html"
for i in $(seq 2 $((ORIGINS + 1))); do
  python3 -m http.server "$ORIGIN_PORT" --bind "127.0.0.$i" --directory "$W/www" > /dev/null 2>&1 &
  PIDS+=("$!")
done
{
  echo '[[monitors]]'
  echo 'name = "http"'
  echo 'type = "http"'
  echo 'interval = 2'
  echo 'timeout = 1'
  echo
  echo '[[pools]]'
  echo 'name = "eu"'
  echo 'monitor = "http"'
  echo 'check_regions = ["WEU"]'
  printf 'origins = ['
  for i in $(seq 2 $((ORIGINS + 1))); do
    printf '{ name = "o%s", address = "127.0.0.%s", port = %s }, ' "$i" "$i" "$ORIGIN_PORT"
  done
  echo ']'
} > "$W/meshlb.toml"
echo "the meshlb preview benchmark key" > "$W/key"
echo "preview-bench-token" > "$W/token"
ADMIN=127.0.0.1:$(port)
SEED=127.0.0.1:$(port)
"$MESHLB" aggregator --config "$W/meshlb.toml" --region WEU --admin "$ADMIN" --admin-token-file "$W/token" \
  --listen "$SEED" --seed "$SEED" --key-file "$W/key" --gossip-interval-ms "$GOSSIP_MS" > "$W/aggregator.log" 2>&1 &
PIDS+=("$!")
for dc in ams fra lhr; do
  "$MESHLB" prober --config "$W/meshlb.toml" --region WEU --dc "$dc" --listen "127.0.0.1:$(port)" \
    --seed "$SEED" --key-file "$W/key" --gossip-interval-ms "$GOSSIP_MS" > "$W/prober-$dc.log" 2>&1 &
  PIDS+=("$!")
done
python3 - "$ADMIN" "$RUNS" "$ORIGINS" <<'PY'
import json, statistics, sys, time, urllib.request
admin, runs, origins = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
api = f"http://{admin}/client/v4/accounts/bench/load_balancers"
auth = {"Authorization": "Bearer preview-bench-token", "Content-Type": "application/json"}
def call(method, url, body=None):
    req = urllib.request.Request(url, method=method, headers=auth,
                                 data=None if body is None else json.dumps(body).encode())
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, None
    except OSError:
        return 0, None
# Wait for the three probers.
deadline = time.time() + 60
while time.time() < deadline:
    status, members = call("GET", f"http://{admin}/members")
    if status == 200 and sum(1 for m in members if m["role"] == "prober" and m["alive"]) == 3:
        break
    time.sleep(0.2)
monitor = {"type": "http", "path": "/missing", "expected_codes": "2xx", "interval": 2, "timeout": 1}
took = []
for _ in range(runs):
    start = time.monotonic()
    status, started = call("POST", f"{api}/monitors/http/preview", monitor)
    assert status == 200, (status, started)
    pid = started["result"]["preview_id"]
    while True:
        status, got = call("GET", f"{api}/preview/{pid}")
        pool = (got or {}).get("result", {}).get("eu", {})
        outcomes = [o for entry in pool.get("origins", []) for o in entry.values()]
        if len(outcomes) == origins and all(
                len(o.get("regions", {}).get("WEU", {}).get("probers", [])) == 3 for o in outcomes):
            break
        if time.monotonic() - start > 30:
            raise SystemExit(f"preview {pid}: not every outcome in 30 s: {got}")
        time.sleep(0.02)
    took.append((time.monotonic() - start) * 1000)
print(json.dumps({"runs": runs, "origins": origins, "probers": 3, "interval_ms": 2000,
                  "median_ms": round(statistics.median(took), 1), "max_ms": round(max(took), 1)}))
PY
