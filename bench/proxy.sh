#!/usr/bin/env bash
# HTTP proxy side by side, one run: wrk (keep-alive, small bodies) against meshlb, nginx and
# HAProxy, each proxying to the same loopback origin (an nginx with two endpoints answering
# a 2-byte body). Each proxy is pinned to CPU 0; wrk and the origin share CPU 1, so every
# proxy gets one core and the same load. Prints one JSON line per proxy. Loopback only.
#
# Needs: nginx haproxy wrk (Debian); run as root.   DURATION=10 CONNECTIONS=64 ROUNDS=3 ./bench/proxy.sh
# MESHLB=path measures another meshlb build; MESHLB_B=path adds a second one to the same rounds
# (side by side); PERF_MESHLB=file / PERF_NGINX=file / PERF_HAPROXY=file profile them;
# STRACE_MESHLB=file / STRACE_HAPROXY=file count system calls; KEEP_DIR=dir keeps the configs
# and logs. bench/proxy-instructions.sh counts instructions per request instead of time.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-10}
CONNECTIONS=${CONNECTIONS:-64}
W=$(mktemp -d /tmp/meshlb-proxy-bench.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -f "$W/origin.pid" ] && kill "$(cat "$W/origin.pid")" 2>/dev/null || true
  [ -f "$W/nginx.pid" ] && kill "$(cat "$W/nginx.pid")" 2>/dev/null || true
  wait 2>/dev/null || true
  [ -n "${KEEP_DIR:-}" ] && cp -r "$W" "$KEEP_DIR"; rm -rf "$W"
}
trap cleanup EXIT
[ -n "${PERF_MESHLB:-}" ] && echo "perf mode" >&2

# MESHLB=path/to/meshlb compares another build (say, of an earlier commit) instead.
if [ -z "${MESHLB:-}" ]; then
  cargo build --release -q --bin meshlb
  MESHLB=target/release/meshlb
fi
OPORT=18680

# The origin, on CPU 1, and meshlb's config.
. bench/proxy-setup.sh
start_origin
write_meshlb_config

# meshlb: an aggregator serving the proxy, one prober (on CPU 1) feeding it health.
taskset -c 0 "$MESHLB" aggregator --config "$W/meshlb.toml" --region WEU --admin 127.0.0.1:18690 \
  --listen 127.0.0.1:18691 --key-file "$W/key" --proxy 127.0.0.1:18601 >"$W/agg.log" 2>&1 &
PIDS+=($!)
# MESHLB_B=path/to/meshlb also runs another build (say, of an earlier commit) side by side in
# the same rounds, as "meshlb_b", on port 18604: a second aggregator of the same mesh.
if [ -n "${MESHLB_B:-}" ]; then
  taskset -c 0 "$MESHLB_B" aggregator --config "$W/meshlb.toml" --region WEU --admin 127.0.0.1:18695 \
    --listen 127.0.0.1:18696 --seed 127.0.0.1:18691 --key-file "$W/key" --proxy 127.0.0.1:18604 \
    >"$W/agg-b.log" 2>&1 &
  MESHLB_B_PID=$!
  PIDS+=($!)
fi
taskset -c 1 "$MESHLB" prober --config "$W/meshlb.toml" --region WEU --dc ams --listen 127.0.0.1:18692 \
  --seed 127.0.0.1:18691 --key-file "$W/key" >"$W/prober.log" 2>&1 &
PIDS+=($!)

# nginx as the proxy: one worker, keep-alive upstream.
write_nginx_proxy_config 18602
taskset -c 0 nginx -c "$W/nginx.conf" -g "daemon on;"

# HAProxy: one thread, connection reuse, health checks.
cat > "$W/haproxy.cfg" <<CONF
global
  nbthread 1
  maxconn 4000
defaults
  mode http
  timeout connect 5s
  timeout client 30s
  timeout server 30s
  option forwardfor
  http-reuse always
frontend fe
  bind 127.0.0.1:18603
  default_backend web
backend web
  balance roundrobin
  server a 127.0.0.21:$OPORT check inter 5s
  server b 127.0.0.22:$OPORT check inter 5s
CONF
taskset -c 0 haproxy -f "$W/haproxy.cfg" -db >"$W/haproxy.log" 2>&1 &
HAPROXY_PID=$!
PIDS+=($!)

# Wait (bounded) until every proxy answers 200.
for port in 18601 18602 18603 ${MESHLB_B:+18604}; do
  ok=0
  for _ in $(seq 1 60); do
    code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: www.example.test' "http://127.0.0.1:$port/" || true)
    [ "$code" = 200 ] && { ok=1; break; }
    sleep 0.5
  done
  [ "$ok" = 1 ] || { echo "proxy on port $port never answered 200" >&2; for f in "$W"/*.log; do echo "== $f" >&2; tail -n 5 "$f" >&2; done; exit 1; }
done

# CPU time a process (all threads) has used, in clock ticks: "user system".
cpu_ticks() { awk '{ print $14, $15 }' "/proc/$1/stat"; }
proxy_pid() {
  case $1 in
    meshlb) echo "${PIDS[0]}" ;;
    nginx) pgrep -P "$(cat "$W/nginx.pid")" | head -n 1 ;;
    haproxy) echo "$HAPROXY_PID" ;;
    meshlb_b) echo "$MESHLB_B_PID" ;;
  esac
}

run() {
  local name=$1 port=$2 pid before after
  pid=$(proxy_pid "$name")
  before=$(cpu_ticks "$pid")
  taskset -c 1 wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" --latency -H 'Host: www.example.test' \
    "http://127.0.0.1:$port/" > "$W/$name.wrk" 2>&1
  after=$(cpu_ticks "$pid")
  python3 - "$name" "$W/$name.wrk" "$before" "$after" "$(getconf CLK_TCK)" "$DURATION" <<'PY'
import json, re, sys
name, text = sys.argv[1], open(sys.argv[2]).read()
(u0, s0), (u1, s1) = (map(int, a.split()) for a in sys.argv[3:5])
hz, duration = int(sys.argv[5]), float(sys.argv[6])
def ms(label):
    m = re.search(r"^\s*" + label + r"\s+([0-9.]+)(us|ms|s)\s*$", text, re.M)
    if not m:
        return None
    v, unit = float(m.group(1)), m.group(2)
    return round(v / 1000 if unit == "us" else v * 1000 if unit == "s" else v, 3)
rps = re.search(r"Requests/sec:\s*([0-9.]+)", text)
total = re.search(r"(\d+) requests in", text)
errors = re.search(r"Non-2xx or 3xx responses:\s*(\d+)", text)
n = int(total.group(1)) if total else 0
cpu_s = (u1 - u0 + s1 - s0) / hz
# The proxy's own CPU cost per request, and its user and kernel parts: steadier than
# requests/s on a machine whose other core (wrk and the origin) and hypervisor come and go.
us = lambda ticks: round(ticks / hz / n * 1e6, 2) if n else None
per_request, user, kernel = us(u1 - u0 + s1 - s0), us(u1 - u0), us(s1 - s0)
print(json.dumps({"proxy": name, "requests_per_s": float(rps.group(1)) if rps else None,
                  "p50_ms": ms("50%"), "p99_ms": ms("99%"),
                  "cpu_busy": round(cpu_s / duration, 2), "cpu_us_per_request": per_request,
                  "user_us": user, "kernel_us": kernel,
                  "non_2xx": int(errors.group(1)) if errors else 0}))
PY
}
if [ -n "${STRACE_MESHLB:-}" ]; then
  timeout -s INT 4 strace -f -c -p "${PIDS[0]}" -o "$STRACE_MESHLB" >/dev/null 2>&1 &
fi
if [ -n "${STRACE_HAPROXY:-}" ]; then
  # Counted during the HAProxy run (the third in profiling order), after meshlb's and nginx's.
  (sleep $((2 * DURATION + 2)); timeout -s INT 4 strace -f -c -p "$HAPROXY_PID" -o "$STRACE_HAPROXY") >/dev/null 2>&1 &
fi
if [ -n "${PERF_HAPROXY:-}" ]; then
  # Profiled during the HAProxy run (the third in profiling order).
  (sleep $((2 * DURATION + 2)); perf record -F 999 -g -p "$HAPROXY_PID" -o "$PERF_HAPROXY" -- sleep $((DURATION - 4))) >/dev/null 2>&1 &
fi
if [ -n "${PERF_MESHLB:-}" ]; then
  # Profile meshlb under the same load: perf record of the aggregator during a wrk run.
  perf record -F 999 --call-graph "${PERF_CALL_GRAPH:-fp}" -p "${PIDS[0]}" -o "$PERF_MESHLB" -- sleep "$DURATION" >/dev/null 2>&1 &
fi
if [ -n "${PERF_MESHLB:-}${PERF_NGINX:-}${PERF_HAPROXY:-}${STRACE_MESHLB:-}${STRACE_HAPROXY:-}" ]; then
  # Profiling: one run of each, in a fixed order.
  run meshlb 18601
  wait_perf=$(jobs -p | tail -n 1); [ -n "${PERF_MESHLB:-}" ] && wait "$wait_perf" 2>/dev/null || true
  if [ -n "${PERF_NGINX:-}" ]; then
    perf record -F 999 -g -p "$(pgrep -f -n "nginx: worker process" )" -o "$PERF_NGINX" -- sleep "$DURATION" >/dev/null 2>&1 &
  fi
  run nginx 18602
  run haproxy 18603
  exit 0
fi

# ROUNDS rounds, each running the three proxies in a rotated order (so none always goes
# first, on a machine whose speed drifts), then the median of each and the ratios within
# each round.
ROUNDS=${ROUNDS:-3}
names=(meshlb nginx haproxy)
ports=(18601 18602 18603)
if [ -n "${MESHLB_B:-}" ]; then names+=(meshlb_b); ports+=(18604); fi
n=${#names[@]}
: > "$W/results"
for r in $(seq 0 $((ROUNDS - 1))); do
  for k in $(seq 0 $((n - 1))); do
    i=$(( (k + r) % n ))
    run "${names[$i]}" "${ports[$i]}" | sed "s/^{/{\"round\": $r, /" | tee -a "$W/results"
  done
done
python3 - "$W/results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {}
for r in rows:
    by.setdefault(r["proxy"], []).append(r)
rounds = {}
for r in rows:
    rounds.setdefault(r["round"], {})[r["proxy"]] = r["requests_per_s"]
def med(proxy, key):
    v = [r[key] for r in by[proxy] if r[key] is not None]
    return statistics.median(v) if v else None
summary = {p: {"requests_per_s": med(p, "requests_per_s"), "p50_ms": med(p, "p50_ms"),
               "p99_ms": med(p, "p99_ms"), "cpu_us_per_request": med(p, "cpu_us_per_request"),
               "user_us": med(p, "user_us"), "kernel_us": med(p, "kernel_us")}
           for p in by}
ratios = {f"meshlb/{p}": statistics.median(
              round(x["meshlb"] / x[p], 3) for x in rounds.values() if x.get(p))
          for p in ("nginx", "haproxy", "meshlb_b") if any(p in x for x in rounds.values())}
print(json.dumps({"summary": summary, "median_ratio_per_round": ratios}))
PY
