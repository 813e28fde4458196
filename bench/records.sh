#!/usr/bin/env bash
# What records cost, side by side in one run. The proxy: wrk (keep-alive, small bodies)
# against meshlb without an access log, meshlb with its JSON access log to a file, and nginx
# with its combined access log to a file (as nginx writes it by default, and with
# `buffer=64k flush=1s`), each proxying to the same loopback origin. DNS: dnsperf against
# meshlb without dnstap and with dnstap to a file. Every server is pinned to CPU 0, the load
# generator and the origin to CPU 1. Rounds rotate the order; prints one JSON line per run and
# a summary with the medians and the ratios within each round. Loopback only.
#
# Needs: nginx wrk dnsperf bind9-dnsutils (Debian), python3; run as root.
#   DURATION=10 ROUNDS=3 ./bench/records.sh
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-10}
CONNECTIONS=${CONNECTIONS:-64}
ROUNDS=${ROUNDS:-3}
W=$(mktemp -d /tmp/meshlb-records-bench.XXXXXX)
# nginx workers (nobody) reopen their logs here after USR1.
chmod 755 "$W"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for f in origin nginx nginx-buffered; do
    [ -f "$W/$f.pid" ] && kill "$(cat "$W/$f.pid")" 2>/dev/null || true
  done
  wait 2>/dev/null || true
  rm -rf "$W"
}
trap cleanup EXIT
if [ -z "${MESHLB:-}" ]; then
  cargo build --release -q --bin meshlb
  MESHLB=target/release/meshlb
fi
OPORT=18780
. bench/proxy-setup.sh
start_origin
write_meshlb_config

# meshlb twice, one mesh: without and with the access log; one prober feeds health.
agg() { # name admin gossip proxy-port extra...
  local name=$1 admin=$2 gossip=$3 port=$4; shift 4
  taskset -c 0 "$MESHLB" aggregator --config "$W/meshlb.toml" --region WEU --admin "127.0.0.1:$admin" \
    --listen "127.0.0.1:$gossip" --seed 127.0.0.1:18711 --key-file "$W/key" --proxy "127.0.0.1:$port" \
    "$@" >"$W/$name.log" 2>&1 &
  PIDS+=($!)
  echo $! > "$W/$name.mpid"
}
agg meshlb 18710 18711 18701
agg meshlb_log 18712 18713 18702 --access-log "$W/access.log"
taskset -c 1 "$MESHLB" prober --config "$W/meshlb.toml" --region WEU --dc ams --listen 127.0.0.1:18714 \
  --seed 127.0.0.1:18711 --key-file "$W/key" >"$W/prober.log" 2>&1 &
PIDS+=($!)

# nginx with the combined log, as configured by default (a write per request) and buffered.
write_nginx_proxy_config 18703
sed -i "s|access_log off;|access_log $W/nginx-access.log combined;|" "$W/nginx.conf"
taskset -c 0 nginx -c "$W/nginx.conf" -g "daemon on;"
sed "s|$W/nginx.pid|$W/nginx-buffered.pid|; s|127.0.0.1:18703|127.0.0.1:18704|; s|$W/nginx-access.log combined;|$W/nginx-buffered.log combined buffer=64k flush=1s;|; s|$W/nginx-error.log|$W/nginx-buffered-error.log|" \
  "$W/nginx.conf" > "$W/nginx-buffered.conf"
taskset -c 0 nginx -c "$W/nginx-buffered.conf" -g "daemon on;"

for port in 18701 18702 18703 18704; do
  ok=0
  for _ in $(seq 1 60); do
    code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: www.example.test' "http://127.0.0.1:$port/" || true)
    [ "$code" = 200 ] && { ok=1; break; }
    sleep 0.5
  done
  [ "$ok" = 1 ] || { echo "proxy on port $port never answered 200" >&2; for f in "$W"/*.log; do echo "== $f" >&2; tail -n 5 "$f" >&2; done; exit 1; }
done

# DNS: meshlb without and with dnstap (no monitors: both names are healthy as configured).
cat > "$W/dns.toml" <<TOML
[[pools]]
name = "primary"
origins = [{ name = "a", address = "127.0.0.11" }, { name = "b", address = "127.0.0.12" }]
[[zones]]
name = "example.test"
[[load_balancers]]
name = "www.example.test"
default_pools = ["primary"]
TOML
dns() { # name admin gossip dns-port extra...
  local name=$1 admin=$2 gossip=$3 port=$4; shift 4
  taskset -c 0 "$MESHLB" aggregator --config "$W/dns.toml" --region WEU --admin "127.0.0.1:$admin" \
    --listen "127.0.0.1:$gossip" --key-file "$W/key" --dns "127.0.0.1:$port" --dns-sockets 1 \
    "$@" >"$W/$name.log" 2>&1 &
  PIDS+=($!)
  echo $! > "$W/$name.mpid"
}
dns dns 18720 18721 15401
dns dns_tap 18722 18723 15402 --dnstap "$W/dnstap.fstrm"
for _ in $(seq 1 500); do echo "www.example.test A"; done > "$W/queries.txt"
for port in 15401 15402; do
  for _ in $(seq 1 60); do
    n=$( (dig +short +tries=1 +time=1 -p "$port" @127.0.0.1 www.example.test A 2>/dev/null || true) | grep -c "^127" || true)
    [ "$n" -eq 2 ] && break
    sleep 0.5
  done
  [ "$n" -eq 2 ] || { echo "DNS on port $port never answered" >&2; exit 1; }
done

pid_of() {
  case $1 in
    nginx) pgrep -P "$(cat "$W/nginx.pid")" | head -n 1 ;;
    nginx_buffered) pgrep -P "$(cat "$W/nginx-buffered.pid")" | head -n 1 ;;
    *) cat "$W/$1.mpid" ;;
  esac
}
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# The logs grow by hundreds of MB per run: emptied between runs (the writers reopen on
# SIGUSR1, nginx on USR1 too).
rotate() {
  rm -f "$W/access.log" "$W/dnstap.fstrm" "$W/nginx-access.log" "$W/nginx-buffered.log"
  kill -USR1 "$(cat "$W/meshlb_log.mpid")" "$(cat "$W/dns_tap.mpid")" "$(cat "$W/nginx.pid")" "$(cat "$W/nginx-buffered.pid")"
  sleep 1
}

http_run() { # name port
  local pid t0 t1 size
  pid=$(pid_of "$1")
  t0=$(ticks "$pid")
  taskset -c 1 wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" -H 'Host: www.example.test' \
    "http://127.0.0.1:$2/" > "$W/$1.wrk" 2>&1
  t1=$(ticks "$pid")
  sleep 1
  size=$(cat "$W/access.log" "$W/nginx-access.log" "$W/nginx-buffered.log" 2>/dev/null | wc -l)
  python3 - "$1" "$W/$1.wrk" "$t0" "$t1" "$(getconf CLK_TCK)" "$size" <<'PY'
import json, re, sys
name, text = sys.argv[1], open(sys.argv[2]).read()
t0, t1, hz, lines = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
rps = float(re.search(r"Requests/sec:\s*([0-9.]+)", text).group(1))
n = int(re.search(r"(\d+) requests in", text).group(1))
print(json.dumps({"kind": "proxy", "run": name, "per_s": rps,
                  "cpu_us_per_unit": round((t1 - t0) / hz / n * 1e6, 2), "records": lines}))
PY
}

dns_run() { # name port
  local pid t0 t1
  pid=$(pid_of "$1")
  t0=$(ticks "$pid")
  taskset -c 1 dnsperf -s 127.0.0.1 -p "$2" -d "$W/queries.txt" -l "$DURATION" -c 8 -q 500 > "$W/$1.out" 2>&1
  t1=$(ticks "$pid")
  python3 - "$1" "$W/$1.out" "$t0" "$t1" "$(getconf CLK_TCK)" <<'PY'
import json, re, sys
name, text = sys.argv[1], open(sys.argv[2]).read()
t0, t1, hz = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
qps = float(re.search(r"Queries per second:\s*([0-9.]+)", text).group(1))
n = float(re.search(r"Queries completed:\s*([0-9.]+)", text).group(1))
print(json.dumps({"kind": "dns", "run": name, "per_s": qps,
                  "cpu_us_per_unit": round((t1 - t0) / hz / n * 1e6, 2)}))
PY
}

: > "$W/results"
http=(meshlb meshlb_log nginx nginx_buffered)
ports=(18701 18702 18703 18704)
for r in $(seq 0 $((ROUNDS - 1))); do
  for k in 0 1 2 3; do
    i=$(( (k + r) % 4 ))
    rotate
    http_run "${http[$i]}" "${ports[$i]}" | sed "s/^{/{\"round\": $r, /" | tee -a "$W/results"
  done
  for k in 0 1; do
    i=$(( (k + r) % 2 ))
    name=$([ "$i" = 0 ] && echo dns || echo dns_tap)
    rotate
    dns_run "$name" $((15401 + i)) | sed "s/^{/{\"round\": $r, /" | tee -a "$W/results"
  done
done
python3 - "$W/results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by, rounds = {}, {}
for r in rows:
    by.setdefault(r["run"], []).append(r)
    rounds.setdefault(r["round"], {})[r["run"]] = r["per_s"]
med = lambda run, key: statistics.median(r[key] for r in by[run])
ratio = lambda a, b: statistics.median(round(x[a] / x[b], 3) for x in rounds.values())
print(json.dumps({"summary": {run: {"per_s": med(run, "per_s"), "cpu_us_per_unit": med(run, "cpu_us_per_unit")} for run in by},
                  "ratios": {"meshlb_log/meshlb": ratio("meshlb_log", "meshlb"),
                             "meshlb_log/nginx": ratio("meshlb_log", "nginx"),
                             "meshlb_log/nginx_buffered": ratio("meshlb_log", "nginx_buffered"),
                             "dns_tap/dns": ratio("dns_tap", "dns")}}))
PY
