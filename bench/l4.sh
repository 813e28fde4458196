#!/usr/bin/env bash
# Layer 4 side by side, one run: meshlb (a TCP and a UDP load balancer), HAProxy (mode tcp) and
# nginx (stream), each pinned to CPU 0, each with the same origins on CPU 1 with the load
# generators. Rows, one JSON line per proxy and row:
#   conn      new connections per second: wrk with `Connection: close` (a short-lived exchange
#             per connection) to an nginx origin; p99 from wrk's latency distribution
#   flow1     throughput of one long flow: iperf3 -P 1 to an iperf3 server
#   flow64    throughput of 64 long flows: iperf3 -P 64
#   udp       datagrams per second: dnsperf to gdnsd (meshlb and nginx only; HAProxy has no UDP)
# Each line has the proxy's CPU time per unit of work (per connection, per GB, per datagram):
# on 2 cores the load generator, not the proxy, often sets the rate.
#
# Needs: nginx libnginx-mod-stream haproxy wrk iperf3 dnsperf gdnsd (Debian); run as root.
#   DURATION=10 ROUNDS=3 ./bench/l4.sh   MESHLB=path measures another build; KEEP_DIR=dir keeps logs;
#   ROWS="conn udp" runs only those rows.
# Loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-10}
W=$(mktemp -d /tmp/meshlb-l4-bench.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for f in origin nginx; do [ -f "$W/$f.pid" ] && kill "$(cat "$W/$f.pid")" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -n "${KEEP_DIR:-}" ] && cp -r "$W" "$KEEP_DIR"; rm -rf "$W"
}
trap cleanup EXIT
if [ -z "${MESHLB:-}" ]; then
  cargo build --release -q --bin meshlb
  MESHLB=target/release/meshlb
fi

# Origins on CPU 1: nginx (HTTP, 2-byte answers), iperf3, gdnsd.
cat > "$W/origin.conf" <<CONF
worker_processes 1;
pid $W/origin.pid;
error_log $W/origin-error.log;
events { worker_connections 8192; }
http { access_log off; server { listen 127.0.0.21:18780; location / { return 200 "ok"; } } }
CONF
taskset -c 1 nginx -c "$W/origin.conf" -g "daemon on;"
taskset -c 1 iperf3 -s -B 127.0.0.21 -p 18781 >"$W/iperf3-server.log" 2>&1 &
PIDS+=($!)
mkdir -p "$W/gdnsd/zones" "$W/gdnsd/run" "$W/gdnsd/state"
cat > "$W/gdnsd/config" <<CONF
options => {
  listen => [ 127.0.0.21:18782 ]
  run_dir => $W/gdnsd/run
  state_dir => $W/gdnsd/state
  udp_threads => 1
  tcp_threads => 1
}
CONF
cat > "$W/gdnsd/zones/l4.test" <<ZONE
@ 3600 SOA ns1 hostmaster 1 3600 600 604800 60
@ 3600 NS ns1
ns1 3600 A 127.0.0.21
www 30 A 192.0.2.1
ZONE
taskset -c 1 gdnsd -c "$W/gdnsd" start >"$W/gdnsd.log" 2>&1 &
PIDS+=($!)

# The proxies on CPU 0. Ports: 1879x conn, 1880x iperf3, 1881x UDP (x: 1 meshlb, 2 nginx, 3 HAProxy).
echo "the meshlb l4 benchmark cluster key" > "$W/key"
cat > "$W/meshlb.toml" <<TOML
[[pools]]
name = "web"
origins = [{ name = "nginx", address = "127.0.0.21" }]
[[pools]]
name = "iperf"
origins = [{ name = "iperf3", address = "127.0.0.21" }]
[[pools]]
name = "dns"
origins = [{ name = "gdnsd", address = "127.0.0.21" }]
[[load_balancers]]
name = "conn.l4.test"
protocol = "tcp"
listen = [18791]
origin_port = 18780
default_pools = ["web"]
[[load_balancers]]
name = "flow.l4.test"
protocol = "tcp"
listen = [18801]
origin_port = 18781
default_pools = ["iperf"]
[[load_balancers]]
name = "udp.l4.test"
protocol = "udp"
listen = [18811]
origin_port = 18782
default_pools = ["dns"]
TOML
taskset -c 0 "$MESHLB" aggregator --config "$W/meshlb.toml" --region WEU --admin 127.0.0.1:18790 \
  --listen 127.0.0.1:18799 --key-file "$W/key" --l4 127.0.0.1 >"$W/agg.log" 2>&1 &
MESHLB_PID=$!
PIDS+=($!)
cat > "$W/nginx.conf" <<CONF
load_module /usr/lib/nginx/modules/ngx_stream_module.so;
worker_processes 1;
pid $W/nginx.pid;
error_log $W/nginx-error.log;
events { worker_connections 8192; }
stream {
  server { listen 127.0.0.1:18792; proxy_pass 127.0.0.21:18780; }
  server { listen 127.0.0.1:18802; proxy_pass 127.0.0.21:18781; }
  # Sessions per client address and port, ended after 30 s idle: what meshlb's flows are.
  server { listen 127.0.0.1:18812 udp; proxy_pass 127.0.0.21:18782; proxy_timeout 30s; }
}
CONF
taskset -c 0 nginx -c "$W/nginx.conf" -g "daemon on;"
cat > "$W/haproxy.cfg" <<CONF
global
  nbthread 1
  maxconn 8000
defaults
  mode tcp
  timeout connect 5s
  timeout client 60s
  timeout server 60s
listen conn
  bind 127.0.0.1:18793
  server o 127.0.0.21:18780
listen flow
  bind 127.0.0.1:18803
  server o 127.0.0.21:18781
CONF
taskset -c 0 haproxy -f "$W/haproxy.cfg" -db >"$W/haproxy.log" 2>&1 &
HAPROXY_PID=$!
PIDS+=($!)

for port in 18791 18792 18793; do
  ok=0
  for _ in $(seq 1 60); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/" || true)" = 200 ] && { ok=1; break; }
    sleep 0.5
  done
  [ "$ok" = 1 ] || { echo "the proxy on port $port never answered" >&2; tail -n 5 "$W"/*.log >&2; exit 1; }
done

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
pid_of() {
  case $1 in
    meshlb) echo "$MESHLB_PID" ;;
    nginx) pgrep -P "$(cat "$W/nginx.pid")" | head -n 1 ;;
    haproxy) echo "$HAPROXY_PID" ;;
  esac
}
HZ=$(getconf CLK_TCK)

# One row for one proxy: $1 name, $2 row, $3 port.
row() {
  local name=$1 kind=$2 port=$3 pid before after out
  pid=$(pid_of "$name")
  before=$(cpu_ticks "$pid")
  out="$W/$name.$kind"
  case $kind in
    conn) taskset -c 1 wrk -t1 -c32 -d"${DURATION}s" --latency -H 'Connection: close' \
            "http://127.0.0.1:$port/" >"$out" 2>&1 ;;
    flow1) taskset -c 1 iperf3 -c 127.0.0.1 -p "$port" -t "$DURATION" -P 1 -J >"$out" 2>&1 ;;
    flow64) taskset -c 1 iperf3 -c 127.0.0.1 -p "$port" -t "$DURATION" -P 64 -J >"$out" 2>&1 ;;
    udp) printf 'www.l4.test A\n' > "$W/queries"
         taskset -c 1 dnsperf -s 127.0.0.1 -p "$port" -d "$W/queries" -l "$DURATION" -c 4 -q 200 \
           >"$out" 2>&1 ;;
  esac
  after=$(cpu_ticks "$pid")
  python3 - "$name" "$kind" "$out" "$((after - before))" "$HZ" "$DURATION" <<'PY'
import json, re, sys
name, kind, path, ticks, hz, duration = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
text = open(path).read()
cpu = ticks / hz
row = {"proxy": name, "row": kind, "cpu_busy": round(cpu / duration, 2)}
if kind == "conn":
    rate = float(re.search(r"Requests/sec:\s*([0-9.]+)", text).group(1))
    m = re.search(r"^\s*99%\s+([0-9.]+)(us|ms|s)\s*$", text, re.M)
    v, unit = float(m.group(1)), m.group(2)
    p99 = v / 1000 if unit == "us" else v * 1000 if unit == "s" else v
    errors = re.search(r"Socket errors: (.*)", text)
    row.update(connections_per_s=rate, p99_ms=round(p99, 3),
               cpu_us_per_connection=round(cpu / (rate * duration) * 1e6, 2) if rate else None,
               socket_errors=errors.group(1) if errors else None)
elif kind.startswith("flow"):
    data = json.loads(text)
    end = data["end"]["sum_received"]
    gbit = end["bits_per_second"] / 1e9
    gb = end["bytes"] / 1e9
    row.update(gbit_per_s=round(gbit, 2), cpu_s_per_gb=round(cpu / gb, 3) if gb else None)
else:
    qps = re.search(r"Queries per second:\s*([0-9.]+)", text)
    lost = re.search(r"Queries lost:\s*(\d+)", text)
    qps = float(qps.group(1)) if qps else 0.0
    row.update(datagrams_per_s=qps, lost=int(lost.group(1)) if lost else None,
               cpu_us_per_datagram=round(cpu / (qps * duration) * 1e6, 2) if qps else None)
print(json.dumps(row))
PY
}

# ROUNDS rounds, the proxies taking turns within each, so drift on the machine hits all alike;
# then the median of each (proxy, row) and meshlb's ratio to each peer.
ROWS=${ROWS:-conn flow1 flow64 udp}
for round in $(seq 1 "${ROUNDS:-3}"); do
  for kind in $ROWS; do
    [ "$kind" = udp ] && continue
    case $kind in conn) base=1879 ;; *) base=1880 ;; esac
    row meshlb "$kind" "${base}1"
    row nginx "$kind" "${base}2"
    row haproxy "$kind" "${base}3"
  done
  if [[ " $ROWS " == *" udp "* ]]; then
    row meshlb udp 18811
    row nginx udp 18812
  fi
done | tee "$W/rows.jsonl"
python3 - "$W/rows.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
keys = {"conn": ["connections_per_s", "p99_ms", "cpu_us_per_connection"],
        "flow1": ["gbit_per_s", "cpu_s_per_gb"], "flow64": ["gbit_per_s", "cpu_s_per_gb"],
        "udp": ["datagrams_per_s", "cpu_us_per_datagram"]}
med = {}
for r in rows:
    for k in keys[r["row"]]:
        med.setdefault((r["proxy"], r["row"], k), []).append(r[k])
for (proxy, row, k), v in sorted(med.items()):
    med[(proxy, row, k)] = statistics.median(x for x in v if x is not None)
for row, ks in keys.items():
    out = {"summary": row}
    for proxy in ["meshlb", "nginx", "haproxy"]:
        for k in ks:
            if (proxy, row, k) in med:
                out[f"{proxy}_{k}"] = round(med[(proxy, row, k)], 3)
    for peer in ["nginx", "haproxy"]:
        rate = ks[0]
        if (peer, row, rate) in med and med[(peer, row, rate)]:
            out[f"meshlb_vs_{peer}"] = round(med[("meshlb", row, rate)] / med[(peer, row, rate)], 2)
    print(json.dumps(out))
PY
