#!/usr/bin/env bash
# Instructions per proxied request, meshlb against nginx, counted by callgrind: the user-space
# work each proxy does for a request, the same from run to run, where CPU time on this shared
# machine moves by ±20 % (bench/proxy.sh measures the time). Each proxy runs alone under
# valgrind on CPU 0 with one worker, proxying a keep-alive GET from wrk (16 connections) to an
# nginx origin with two endpoints on CPU 1; the count is that worker thread's (meshlb) or
# that process's (nginx), divided by the requests wrk completed. Loopback only.
#
# Needs: valgrind nginx wrk (Debian); run as root.   SECONDS_EACH=10 ./bench/proxy-instructions.sh
# MESHLB=path measures another meshlb build; MESHLB_B=path adds a second one; KEEP_DIR=dir keeps
# the callgrind files there (callgrind_annotate them); CACHE_SIM=1 adds callgrind's cache and
# branch simulation and its estimate of cycles per request.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${SECONDS_EACH:-10}
SIM=()
[ -n "${CACHE_SIM:-}" ] && SIM=(--cache-sim=yes --branch-sim=yes)
if [ -z "${MESHLB:-}" ]; then
  cargo build --release -q --bin meshlb
  MESHLB=target/release/meshlb
fi
W=$(mktemp -d /tmp/meshlb-instructions.XXXXXX)
cleanup() {
  kill $(jobs -p) 2>/dev/null || true
  [ -f "$W/origin.pid" ] && kill "$(cat "$W/origin.pid")" 2>/dev/null || true
  wait 2>/dev/null || true
  if [ -n "${KEEP_DIR:-}" ]; then mkdir -p "$KEEP_DIR" && cp -r "$W"/. "$KEEP_DIR"/; fi
  rm -rf "$W"
}
trap cleanup EXIT
OPORT=18780
. bench/proxy-setup.sh
start_origin
write_meshlb_config

# Waits (bounded) for a 200 from the proxy on port $1.
wait_ok() {
  local code=""
  for _ in $(seq 1 120); do
    code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: www.example.test' "http://127.0.0.1:$1/" || true)
    [ "$code" = 200 ] && return 0
    sleep 0.5
  done
  echo "the proxy on port $1 never answered 200" >&2
  return 1
}

# Runs wrk against port $1; prints the number of requests it completed.
load() {
  taskset -c 1 wrk -t1 -c16 -d"${SECONDS_EACH}s" -H 'Host: www.example.test' "http://127.0.0.1:$1/" \
    | grep -oE "^ *[0-9]+ requests in" | grep -oE "[0-9]+" | head -n 1
}

# One JSON line for a proxy: $1 name, $2 requests, $3 its callgrind file (the worker's). With
# the cache simulation, also misses per request and callgrind's estimate of cycles (Ir + 10 per
# L1 miss + 100 per last-level miss + 15 per mispredicted branch).
report() {
  python3 - "$@" <<'PY'
import json, sys
name, requests, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
events = totals = None
for line in open(path):
    if line.startswith("events:"):
        events = line.split()[1:]
    elif line.startswith(("summary:", "totals:")) and totals is None:
        totals = [int(x) for x in line.split()[1:]]
per = {e: t / requests for e, t in zip(events, totals)}
row = {"proxy": name, "requests": requests, "instructions_per_request": round(per["Ir"])}
if "D1mr" in per:
    l1 = per["I1mr"] + per["D1mr"] + per["D1mw"]
    ll = per["ILmr"] + per["DLmr"] + per["DLmw"]
    mispredicted = per.get("Bcm", 0) + per.get("Bim", 0)
    row.update({"l1_misses": round(l1), "ll_misses": round(ll), "mispredicted": round(mispredicted),
                "estimated_cycles": round(per["Ir"] + 10 * l1 + 100 * ll + 15 * mispredicted)})
print(json.dumps(row))
PY
}

# meshlb: the aggregator under callgrind (one file per thread), a prober feeding it health.
measure_meshlb() {
  local name=$1 bin=$2 out="$W/$1"
  mkdir -p "$out"
  taskset -c 0 valgrind --tool=callgrind "${SIM[@]}" --separate-threads=yes --callgrind-out-file="$out/cg" \
    "$bin" aggregator --config "$W/meshlb.toml" --region WEU --admin 127.0.0.1:18790 \
    --listen 127.0.0.1:18791 --key-file "$W/key" --proxy 127.0.0.1:18701 --proxy-workers 1 \
    >"$out/agg.log" 2>&1 &
  local agg=$!
  taskset -c 1 "$bin" prober --config "$W/meshlb.toml" --region WEU --dc ams --listen 127.0.0.1:18792 \
    --seed 127.0.0.1:18791 --key-file "$W/key" >"$out/prober.log" 2>&1 &
  local prober=$!
  wait_ok 18701
  local n; n=$(load 18701)
  kill -INT "$agg" "$prober"; wait "$agg" "$prober" 2>/dev/null || true
  # The proxy worker's thread is the one that ran the accept loop.
  local f worker=""
  for f in "$out"/cg*; do
    grep -q "accept_loop" "$f" && worker=$f
  done
  report "$name" "$n" "$worker"
}

measure_nginx() {
  # In the foreground, without a master process: valgrind follows the one worker.
  write_nginx_proxy_config 18702 "master_process off; daemon off;"
  taskset -c 0 valgrind --tool=callgrind "${SIM[@]}" --callgrind-out-file="$W/nginx.cg" nginx -c "$W/nginx.conf" \
    >"$W/nginx.log" 2>&1 &
  local ng=$!
  wait_ok 18702
  local n; n=$(load 18702)
  kill -QUIT "$ng"; wait "$ng" 2>/dev/null || true
  report nginx "$n" "$W/nginx.cg"
}

measure_meshlb meshlb "$MESHLB" | tee "$W/results"
if [ -n "${MESHLB_B:-}" ]; then measure_meshlb meshlb_b "$MESHLB_B" | tee -a "$W/results"; fi
measure_nginx | tee -a "$W/results"
python3 - "$W/results" <<'PY'
import json, sys
all_rows = {r["proxy"]: r for r in map(json.loads, open(sys.argv[1]))}
rows = {p: r["instructions_per_request"] for p, r in all_rows.items()}
cycles = {p: r["estimated_cycles"] for p, r in all_rows.items() if "estimated_cycles" in r}
print(json.dumps({"meshlb/nginx": round(rows["meshlb"] / rows["nginx"], 3),
                  **({"meshlb/meshlb_b": round(rows["meshlb"] / rows["meshlb_b"], 3)} if "meshlb_b" in rows else {}),
                  **({"estimated_cycles meshlb/nginx": round(cycles["meshlb"] / cycles["nginx"], 3)} if cycles else {})}))
PY
