#!/usr/bin/env bash
# The console at scale: one aggregator and three probers (WEU) on loopback over the
# 10,000-endpoint config of bench/aggregator-memory.sh (pools of 100, TCP monitors to closed
# loopback ports). Measures, in headless Chromium through ChromeDriver:
# - the first render of the overview, of a pool page and of a grid page (the page's own
#   performance marks, from navigation start; RUNS loads each, the median and the largest);
# and, with the browser closed:
# - the aggregator's CPU (user + system, all threads) over HOLD seconds idle, then with
#   CONSOLES consoles polling as the page does (GET /console/overview every second with
#   If-None-Match; without it every 30th), as milliseconds of CPU per second.
# Prints one JSON line. Loopback only.
#
# Needs: python3, curl, chromium and chromium-driver (Debian).
#   ENDPOINTS=10000 CONSOLES=20 HOLD=30 RUNS=5 ./bench/console.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ENDPOINTS=${ENDPOINTS:-10000}
CONSOLES=${CONSOLES:-20}
HOLD=${HOLD:-30}
RUNS=${RUNS:-5}
if [ -z "${MESHLB:-}" ]; then
  cargo build --release -q --bin meshlb
  MESHLB=target/release/meshlb
fi
W=$(mktemp -d /tmp/meshlb-console-bench.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$W"
}
trap cleanup EXIT
echo "the meshlb console benchmark key" > "$W/key"
python3 - "$ENDPOINTS" > "$W/meshlb.toml" <<'PY'
import sys
n = int(sys.argv[1])
print('[[monitors]]\nname = "tcp"\ntype = "tcp"\nport = 9\ninterval = 60\ntimeout = 1\nretries = 0\n')
regions = '["WNAM", "ENAM", "WEU", "EEU", "NSAM", "SSAM", "OC", "ME", "NAF", "SAF", "SAS", "SEAS", "NEAS"]'
for p in range((n + 99) // 100):
    origins = ", ".join(
        f'{{ name = "e{i}", address = "127.{p // 250 + 1}.{p % 250}.{i + 1}" }}'
        for i in range(min(100, n - p * 100)))
    print(f'[[pools]]\nname = "pool-{p}"\nmonitor = "tcp"\ncheck_regions = {regions}\norigins = [{origins}]\n')
print('[[load_balancers]]\nname = "www.example.test"\ndefault_pools = ["pool-0", "pool-1"]\nfallback_pool = "pool-2"\n')
PY
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ADMIN=127.0.0.1:$(port)
SEED=127.0.0.1:$(port)
"$MESHLB" aggregator --config "$W/meshlb.toml" --region WEU --admin "$ADMIN" \
  --listen "$SEED" --seed "$SEED" --key-file "$W/key" > "$W/aggregator.log" 2>&1 &
AGG=$!
PIDS+=("$AGG")
for dc in ams fra lhr; do
  "$MESHLB" prober --config "$W/meshlb.toml" --region WEU --dc "$dc" \
    --listen "127.0.0.1:$(port)" --seed "$SEED" --key-file "$W/key" > "$W/prober-$dc.log" 2>&1 &
  PIDS+=("$!")
done
for _ in $(seq 1 120); do
  curl -sf "http://$ADMIN/console/overview" > /dev/null && break
  sleep 0.5
done

DRIVER_PORT=$(port)
chromedriver --port="$DRIVER_PORT" > "$W/chromedriver.log" 2>&1 &
PIDS+=("$!")
RENDER=$(python3 - "$DRIVER_PORT" "$ADMIN" "$RUNS" "$W" <<'PY'
import json, sys, time, urllib.request
driver, admin, runs, work = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
base = f"http://127.0.0.1:{driver}"
def call(method, path, body=None):
    req = urllib.request.Request(base + path, method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=60))["value"]
for _ in range(100):
    try:
        urllib.request.urlopen(base + "/status", timeout=1); break
    except Exception:
        time.sleep(0.1)
caps = {"capabilities": {"alwaysMatch": {"goog:chromeOptions": {"binary": "/usr/bin/chromium", "args": [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--no-first-run", "--window-size=1280,900", f"--user-data-dir={work}/profile"]}}}}
session = call("POST", "/session", caps)["sessionId"]
def first_mark(fragment, mark):
    call("POST", f"/session/{session}/url", {"url": "about:blank"})
    call("POST", f"/session/{session}/url", {"url": f"http://{admin}/ui/{fragment}"})
    deadline = time.time() + 30
    while time.time() < deadline:
        v = call("POST", f"/session/{session}/execute/sync", {"script":
            f"const m = performance.getEntriesByName('{mark}'); return m.length ? m[0].startTime : null;", "args": []})
        if v is not None:
            return v
        time.sleep(0.05)
    raise SystemExit(f"no {mark} on {fragment} in 30 s")
out = {}
for name, fragment, mark in [("overview", "#/", "meshlb-drawn"),
                             ("pool", "#/pool/pool-0", "meshlb-pool-drawn"),
                             ("grid", "#/grid", "meshlb-grid-drawn")]:
    times = sorted(first_mark(fragment, mark) for _ in range(runs))
    out[name] = {"median_ms": round(times[len(times) // 2], 1), "max_ms": round(times[-1], 1)}
call("DELETE", f"/session/{session}")
print(json.dumps(out))
PY
)

cpu_ms() { awk '{print ($14 + $15) * 1000 / '"$(getconf CLK_TCK)"'}' "/proc/$AGG/stat"; }
idle() {
  local a b
  a=$(cpu_ms); sleep "$HOLD"; b=$(cpu_ms)
  python3 -c "print(round(($b - $a) / $HOLD, 2))"
}
IDLE=$(idle)
python3 - "$ADMIN" "$CONSOLES" "$HOLD" > "$W/polls" <<'PY' &
import sys, threading, time, urllib.request, urllib.error
admin, consoles, hold = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]) + 2
counts = {"200": 0, "304": 0}
def console():
    etag, polls, end = None, 0, time.time() + hold
    while time.time() < end:
        polls += 1
        headers = {"If-None-Match": etag} if etag and polls % 30 else {}
        req = urllib.request.Request(f"http://{admin}/console/overview", headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                r.read(); etag = r.headers.get("ETag"); counts["200"] += 1
        except urllib.error.HTTPError as e:
            counts[str(e.code)] = counts.get(str(e.code), 0) + 1
        time.sleep(1)
threads = [threading.Thread(target=console) for _ in range(consoles)]
for t in threads: t.start()
for t in threads: t.join()
print(counts["200"], counts["304"])
PY
POLLER=$!
sleep 1
BUSY=$(idle)
wait "$POLLER"
read -r OK NOT_MODIFIED < "$W/polls"
python3 - <<PY
import json
print(json.dumps({"endpoints": $ENDPOINTS, "first_render": $RENDER,
  "aggregator_cpu_ms_per_s": {"idle": $IDLE, "with_consoles": $BUSY, "consoles": $CONSOLES},
  "per_console_cpu_ms_per_s": round(($BUSY - $IDLE) / $CONSOLES, 3),
  "overview_answers": {"200": $OK, "304": $NOT_MODIFIED}}))
PY
