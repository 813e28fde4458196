#!/usr/bin/env bash
# Tunnels side by side, one run: wrk (keep-alive, small bodies) against one meshlb
# aggregator's proxy, which reaches the same loopback origin (an nginx answering a 2-byte
# body) three ways, one load balancer each:
#   direct   the origin as a public endpoint;
#   tunnel   the origin as a private endpoint, through `meshlb tunnel run` (TLS, HTTP/2);
#   rathole  the origin as a public endpoint at a rathole server's port, whose client
#            carries it (Noise-encrypted, rathole's own transport).
# The aggregator, the connector and rathole's two ends are pinned to CPU 0, wrk and the origin
# to CPU 1. CPU per request counts every process of the path: the aggregator, plus the
# connector (tunnel), plus both rathole ends (rathole). Then the connector's resident memory
# with 10,000 idle streams (layer-4 connections held open through the tunnel). Loopback only.
#
# Needs: nginx wrk openssl python3 (Debian), rathole (`cargo install rathole`, without
# --locked: its lock file pins a `time` today's rustc does not build; looked for on PATH and in
# ~/.cargo/bin); a descriptor limit above IDLE_STREAMS.
#   DURATION=10 CONNECTIONS=64 ROUNDS=3 IDLE_STREAMS=10000 PRIVATE_CPU=0 ./bench/tunnel.sh
# Last line: one JSON object (tunnel_vs_direct, tunnel_vs_rathole, cpu_vs_rathole,
# connector_rss_mib_10k_streams, and the medians behind them).
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-10}
CONNECTIONS=${CONNECTIONS:-64}
ROUNDS=${ROUNDS:-3}
IDLE_STREAMS=${IDLE_STREAMS:-10000}
# The CPU of the private network's side (the connector, rathole's client): 0, with the PoP,
# counts the whole path on one core; 1 puts it beside the origin, as on the origin's host.
PRIVATE_CPU=${PRIVATE_CPU:-0}
PATH="$PATH:$HOME/.cargo/bin"
command -v rathole >/dev/null || { echo "rathole is not installed: cargo install rathole" >&2; exit 1; }
# Each process of the idle-stream trial holds IDLE_STREAMS descriptors and a few more.
want=$((IDLE_STREAMS + 1024)); hard=$(ulimit -Hn)
[ "$hard" = unlimited ] || [ "$hard" -ge "$want" ] || { echo "ulimit -Hn is $hard: IDLE_STREAMS=$IDLE_STREAMS needs $want" >&2; exit 1; }
ulimit -n "$want"
W=$(mktemp -d /tmp/meshlb-tunnel-bench.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -f "$W/origin.pid" ] && kill "$(cat "$W/origin.pid")" 2>/dev/null || true
  wait 2>/dev/null || true
  [ -n "${KEEP_DIR:-}" ] && cp -r "$W" "$KEEP_DIR"; rm -rf "$W"
}
trap cleanup EXIT

if [ -z "${MESHLB:-}" ]; then
  cargo build --release -q --bin meshlb
  MESHLB=target/release/meshlb
fi
OPORT=18780 HOLD_PORT=18781 RATHOLE_CTL=18782 RATHOLE_PORT=18783
PROXY=18701 ADMIN=18702 GOSSIP=18703 TUNNELS=18704 L4_PORT=18705
TUNNEL_ID=f70ff985-a4ef-4643-bbbc-4a0ed4fc8415
NETWORK=a5624d4e-044a-4ff0-b3e1-e2465353d4b4

# The origin on CPU 1: nginx answering "ok", and a TCP server that holds connections open.
cat > "$W/origin.conf" <<CONF
worker_processes 1;
pid $W/origin.pid;
error_log $W/origin-error.log;
events { worker_connections 4096; }
http { access_log off; server { listen 127.0.0.21:$OPORT; location / { return 200 "ok"; } } }
CONF
taskset -c 1 nginx -c "$W/origin.conf" -g "daemon on;"
cat > "$W/hold.py" <<'PY'
import asyncio, sys
async def hold(r, w):
    await r.read()  # until the peer closes
    w.close()
async def main():
    server = await asyncio.start_server(hold, "127.0.0.23", int(sys.argv[1]), backlog=4096)
    async with server:
        await server.serve_forever()
asyncio.run(main())
PY
taskset -c 1 python3 "$W/hold.py" "$HOLD_PORT" >"$W/hold.log" 2>&1 &
PIDS+=($!)

# The PoP's tunnel certificate, and meshlb's config: three load balancers, one per path.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=pop.test \
  -keyout "$W/pop.key" -out "$W/pop.pem" >/dev/null 2>&1
echo "the meshlb tunnel benchmark cluster key" > "$W/key"
SECRET=$(head -c 32 /dev/urandom | base64)
cat > "$W/meshlb.toml" <<TOML
[[tunnels]]
id = "$TUNNEL_ID"
name = "office"
tunnel_secret = "$SECRET"
[[virtual_networks]]
id = "$NETWORK"
name = "office"
is_default_network = true
[[routes]]
network = "127.0.0.21/32"
tunnel_id = "$TUNNEL_ID"
[[routes]]
network = "127.0.0.23/32"
tunnel_id = "$TUNNEL_ID"
[[pools]]
name = "direct"
origins = [{ name = "a", address = "127.0.0.21", port = $OPORT }]
[[pools]]
name = "private"
origins = [{ name = "a", address = "127.0.0.21", port = $OPORT, virtual_network_id = "$NETWORK" }]
[[pools]]
name = "rathole"
origins = [{ name = "a", address = "127.0.0.1", port = $RATHOLE_PORT }]
[[pools]]
name = "held"
origins = [{ name = "a", address = "127.0.0.23", port = $HOLD_PORT, virtual_network_id = "$NETWORK" }]
[[load_balancers]]
name = "direct.example.test"
proxied = true
default_pools = ["direct"]
[[load_balancers]]
name = "tunnel.example.test"
proxied = true
default_pools = ["private"]
[[load_balancers]]
name = "rathole.example.test"
proxied = true
default_pools = ["rathole"]
[[load_balancers]]
name = "held.example.test"
protocol = "tcp"
listen = [$L4_PORT]
default_pools = ["held"]
TOML
taskset -c 0 "$MESHLB" aggregator --config "$W/meshlb.toml" --region WEU --admin 127.0.0.1:$ADMIN \
  --listen 127.0.0.1:$GOSSIP --key-file "$W/key" --proxy 127.0.0.1:$PROXY --l4 127.0.0.1 \
  --tunnel-listen 127.0.0.1:$TUNNELS --tunnel-cert "$W/pop.pem" --tunnel-key "$W/pop.key" \
  >"$W/agg.log" 2>&1 &
AGG=$!
PIDS+=($!)
for _ in $(seq 1 60); do
  "$MESHLB" tunnel token --config "$W/meshlb.toml" --tunnel office --pop 127.0.0.1:$TUNNELS \
    --pop-cert "$W/pop.pem" > "$W/token" 2>/dev/null && break
  sleep 0.5
done
taskset -c "$PRIVATE_CPU" "$MESHLB" tunnel run --token-file "$W/token" --max-streams 8192 >"$W/connector.log" 2>&1 &
CONNECTOR=$!
PIDS+=($!)

# rathole, Noise-encrypted (its default Noise_NK_25519_ChaChaPoly_BLAKE2s), one service.
rathole --genkey > "$W/noise" 2>/dev/null
PRIVATE_KEY=$(awk '/Private Key/ { getline; print }' "$W/noise")
PUBLIC_KEY=$(awk '/Public Key/ { getline; print }' "$W/noise")
cat > "$W/rathole-server.toml" <<TOML
[server]
bind_addr = "127.0.0.1:$RATHOLE_CTL"
[server.transport]
type = "noise"
[server.transport.noise]
local_private_key = "$PRIVATE_KEY"
[server.services.origin]
token = "bench"
bind_addr = "127.0.0.1:$RATHOLE_PORT"
TOML
cat > "$W/rathole-client.toml" <<TOML
[client]
remote_addr = "127.0.0.1:$RATHOLE_CTL"
[client.transport]
type = "noise"
[client.transport.noise]
remote_public_key = "$PUBLIC_KEY"
[client.services.origin]
token = "bench"
local_addr = "127.0.0.21:$OPORT"
TOML
taskset -c 0 rathole "$W/rathole-server.toml" >"$W/rathole-server.log" 2>&1 &
RATHOLE_SERVER=$!
PIDS+=($!)
taskset -c "$PRIVATE_CPU" rathole "$W/rathole-client.toml" >"$W/rathole-client.log" 2>&1 &
RATHOLE_CLIENT=$!
PIDS+=($!)

# Wait (bounded) until every path answers 200.
for host in direct tunnel rathole; do
  ok=0
  for _ in $(seq 1 60); do
    code=$(curl -s -o /dev/null -w '%{http_code}' -H "Host: $host.example.test" "http://127.0.0.1:$PROXY/" || true)
    [ "$code" = 200 ] && { ok=1; break; }
    sleep 0.5
  done
  [ "$ok" = 1 ] || { echo "$host never answered 200" >&2; for f in "$W"/*.log; do echo "== $f" >&2; tail -n 5 "$f" >&2; done; exit 1; }
done

# CPU ticks (user + system) of processes, summed.
ticks() { local t=0 p; for p in "$@"; do t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat"))); done; echo "$t"; }
path_pids() {
  case $1 in
    direct) echo "$AGG" ;;
    tunnel) echo "$AGG $CONNECTOR" ;;
    rathole) echo "$AGG $RATHOLE_SERVER $RATHOLE_CLIENT" ;;
  esac
}
run() {
  local name=$1 pids before after
  pids=$(path_pids "$name")
  # shellcheck disable=SC2086
  before=$(ticks $pids)
  taskset -c 1 wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" -H "Host: $name.example.test" \
    "http://127.0.0.1:$PROXY/" > "$W/$name.wrk" 2>&1
  # shellcheck disable=SC2086
  after=$(ticks $pids)
  python3 - "$name" "$W/$name.wrk" "$before" "$after" "$(getconf CLK_TCK)" <<'PY'
import json, re, sys
name, text = sys.argv[1], open(sys.argv[2]).read()
before, after, hz = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
rps = re.search(r"Requests/sec:\s*([0-9.]+)", text)
total = re.search(r"(\d+) requests in", text)
errors = re.search(r"Non-2xx or 3xx responses:\s*(\d+)", text)
n = int(total.group(1)) if total else 0
print(json.dumps({"path": name, "requests_per_s": float(rps.group(1)) if rps else None,
                  "cpu_us_per_request": round((after - before) / hz / n * 1e6, 2) if n else None,
                  "non_2xx": int(errors.group(1)) if errors else 0}))
PY
}
names=(direct tunnel rathole)
: > "$W/results"
for r in $(seq 0 $((ROUNDS - 1))); do
  for k in 0 1 2; do
    i=$(( (k + r) % 3 ))
    run "${names[$i]}" | sed "s/^{/{\"round\": $r, /" | tee -a "$W/results"
  done
done

# The connector's memory: before, and with IDLE_STREAMS layer-4 connections held open.
rss_kib() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }
RSS_BEFORE=$(rss_kib "$CONNECTOR")
cat > "$W/idle.py" <<'PY'
import socket, sys, time
port, count = int(sys.argv[1]), int(sys.argv[2])
held = []
for _ in range(count):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    held.append(s)
print(len(held), flush=True)
time.sleep(3600)
PY
taskset -c 1 python3 "$W/idle.py" "$L4_PORT" "$IDLE_STREAMS" > "$W/idle.out" 2>"$W/idle.err" &
IDLE=$!
PIDS+=($!)
opened=0
for _ in $(seq 1 240); do
  [ -s "$W/idle.out" ] && break
  kill -0 "$IDLE" 2>/dev/null || break
  sleep 0.5
done
[ -s "$W/idle.out" ] || { echo "the idle connections did not open: $(tail -n 3 "$W/idle.err")" >&2; exit 1; }
# Every connection is a stream at the connector once its count settles (bounded wait).
for _ in $(seq 1 60); do
  opened=$(ls "/proc/$CONNECTOR/fd" | wc -l)
  [ "$opened" -ge "$IDLE_STREAMS" ] && break
  sleep 0.5
done
RSS_HELD=$(rss_kib "$CONNECTOR")
echo "{\"connector_rss_kib_before\": $RSS_BEFORE, \"connector_rss_kib_held\": $RSS_HELD, \"connector_fds\": $opened, \"idle_streams\": $IDLE_STREAMS}" | tee "$W/rss"

python3 - "$W/results" "$W/rss" "$PRIVATE_CPU" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rss = json.loads(open(sys.argv[2]).read())
med = lambda path, key: statistics.median(r[key] for r in rows if r["path"] == path and r[key] is not None)
rounds = {}
for r in rows:
    rounds.setdefault(r["round"], {})[r["path"]] = r
ratio = lambda a, b, key: round(statistics.median(x[a][key] / x[b][key] for x in rounds.values()), 3)
print(json.dumps({
    "direct_requests_per_s": med("direct", "requests_per_s"),
    "tunnel_requests_per_s": med("tunnel", "requests_per_s"),
    "rathole_requests_per_s": med("rathole", "requests_per_s"),
    "direct_cpu_us_per_request": med("direct", "cpu_us_per_request"),
    "tunnel_cpu_us_per_request": med("tunnel", "cpu_us_per_request"),
    "rathole_cpu_us_per_request": med("rathole", "cpu_us_per_request"),
    "tunnel_vs_direct": ratio("tunnel", "direct", "requests_per_s"),
    "tunnel_vs_rathole": ratio("tunnel", "rathole", "requests_per_s"),
    "cpu_vs_rathole": ratio("tunnel", "rathole", "cpu_us_per_request"),
    "connector_rss_mib_10k_streams": round(rss["connector_rss_kib_held"] / 1024, 1),
    "connector_rss_mib_idle": round(rss["connector_rss_kib_before"] / 1024, 1),
    "idle_streams": rss["idle_streams"],
    "rounds": len(rounds),
    "private_cpu": int(sys.argv[3]),
}))
PY
