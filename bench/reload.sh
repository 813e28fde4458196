#!/usr/bin/env bash
# Live configuration under load, one run: proxy (wrk, keep-alive) and DNS (dnsperf) throughput
# of one aggregator in steady state and while its config is reloaded once a second (SIGHUP,
# alternating two files: a changed weight, a changed TTL), rounds interleaved so both see the
# same machine; then the time from SIGHUP to the new config's answer, and the round trip of
# `POST /-/reload`. The aggregator is pinned to CPU 0, the load generators, the origin and the
# prober to CPU 1. Prints one JSON line per figure. Loopback only.
#
# Needs: nginx wrk dnsperf (Debian), python3; run as root.
#   DURATION=5 ROUNDS=6 RELOADS=20 ./bench/reload.sh
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-6}
RELOADS=${RELOADS:-20}
CONNECTIONS=${CONNECTIONS:-64}
W=$(mktemp -d /tmp/meshlb-reload-bench.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -f "$W/origin.pid" ] && kill "$(cat "$W/origin.pid")" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$W"
}
trap cleanup EXIT

cargo build --release -q --bin meshlb
MESHLB=target/release/meshlb
OPORT=18780
ADMIN=127.0.0.1:18790
DNS_PORT=18753
PROXY_PORT=18701
. bench/proxy-setup.sh
start_origin
echo "the meshlb reload benchmark cluster key" > "$W/key"
echo "the reload benchmark token" > "$W/token"

# The two configs: the weight of b and the TTL of the DNS name differ.
config() {
  cat <<TOML
[[monitors]]
name = "http"
port = $OPORT
interval = 5
timeout = 2
[[pools]]
name = "web"
monitor = "http"
check_regions = ["WEU"]
origins = [{ name = "a", address = "127.0.0.21", port = $OPORT }, { name = "b", address = "127.0.0.22", port = $OPORT, weight = $1 }]
[[zones]]
name = "example.test"
[[load_balancers]]
name = "www.example.test"
proxied = true
default_pools = ["web"]
[[load_balancers]]
name = "dns.example.test"
default_pools = ["web"]
ttl = $2
TOML
}
config 1.0 30 > "$W/a.toml"
config 0.5 31 > "$W/b.toml"
cp "$W/a.toml" "$W/meshlb.toml"

taskset -c 0 "$MESHLB" aggregator --config "$W/meshlb.toml" --region WEU --admin "$ADMIN" \
  --admin-token-file "$W/token" --listen 127.0.0.1:18791 --key-file "$W/key" \
  --proxy 127.0.0.1:$PROXY_PORT --proxy-workers 1 --dns 127.0.0.1:$DNS_PORT --dns-sockets 1 \
  >"$W/agg.log" 2>&1 &
AGG=$!
PIDS+=($AGG)
taskset -c 1 "$MESHLB" prober --config "$W/meshlb.toml" --region WEU --dc ams --listen 127.0.0.1:18792 \
  --seed 127.0.0.1:18791 --key-file "$W/key" >"$W/prober.log" 2>&1 &
PIDS+=($!)

ok=0
for _ in $(seq 1 60); do
  code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: www.example.test' "http://127.0.0.1:$PROXY_PORT/" || true)
  n=$( (dig +short +tries=1 +time=1 -p $DNS_PORT @127.0.0.1 dns.example.test A 2>/dev/null || true) | grep -c "^127" || true)
  [ "$code" = 200 ] && [ "$n" -ge 1 ] && { ok=1; break; }
  sleep 0.5
done
[ "$ok" = 1 ] || { echo "the aggregator never served" >&2; tail -n 20 "$W"/*.log >&2; exit 1; }
for i in $(seq 1 500); do echo "dns.example.test A"; done > "$W/queries.txt"

# Swaps the config and sends SIGHUP once a second until killed.
reloader() {
  local i=0
  while true; do
    sleep 1
    i=$((i + 1))
    if [ $((i % 2)) = 1 ]; then cp "$W/b.toml" "$W/next.toml"; else cp "$W/a.toml" "$W/next.toml"; fi
    mv "$W/next.toml" "$W/meshlb.toml"
    kill -HUP "$AGG"
  done
}

ticks() { awk '{ print $14 + $15 }' "/proc/$AGG/stat"; }
reloads_done() { curl -s "http://$ADMIN/metrics" | awk '/^meshlb_config_reloads_total\{.*result="success"/ { s += $2 } END { print s + 0 }'; }

# One measurement: kind (proxy|dns), phase (steady|reloading). Prints a JSON line.
measure() {
  local kind=$1 phase=$2 rpid="" t0 t1 r0 r1 out="$W/$1-$2.out"
  r0=$(reloads_done)
  [ "$phase" = reloading ] && { reloader & rpid=$!; }
  t0=$(ticks)
  if [ "$kind" = proxy ]; then
    taskset -c 1 wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" -H 'Host: www.example.test' \
      "http://127.0.0.1:$PROXY_PORT/" > "$out" 2>&1
  else
    taskset -c 1 dnsperf -s 127.0.0.1 -p $DNS_PORT -d "$W/queries.txt" -l "$DURATION" -c 4 -q 200 \
      > "$out" 2>&1
  fi
  t1=$(ticks)
  if [ -n "$rpid" ]; then kill "$rpid"; wait "$rpid" 2>/dev/null || true; fi
  r1=$(reloads_done)
  python3 - "$kind" "$phase" "$out" "$t0" "$t1" "$(getconf CLK_TCK)" "$((r1 - r0))" <<'PY'
import json, re, sys
kind, phase, text = sys.argv[1], sys.argv[2], open(sys.argv[3]).read()
t0, t1, hz, reloads = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
if kind == "proxy":
    rate = float(re.search(r"Requests/sec:\s*([0-9.]+)", text).group(1))
    n = int(re.search(r"(\d+) requests in", text).group(1))
    bad = re.search(r"Non-2xx or 3xx responses:\s*(\d+)", text)
    errors = int(bad.group(1)) if bad else 0
    sock = re.search(r"Socket errors: (.*)", text)
    errors_detail = sock.group(1) if sock else ""
else:
    rate = float(re.search(r"Queries per second:\s*([0-9.]+)", text).group(1))
    n = int(float(re.search(r"Queries completed:\s*([0-9.]+)", text).group(1)))
    lost = re.search(r"Queries lost:\s*([0-9.]+)", text)
    errors = int(float(lost.group(1))) if lost else 0
    errors_detail = ""
cpu_us = round((t1 - t0) / hz / n * 1e6, 2) if n else None
print(json.dumps({"kind": kind, "phase": phase, "rate_per_s": rate, "failed": errors,
                  "socket_errors": errors_detail, "reloads": reloads, "cpu_us_per_unit": cpu_us}))
PY
}

for round in $(seq 1 "$ROUNDS"); do
  for kind in proxy dns; do
    measure "$kind" steady | tee -a "$W/results.jsonl"
    measure "$kind" reloading | tee -a "$W/results.jsonl"
  done
done

python3 - "$W/results.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for kind in ("proxy", "dns"):
    steady = [r["rate_per_s"] for r in rows if r["kind"] == kind and r["phase"] == "steady"]
    reloading = [r["rate_per_s"] for r in rows if r["kind"] == kind and r["phase"] == "reloading"]
    cpu_s = [r["cpu_us_per_unit"] for r in rows if r["kind"] == kind and r["phase"] == "steady"]
    cpu_r = [r["cpu_us_per_unit"] for r in rows if r["kind"] == kind and r["phase"] == "reloading"]
    pairs = [round(r / s, 3) for s, r in zip(steady, reloading)]
    print(json.dumps({"summary": kind, "steady_median": statistics.median(steady),
                      "reloading_median": statistics.median(reloading),
                      "ratio": round(statistics.median(reloading) / statistics.median(steady), 3),
                      "round_ratios": pairs,
                      "cpu_us_steady": statistics.median(cpu_s), "cpu_us_reloading": statistics.median(cpu_r),
                      "reloads": sum(r["reloads"] for r in rows if r["kind"] == kind and r["phase"] == "reloading"),
                      "failed": sum(r["failed"] for r in rows if r["kind"] == kind)}))
PY

# SIGHUP to the new config's answer: the TTL of dns.example.test flips between 30 and 31;
# a tight loop of queries (python, one socket) sees the first answer with the new TTL.
python3 - "$AGG" "$W" "$DNS_PORT" "$RELOADS" "$ADMIN" <<'PY'
import json, os, shutil, signal, socket, statistics, struct, sys, time, urllib.request
pid, w, port, n, admin = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
query = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
query += b"".join(bytes([len(p)]) + p for p in b"dns.example.test".split(b".")) + b"\0" + struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(1)
def ttl():
    s.sendto(query, ("127.0.0.1", port))
    data, _ = s.recvfrom(2048)
    if struct.unpack(">H", data[6:8])[0] == 0:
        return None
    i = len(query)  # the question is echoed; the first answer's owner name follows
    while data[i] != 0 and data[i] < 0xC0:
        i += data[i] + 1
    i += 2 if data[i] >= 0xC0 else 1
    return struct.unpack(">I", data[i + 4:i + 8])[0]
current = ttl()
times, queries = [], []
for k in range(n):
    want = 31 if current == 30 else 30
    shutil.copy(os.path.join(w, "b.toml" if want == 31 else "a.toml"), os.path.join(w, "next.toml"))
    os.replace(os.path.join(w, "next.toml"), os.path.join(w, "meshlb.toml"))
    t0 = time.perf_counter()
    os.kill(pid, signal.SIGHUP)
    asked = 0
    while time.perf_counter() - t0 < 10:
        asked += 1
        if ttl() == want:
            break
    times.append((time.perf_counter() - t0) * 1000)
    queries.append(asked)
    current = want
    time.sleep(0.2)
token = open(os.path.join(w, "token")).read().strip()
def cpu_ns():
    # Every thread's CPU time, in nanoseconds (the first field of schedstat).
    total = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(open(f"/proc/{pid}/task/{t}/schedstat").read().split()[0])
        except (OSError, ValueError):
            pass
    return total
posts = []
c0 = cpu_ns()
for k in range(n):
    want = 31 if current == 30 else 30
    shutil.copy(os.path.join(w, "b.toml" if want == 31 else "a.toml"), os.path.join(w, "next.toml"))
    os.replace(os.path.join(w, "next.toml"), os.path.join(w, "meshlb.toml"))
    req = urllib.request.Request(f"http://{admin}/-/reload", method="POST",
                                 headers={"Authorization": f"Bearer {token}"})
    t0 = time.perf_counter()
    body = json.loads(urllib.request.urlopen(req, timeout=30).read())
    posts.append((time.perf_counter() - t0) * 1000)
    assert body["reloaded"], body
    got = ttl()
    assert got == want, f"TTL {got} after POST /-/reload returned, not {want}: the old config answered"
    current = want
cpu_per_reload_ms = (cpu_ns() - c0) / n / 1e6
q = lambda v, p: round(sorted(v)[min(len(v) - 1, int(p * len(v)))], 2)
print(json.dumps({"sighup_to_new_answer_ms": {"p50": q(times, 0.5), "max": round(max(times), 2)},
                  "post_reload_round_trip_ms": {"p50": q(posts, 0.5), "max": round(max(posts), 2)},
                  "aggregator_cpu_ms_per_reload": round(cpu_per_reload_ms, 3),
                  "reloads": n}))
PY
