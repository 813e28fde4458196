#!/usr/bin/env bash
# Probe throughput and cost, meshlb side by side with Prometheus blackbox_exporter, in one run.
#
# - An nginx origin on 127.0.0.1:18080 (CPU 1) answers every probe.
# - meshlb's scheduler (CPU 0, one tokio worker) probes 10,000 scheduled endpoints over HTTP and
#   TCP at 5,000/s and at 10,000/s; we read probes/s, CPU per probe, heap bytes held per endpoint.
# - blackbox_exporter (CPU 0) is driven by wrk (CPU 1) with /probe requests for the same
#   origin; we read its probes/s and CPU per probe from /proc.
# Prints one JSON line per run and a summary table. Talks only to loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-20}

need=()
command -v nginx >/dev/null || need+=(nginx)
command -v prometheus-blackbox-exporter >/dev/null || need+=(prometheus-blackbox-exporter)
command -v wrk >/dev/null || need+=(wrk)
if [ "${#need[@]}" -gt 0 ]; then
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}"
fi

work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

# The origin.
cat > "$work/nginx.conf" <<NGINX
worker_processes 1;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  server {
    listen 127.0.0.1:18080 backlog=4096;
    location / { return 200 "ok\n"; }
  }
}
NGINX
taskset -c 1 nginx -c "$work/nginx.conf" -g 'daemon off;' &
pids+=($!)
for _ in $(seq 50); do curl -fs http://127.0.0.1:18080/ >/dev/null 2>&1 && break; sleep 0.1; done

cargo build --release -q -p prober --example probe_load
LOAD=target/release/examples/probe_load

results=()
for type in http tcp; do
  for interval in 2 1; do
    line=$(taskset -c 0 "$LOAD" --type "$type" --endpoints 10000 --interval "$interval" --duration "$DURATION" --target 127.0.0.1:18080)
    echo "$line"
    results+=("$line")
  done
done

# blackbox_exporter, same origin.
cat > "$work/blackbox.yml" <<BB
modules:
  http_2xx:
    prober: http
    timeout: 1s
  tcp_connect:
    prober: tcp
    timeout: 1s
BB
taskset -c 0 prometheus-blackbox-exporter --config.file="$work/blackbox.yml" --web.listen-address=127.0.0.1:19115 >"$work/bb.log" 2>&1 &
bbpid=$!
pids+=($bbpid)
for _ in $(seq 50); do curl -fs http://127.0.0.1:19115/metrics >/dev/null 2>&1 && break; sleep 0.1; done

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
for module in http_2xx tcp_connect; do
  if [ "$module" = http_2xx ]; then target="http://127.0.0.1:18080/"; type=http; else target="127.0.0.1:18080"; type=tcp; fi
  t0=$(cpu_ticks "$bbpid")
  out=$(taskset -c 1 wrk -t1 -c32 -d"${DURATION}s" "http://127.0.0.1:19115/probe?module=$module&target=$target")
  t1=$(cpu_ticks "$bbpid")
  reqs=$(echo "$out" | awk '/requests in/ {print $1}')
  python3 - "$type" "$reqs" "$t0" "$t1" "$DURATION" <<'PY'
import json, sys
kind, reqs, t0, t1, dur = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
cpu = (t1 - t0) / 100.0
print(json.dumps({"tool": "blackbox_exporter", "type": kind, "probes": reqs, "probes_per_s": round(reqs / dur),
                  "cpu_s": round(cpu, 2), "cpu_us_per_probe": round(cpu * 1e6 / max(reqs, 1), 1),
                  "probes_per_cpu_s": round(reqs / max(cpu, 1e-9))}))
PY
done | tee "$work/bb.jsonl"

printf '%s\n' "${results[@]}" > "$work/meshlb.jsonl"
python3 - "$work/meshlb.jsonl" "$work/bb.jsonl" <<'PY'
import json, sys
mesh = [json.loads(l) for l in open(sys.argv[1])]
bb = {j["type"]: j for j in map(json.loads, open(sys.argv[2]))}
print()
print(f"{'tool':<18} {'type':<5} {'scheduled/s':>11} {'probes/s':>9} {'failed':>7} {'µs CPU/probe':>13} {'probes/CPU-s':>13} {'B/endpoint':>11}")
for m in mesh:
    print(f"{'meshlb':<18} {m['type']:<5} {m['scheduled_rate']:>11.0f} {m['probes_per_s']:>9} {m['failed']:>7} {m['cpu_us_per_probe']:>13} {m['probes_per_cpu_s']:>13} {m['heap_bytes_per_endpoint']:>11}")
for t, b in bb.items():
    print(f"{'blackbox_exporter':<18} {t:<5} {'(wrk)':>11} {b['probes_per_s']:>9} {'-':>7} {b['cpu_us_per_probe']:>13} {b['probes_per_cpu_s']:>13} {'-':>11}")
for t, b in bb.items():
    best = min((m for m in mesh if m["type"] == t), key=lambda m: m["cpu_us_per_probe"])
    print(f"{t}: blackbox_exporter spends {b['cpu_us_per_probe'] / best['cpu_us_per_probe']:.1f}x the CPU per probe of meshlb")
PY
