#!/usr/bin/env bash
# The aggregator live at scale: one aggregator and 39 probers (13 regions x 3 datacenters) on
# loopback, a config of ENDPOINTS endpoints (pools of 100, TCP monitors every INTERVAL s to
# closed loopback ports, so every probe is a quick refused connect), every prober probing every
# endpoint. Once the aggregator counts every vote (39 x ENDPOINTS), it reads for HOLD seconds:
# the aggregator's RSS (VmRSS, and its peak VmHWM), the tally's duration (the mean over the
# window from meshlb_tally_duration_seconds, and the largest bucket bound reached), the
# aggregator's CPU per tally (an upper bound: all its threads), the probers' RSS (mean, and per endpoint), and gossip state. Prints one JSON line. Loopback only.
#
# Needs: python3, curl.   ENDPOINTS=10000 INTERVAL=60 HOLD=60 ./bench/aggregator-memory.sh
#   PERF_AGG=/tmp/agg.perf also profiles the aggregator during the window (perf record -g).
set -euo pipefail
cd "$(dirname "$0")/.."
ENDPOINTS=${ENDPOINTS:-10000}
INTERVAL=${INTERVAL:-60}
HOLD=${HOLD:-60}
GOSSIP_MS=${GOSSIP_MS:-200}
if [ -z "${MESHLB:-}" ]; then
  cargo build --release -q --bin meshlb
  MESHLB=target/release/meshlb
fi
W=$(mktemp -d /tmp/meshlb-agg-memory.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$W"
}
trap cleanup EXIT
echo "the meshlb aggregator memory benchmark key" > "$W/key"
python3 - "$ENDPOINTS" "$INTERVAL" > "$W/meshlb.toml" <<'PY'
import sys
n, interval = int(sys.argv[1]), int(sys.argv[2])
print(f'[[monitors]]\nname = "tcp"\ntype = "tcp"\nport = 9\ninterval = {interval}\ntimeout = 1\nretries = 0\n')
regions = '["WNAM", "ENAM", "WEU", "EEU", "NSAM", "SSAM", "OC", "ME", "NAF", "SAF", "SAS", "SEAS", "NEAS"]'
for p in range((n + 99) // 100):
    origins = ", ".join(
        f'{{ name = "e{i}", address = "127.{p // 250 + 1}.{p % 250}.{i + 1}" }}'
        for i in range(min(100, n - p * 100)))
    print(f'[[pools]]\nname = "pool-{p}"\nmonitor = "tcp"\ncheck_regions = {regions}\norigins = [{origins}]\n')
print('[[load_balancers]]\nname = "www.example.test"\ndefault_pools = ["pool-0"]\n')
PY
ADMIN=127.0.0.1:18990
SEED=127.0.0.1:18900
"$MESHLB" aggregator --config "$W/meshlb.toml" --region WEU --admin "$ADMIN" --listen "$SEED" \
  --seed "$SEED" --key-file "$W/key" --gossip-interval-ms "$GOSSIP_MS" >"$W/agg.log" 2>&1 &
AGG=$!
PIDS+=($AGG)
port=18901
PROBERS=()
while read -r region dcs; do
  for dc in $dcs; do
    port=$((port + 1))
    "$MESHLB" prober --config "$W/meshlb.toml" --region "$region" --dc "$dc" \
      --listen 127.0.0.1:$port --seed "$SEED" --key-file "$W/key" \
      --gossip-interval-ms "$GOSSIP_MS" >"$W/prober-$port.log" 2>&1 &
    PIDS+=($!)
    PROBERS+=($!)
  done
done < <("$MESHLB" regions | awk '{ printf "%s", $1; for (i = 2; i <= NF; i++) if ($i ~ /^[a-z][a-z][a-z]$/) printf " %s", $i; print "" }')
python3 - "$ADMIN" "$ENDPOINTS" "$HOLD" "$AGG" "${PROBERS[*]}" <<'PY'
import json, os, re, sys, time, urllib.request
admin, endpoints, hold, agg, probers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5].split()
def get(path):
    try:
        with urllib.request.urlopen(f"http://{admin}{path}", timeout=30) as r:
            return r.read().decode()
    except OSError:
        return ""
def rss_kib(pid, key="VmRSS"):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0
def tally():
    text = get("/metrics")
    s = re.search(r"^meshlb_tally_duration_seconds_sum(?:\{[^}]*\})? ([0-9.e+-]+)$", text, re.M)
    c = re.search(r"^meshlb_tally_duration_seconds_count(?:\{[^}]*\})? ([0-9.e+-]+)$", text, re.M)
    buckets = [(float(le), float(v)) for le, v in re.findall(r'^meshlb_tally_duration_seconds_bucket\{[^}]*le="([0-9.e+-]+)"[^}]*\} ([0-9.e+-]+)$', text, re.M)]
    votes = re.search(r"^meshlb_tally_votes(?:\{[^}]*\})? ([0-9.e+-]+)$", text, re.M)
    return (float(s.group(1)) if s else 0, float(c.group(1)) if c else 0, sorted(buckets), float(votes.group(1)) if votes else 0)
want = 39 * endpoints
start = time.time()
while time.time() - start < 900:
    _, _, _, votes = tally()
    if votes >= want:
        break
    time.sleep(2)
converged = time.time() - start
def cpu_s(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
s0, c0, b0, votes = tally()
cpu0, wall0 = cpu_s(agg), time.time()
perf = None
if os.environ.get("PERF_AGG"):
    import subprocess
    perf = subprocess.Popen(["perf", "record", "-F", "499", "-g", "-p", agg, "-o", os.environ["PERF_AGG"],
                             "--", "sleep", str(hold)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(hold)
if perf:
    perf.wait()
s1, c1, b1, votes = tally()
cpu1, wall1 = cpu_s(agg), time.time()
prev = dict(b0)
grown = [le for le, v in b1 if v > prev.get(le, 0)]
count = c1 - c0
rss = [rss_kib(p) for p in probers]
print(json.dumps({
    "endpoints": endpoints, "probers": len(probers), "votes": int(votes), "votes_expected": want,
    "all_votes_in_s": round(converged, 1),
    "aggregator_rss_mib": round(rss_kib(agg) / 1024, 1),
    "aggregator_peak_rss_mib": round(rss_kib(agg, "VmHWM") / 1024, 1),
    "tallies": int(count),
    "tally_mean_ms": round((s1 - s0) / count * 1000, 2) if count else None,
    # All of the aggregator's CPU in the window (tally, gossip, admin) per tally: an upper
    # bound of a tally's own CPU, apart from the waits for a core the wall time includes.
    "aggregator_cpu_busy": round((cpu1 - cpu0) / (wall1 - wall0), 2),
    "aggregator_cpu_ms_per_tally": round((cpu1 - cpu0) / count * 1000, 1) if count else None,
    "tally_max_bucket_ms": round(min((le for le, v in b1 if v >= c1), default=float("nan")) * 1000, 1) if c1 else None,
    "prober_rss_mib_mean": round(sum(rss) / len(rss) / 1024, 1),
    "prober_bytes_per_endpoint": round(sum(rss) / len(rss) * 1024 / endpoints),
}))
PY
