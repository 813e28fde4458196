#!/usr/bin/env bash
# DNS side by side, one run: dnsperf at full load against meshlb, gdnsd (multifo + weighted
# plugins with http_status health checks) and PowerDNS Authoritative (bind backend, LUA
# records ifportup/pickwrandom), all serving the same two names of example.test from the same
# health-checked loopback origins. Each server is pinned to CPU 0 and dnsperf to CPU 1, so
# every server gets one core. Prints one JSON line per server. Loopback only.
#
# Needs: dnsperf gdnsd pdns-server pdns-backend-bind bind9-dnsutils (Debian), python3; run as root.
#   DURATION=10 ./bench/dns.sh
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-10}
CLIENTS=${CLIENTS:-8}
OUTSTANDING=${OUTSTANDING:-500}
LATENCY_QPS=${LATENCY_QPS:-10000}
W=$(mktemp -d /tmp/meshlb-dns-bench.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$W"; }
trap cleanup EXIT

# MESHLB=path runs that binary instead of building one (to compare two builds).
if [ -z "${MESHLB:-}" ]; then
  cargo build --release -q --bin meshlb
  MESHLB=target/release/meshlb
fi
OPORT=18480
# Health-checked origins: one tiny HTTP server per address.
for ip in 127.0.0.11 127.0.0.12 127.0.0.41 127.0.0.42; do
  python3 -m http.server "$OPORT" --bind "$ip" --directory "$W" >/dev/null 2>&1 &
  PIDS+=($!)
done

# The queries: half failover pool (two A records), half weighted (one of two).
for i in $(seq 1 500); do echo "www.example.test A"; echo "weighted.example.test A"; done > "$W/queries.txt"

# --- meshlb: an aggregator serving DNS and one prober feeding it real health.
echo "the meshlb dns benchmark cluster key" > "$W/key"
cat > "$W/meshlb.toml" <<TOML
[[monitors]]
name = "http"
port = $OPORT
interval = 1
timeout = 1
[[pools]]
name = "primary"
monitor = "http"
check_regions = ["WEU"]
origins = [{ name = "a", address = "127.0.0.11" }, { name = "b", address = "127.0.0.12" }]
[[pools]]
name = "weighted"
monitor = "http"
check_regions = ["WEU"]
origins = [{ name = "a", address = "127.0.0.41", weight = 0.25 }, { name = "b", address = "127.0.0.42", weight = 0.75 }]
[[zones]]
name = "example.test"
[[load_balancers]]
name = "www.example.test"
default_pools = ["primary"]
[[load_balancers]]
name = "weighted.example.test"
default_pools = ["weighted"]
TOML
taskset -c 0 "$MESHLB" aggregator --config "$W/meshlb.toml" --region WEU --admin 127.0.0.1:18490 \
  --listen 127.0.0.1:18491 --key-file "$W/key" --dns 127.0.0.1:15301 --dns-sockets 1 >"$W/agg.log" 2>&1 &
PIDS+=($!)
taskset -c 0 "$MESHLB" prober --config "$W/meshlb.toml" --region WEU --dc ams --listen 127.0.0.1:18492 \
  --seed 127.0.0.1:18491 --key-file "$W/key" >"$W/prober.log" 2>&1 &
PIDS+=($!)

# --- gdnsd
mkdir -p "$W/gdnsd/zones" "$W/gdnsd/run" "$W/gdnsd/state"
cat > "$W/gdnsd/config" <<CONF
options => {
  listen => [ 127.0.0.1:15302 ]
  run_dir => $W/gdnsd/run
  state_dir => $W/gdnsd/state
  udp_threads => 1
  tcp_threads => 1
}
service_types => {
  web => { plugin => http_status, port => $OPORT, url_path => /, interval => 2, timeout => 1, up_thresh => 1, ok_thresh => 1, down_thresh => 2 }
}
plugins => {
  multifo => { service_types => web, www => { a => 127.0.0.11, b => 127.0.0.12 } }
  weighted => { service_types => web, multi => false, w => { a => [ 127.0.0.41, 25 ], b => [ 127.0.0.42, 75 ] } }
}
CONF
cat > "$W/gdnsd/zones/example.test" <<ZONE
@ 3600 SOA ns1 hostmaster 1 3600 600 604800 60
@ 3600 NS ns1
ns1 3600 A 127.0.0.1
www 30 DYNA multifo!www
weighted 30 DYNA weighted!w
ZONE
taskset -c 0 gdnsd -c "$W/gdnsd" start >"$W/gdnsd.log" 2>&1 &
PIDS+=($!)

# --- PowerDNS Authoritative with LUA records
mkdir -p "$W/pdns"
cat > "$W/pdns/example.test.zone" <<ZONE
\$ORIGIN example.test.
@ 3600 IN SOA ns1.example.test. hostmaster.example.test. 1 3600 600 604800 60
@ 3600 IN NS ns1.example.test.
www 30 IN LUA A "ifportup($OPORT, {'127.0.0.11', '127.0.0.12'}, {selector='all'})"
weighted 30 IN LUA A "pickwrandom({{25, '127.0.0.41'}, {75, '127.0.0.42'}})"
ZONE
echo "zone \"example.test\" { type master; file \"$W/pdns/example.test.zone\"; };" > "$W/pdns/named.conf"
cat > "$W/pdns/pdns.conf" <<CONF
launch=bind
bind-config=$W/pdns/named.conf
enable-lua-records=yes
local-address=127.0.0.1
local-port=15303
socket-dir=$W/pdns
daemon=no
guardian=no
disable-syslog=yes
receiver-threads=1
distributor-threads=1
CONF
taskset -c 0 pdns_server --config-dir="$W/pdns" >"$W/pdns.log" 2>&1 &
PIDS+=($!)

# Wait (bounded) until every server answers www with both addresses.
for port in 15301 15302 15303; do
  for _ in $(seq 1 60); do
    n=$( (dig +short +tries=1 +time=1 -p "$port" @127.0.0.1 www.example.test A 2>/dev/null || true) | grep -c "^127" || true)
    [ "$n" -eq 2 ] && break
    sleep 0.5
  done
  [ "$n" -eq 2 ] || { echo "server on port $port never answered both addresses" >&2; dig -p "$port" @127.0.0.1 www.example.test A >&2 || true; for f in "$W"/*.log; do echo "== $f" >&2; tail -n 5 "$f" >&2; done; exit 1; }
done

run() {
  local name=$1 port=$2 pid
  pid=$(pgrep -f -n "$3")
  local t0 u0
  t0=$(awk '{print $14+$15}' "/proc/$pid/stat")
  u0=$(awk '{print $14}' "/proc/$pid/stat")
  taskset -c 1 dnsperf -s 127.0.0.1 -p "$port" -d "$W/queries.txt" -l "$DURATION" -c "$CLIENTS" \
    -q "$OUTSTANDING" > "$W/$name.out" 2>&1
  local t1 u1 hz
  t1=$(awk '{print $14+$15}' "/proc/$pid/stat")
  u1=$(awk '{print $14}' "/proc/$pid/stat")
  hz=$(getconf CLK_TCK)
  # Latency percentiles at a fixed, moderate rate (every query's latency, from -v).
  taskset -c 1 dnsperf -s 127.0.0.1 -p "$port" -d "$W/queries.txt" -l 3 -Q "$LATENCY_QPS" -v \
    > "$W/$name.lat" 2>&1 || true
  python3 - "$name" "$W/$name.out" "$t0" "$t1" "$hz" "$W/$name.lat" "$LATENCY_QPS" "$((u1 - u0))" <<'PY'
import json, re, sys
name, path, t0, t1, hz = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
user_s = int(sys.argv[8]) / hz
text = open(path).read()
lat = sorted(float(x) for x in re.findall(r"^> \S+ .* ([0-9]+\.[0-9]+)\s*$", open(sys.argv[6]).read(), re.M))
def num(label):
    m = re.search(label + r"\s*([0-9.]+)", text)
    return float(m.group(1)) if m else None
qps = num(r"Queries per second:")
completed = num(r"Queries completed:")
lost = num(r"Queries lost:")
def pct(p):
    return round(lat[min(len(lat) - 1, int(p * len(lat)))] * 1000, 3) if lat else None
cpu_s = (t1 - t0) / hz
print(json.dumps({"server": name, "qps": qps, "completed": completed, "lost": lost,
                  "avg_latency_ms": round(num(r"Average Latency \(s\):") * 1000, 3) if num(r"Average Latency \(s\):") else None,
                  "latency_at_qps": int(sys.argv[7]), "p50_ms": pct(0.5), "p99_ms": pct(0.99), "server_cpu_s": cpu_s,
                  "us_cpu_per_query": round(cpu_s * 1e6 / completed, 2) if completed else None,
                  "us_user_per_query": round(user_s * 1e6 / completed, 2) if completed else None}))
PY
}
run meshlb 15301 "aggregator --config $W"
run gdnsd 15302 "gdnsd -c $W/gdnsd"
run powerdns 15303 "pdns_server --config-dir=$W/pdns"
