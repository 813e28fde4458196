#!/usr/bin/env bash
# TLS termination and HTTP/2 side by side, one run: meshlb, nginx and HAProxy each terminate
# TLS 1.3 (the same ECDSA P-256 certificate; every server takes the client's first cipher,
# TLS_AES_256_GCM_SHA384 from OpenSSL) and proxy to the same plain-HTTP loopback origins. Each
# proxy is pinned to CPU 0 and runs one worker; the load generators and the origins share CPU 1.
# Rows, each measured as the proxy's own CPU per unit of work (from /proc/PID/stat) as well as
# throughput, because one client thread doing handshakes saturates before a proxy does:
#   keepalive   wrk -t1 -c64 over TLS, HTTP/1.1 keep-alive            (requests)
#   full        openssl s_time -new: a full handshake per connection, nothing sent (connections)
#   resumed     openssl s_time -reuse: the session resumed each time (connections)
#   h2          h2load -c16 -m32: many streams per connection         (requests)
#   h2_slow     h2load -c4 -m64 to an origin answering after 20 ms    (requests)
# Prints one JSON line per proxy and row, then medians and ratios. Loopback only.
#
# Needs: nginx haproxy wrk nghttp2-client openssl python3 (Debian); run as root.
#   DURATION=10 ROUNDS=3 ./bench/proxy-tls.sh   MESHLB=path: another meshlb build; ROWS="h2 full": some rows;
#   KEEP_DIR=dir keeps the configs, logs and client outputs.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
ROWS=${ROWS:-"keepalive full resumed h2 h2_slow"}
W=$(mktemp -d /tmp/meshlb-tls-bench.XXXXXX)
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
OPORT=18780
SLOW_PORT=18781

# The certificate: ECDSA P-256, for both names.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
  -subj /CN=www.example.test -addext "subjectAltName=DNS:www.example.test,DNS:slow.example.test" \
  -keyout "$W/key.pem" -out "$W/cert.pem" 2>/dev/null
cat "$W/cert.pem" "$W/key.pem" > "$W/combined.pem"

# Origins on CPU 1: nginx answering 2 bytes at once; a Python asyncio server answering after
# 20 ms (keep-alive), where stream concurrency, not speed, decides the rate.
. bench/proxy-setup.sh
start_origin
cat > "$W/slow.py" <<'PY'
import asyncio, sys
async def serve(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            await asyncio.sleep(0.02)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
        writer.close()
async def main():
    server = await asyncio.start_server(serve, "127.0.0.23", int(sys.argv[1]), backlog=1024)
    await server.serve_forever()
asyncio.run(main())
PY
taskset -c 1 python3 "$W/slow.py" "$SLOW_PORT" &
PIDS+=($!)

write_meshlb_config
cat >> "$W/meshlb.toml" <<TOML
[[pools]]
name = "slow"
origins = [{ name = "s", address = "127.0.0.23", port = $SLOW_PORT }]
[[load_balancers]]
name = "slow.example.test"
proxied = true
default_pools = ["slow"]
TOML
taskset -c 0 "$MESHLB" aggregator --config "$W/meshlb.toml" --region WEU --admin 127.0.0.1:18790 \
  --listen 127.0.0.1:18791 --key-file "$W/key" --proxy-tls 127.0.0.1:18701 --proxy-workers 1 \
  --tls-cert "$W/cert.pem" --tls-key "$W/key.pem" >"$W/agg.log" 2>&1 &
PIDS+=($!)
MESHLB_PID=$!
taskset -c 1 "$MESHLB" prober --config "$W/meshlb.toml" --region WEU --dc ams --listen 127.0.0.1:18792 \
  --seed 127.0.0.1:18791 --key-file "$W/key" >"$W/prober.log" 2>&1 &
PIDS+=($!)

cat > "$W/nginx.conf" <<CONF
worker_processes 1;
pid $W/nginx.pid;
error_log $W/nginx-error.log;
events { worker_connections 8192; }
http {
  access_log off;
  # nginx closes a client connection after 1000 requests by default; the others do not.
  keepalive_requests 100000000;
  upstream web { server 127.0.0.21:$OPORT; server 127.0.0.22:$OPORT; keepalive 128; }
  upstream slow { server 127.0.0.23:$SLOW_PORT; keepalive 512; }
  ssl_certificate $W/cert.pem;
  ssl_certificate_key $W/key.pem;
  ssl_protocols TLSv1.3;
  ssl_session_cache shared:tls:10m;
  http2_max_concurrent_streams 128;
  server {
    listen 127.0.0.1:18702 ssl http2;
    server_name www.example.test;
    location / { proxy_pass http://web; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
  server {
    listen 127.0.0.1:18702 ssl http2;
    server_name slow.example.test;
    location / { proxy_pass http://slow; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
CONF
taskset -c 0 nginx -c "$W/nginx.conf" -g "daemon on;"

cat > "$W/haproxy.cfg" <<CONF
global
  nbthread 1
  maxconn 8000
  ssl-default-bind-options ssl-min-ver TLSv1.3
defaults
  mode http
  timeout connect 5s
  timeout client 30s
  timeout server 30s
  http-reuse always
frontend fe
  bind 127.0.0.1:18703 ssl crt $W/combined.pem alpn h2,http/1.1
  use_backend slow if { req.hdr(host) -m beg slow.example.test }
  default_backend web
backend web
  balance roundrobin
  server a 127.0.0.21:$OPORT
  server b 127.0.0.22:$OPORT
backend slow
  server s 127.0.0.23:$SLOW_PORT
CONF
taskset -c 0 haproxy -f "$W/haproxy.cfg" -db >"$W/haproxy.log" 2>&1 &
HAPROXY_PID=$!
PIDS+=($!)

for port in 18701 18702 18703; do
  for host in www.example.test slow.example.test; do
    ok=0
    for _ in $(seq 1 60); do
      code=$(curl -sk -o /dev/null -w '%{http_code}' --resolve "$host:$port:127.0.0.1" "https://$host:$port/" || true)
      [ "$code" = 200 ] && { ok=1; break; }
      sleep 0.5
    done
    [ "$ok" = 1 ] || { echo "$host on port $port never answered 200" >&2; for f in "$W"/*.log; do echo "== $f" >&2; tail -n 5 "$f" >&2; done; exit 1; }
  done
done

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
proxy_pid() {
  case $1 in
    meshlb) echo "$MESHLB_PID" ;;
    nginx) pgrep -P "$(cat "$W/nginx.pid")" | head -n 1 ;;
    haproxy) echo "$HAPROXY_PID" ;;
  esac
}

# One row for one proxy: a JSON line {proxy, row, units, per_s, cpu_us_per_unit, failed}.
measure() {
  local name=$1 row=$2 port=$3 pid before after out units failed
  pid=$(proxy_pid "$name")
  out="$W/$name-$row.out"
  before=$(cpu_ticks "$pid")
  case $row in
    keepalive)
      taskset -c 1 wrk -t1 -c64 -d"${DURATION}s" -H 'Host: www.example.test' "https://127.0.0.1:$port/" > "$out" 2>&1
      units=$(awk '/requests in/ { print $1 }' "$out")
      failed=$(awk '/Non-2xx/ { print $5 }' "$out"); failed=${failed:-0} ;;
    full|resumed)
      # A full handshake per connection, nothing sent; resumed: one request each
      # (`-www`), so the client reads the session ticket a TLS 1.3 server sends after the
      # handshake. OpenSSL 3.0's s_time sends no SNI: each proxy answers with its one
      # certificate, and the request has no Host (each proxy answers it its own way).
      local flag=-new; [ "$row" = resumed ] && flag="-reuse -www /"
      taskset -c 1 openssl s_time -connect "127.0.0.1:$port" $flag -time "$DURATION" > "$out" 2>&1 || true
      units=$(awk '/connections in/ && /real seconds/ { print $1 }' "$out" | tail -n 1)
      failed=0 ;;
    h2|h2_slow)
      local host=www.example.test args="-c16 -m32"
      [ "$row" = h2_slow ] && { host=slow.example.test; args="-c4 -m64"; }
      taskset -c 1 h2load $args -D "$DURATION" -H ":authority: $host" "https://127.0.0.1:$port/" > "$out" 2>&1 || true
      units=$(awk '/^status codes:/ { gsub(",", ""); print $3 }' "$out")
      failed=$(awk '/^requests:/ { gsub(",", ""); print $10 + $12 }' "$out") ;;
  esac
  after=$(cpu_ticks "$pid")
  python3 - "$name" "$row" "${units:-0}" "$before" "$after" "$(getconf CLK_TCK)" "$DURATION" "${failed:-0}" <<'PY'
import json, sys
name, row, units, before, after, hz, duration, failed = sys.argv[1], sys.argv[2], int(sys.argv[3] or 0), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), float(sys.argv[7]), int(sys.argv[8] or 0)
cpu = (after - before) / hz
print(json.dumps({"proxy": name, "row": row, "units": units, "per_s": round(units / duration, 1),
                  "cpu_busy": round(cpu / duration, 2),
                  "cpu_us_per_unit": round(cpu / units * 1e6, 2) if units else None,
                  "failed": failed}))
PY
}

names=(meshlb nginx haproxy)
ports=(18701 18702 18703)
: > "$W/results"
for r in $(seq 0 $((ROUNDS - 1))); do
  for row in $ROWS; do
    for k in 0 1 2; do
      i=$(( (k + r) % 3 ))
      measure "${names[$i]}" "$row" "${ports[$i]}" | sed "s/^{/{\"round\": $r, /" | tee -a "$W/results"
    done
  done
done
python3 - "$W/results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
out = {}
for row in dict.fromkeys(r["row"] for r in rows):
    mine = [r for r in rows if r["row"] == row]
    med = lambda p, k: statistics.median([r[k] for r in mine if r["proxy"] == p and r[k] is not None] or [0])
    summary = {p: {"per_s": med(p, "per_s"), "cpu_us_per_unit": med(p, "cpu_us_per_unit")} for p in ("meshlb", "nginx", "haproxy")}
    ratio = lambda p, k: round(summary["meshlb"][k] / summary[p][k], 3) if summary[p][k] else None
    out[row] = {"median": summary,
                "meshlb/nginx": {"per_s": ratio("nginx", "per_s"), "cpu": ratio("nginx", "cpu_us_per_unit")},
                "meshlb/haproxy": {"per_s": ratio("haproxy", "per_s"), "cpu": ratio("haproxy", "cpu_us_per_unit")}}
print(json.dumps(out))
PY
