#!/usr/bin/env bash
# Config propagation through the control plane (docs/api.md#one-config-for-the-mesh): a mesh
# of NODES on loopback (default 41) — the config primary holding the writer key, a follower
# aggregator and NODES-2 follower probers spread over the 13 regions' datacenters, all started
# with --config-from-mesh, the writer's public key and no file, each relaying what it holds on
# its listener — then, once every node holds the first generation and SETTLE_S seconds (5) have
# passed, one untimed write (the API's form of the hand-written file), then WRITES API writes
# on the primary (a pool's weight patched), for a config of 10 and of 10,000 endpoints (pools
# without monitors, so nothing is probed and only the config moves). Each write is timed from
# its answer two ways:
#   applied    until the last follower put the generation in force (its log's "config
#              reloaded (generation G from …)" line; every process shares this machine's clock);
#   confirmed  until the primary's gossip view shows every node at the generation (`GET
#              /members`, polled every 20 ms): applied, plus the gossip back to the primary.
# Prints one JSON line per size: p50/p99/max of both, the document's size, the bytes the
# primary sent per generation (its meshlb_config_document_bytes_sent_total over the writes), the
# fetches that failed and those a holder refused as busy (--config-serve-max) on every node, and
# the five slowest confirmations.
# Loopback only.
#
# Needs: curl, python3.
#   WRITES=20 SIZES="10 10000" ./bench/config_sync.sh
#   NODES=200 SIZES=10000 ./bench/config_sync.sh
#   MESHLB=target/debug/meshlb ./bench/config_sync.sh   # skip the release build
#   GOSSIP_MAX_DATAGRAM=0 ./bench/config_sync.sh         # full digests on every node (the
#                                                        # default is bounded gossip)
set -euo pipefail
cd "$(dirname "$0")/.."
WRITES=${WRITES:-20}
SIZES=${SIZES:-"10 10000"}
GOSSIP_MS=${GOSSIP_MS:-100}
NODES=${NODES:-41}
GOSSIP_EXTRA=()
if [ -n "${GOSSIP_MAX_DATAGRAM:-}" ]; then GOSSIP_EXTRA=(--gossip-max-datagram "$GOSSIP_MAX_DATAGRAM"); fi
SETTLE_S=${SETTLE_S:-5}
if [ -z "${MESHLB:-}" ]; then
  cargo build --release -q --bin meshlb
  MESHLB=target/release/meshlb
fi
W=$(mktemp -d /tmp/meshlb-config-sync.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$W"
}
trap cleanup EXIT
echo "the meshlb config sync benchmark cluster key" > "$W/key"
echo "config-sync-token" > "$W/token"
"$MESHLB" config keygen --out "$W" >/dev/null
ADMIN=127.0.0.1:18890
ADMIN2=127.0.0.1:18891
SEED=127.0.0.1:18900

config() {
  python3 - "$1" <<'PY'
import sys
n = int(sys.argv[1])
pools = max(1, n // 100)
out = []
for p in range(pools):
    origins = ", ".join(
        f'{{ name = "e{i}", address = "127.{(p // 250) % 250 + 1}.{p % 250}.{i % 250 + 1}", weight = 1.0 }}'
        for i in range(min(100, n - p * 100)))
    out.append(f'[[pools]]\nname = "pool-{p}"\norigins = [{origins}]\n')
out.append('[[load_balancers]]\nname = "www.example.com"\ndefault_pools = ["pool-0"]\n')
print("\n".join(out))
PY
}

start() {
  local port=18901
  "$MESHLB" aggregator --config "$W/primary.toml" --config-primary --region WEU \
    --admin "$ADMIN" --admin-token-file "$W/token" --listen "$SEED" --seed "$SEED" \
    --config-signing-key "$W/signing.key" \
    --key-file "$W/key" --gossip-interval-ms "$GOSSIP_MS" "${GOSSIP_EXTRA[@]}" >"$W/primary.log" 2>&1 &
  PIDS+=($!)
  "$MESHLB" aggregator --config "$W/follower.toml" --config-from-mesh --region ENAM \
    --admin "$ADMIN2" --listen 127.0.0.1:$port --seed "$SEED" --config-verify-key "$W/signing.pub" \
    --key-file "$W/key" --gossip-interval-ms "$GOSSIP_MS" "${GOSSIP_EXTRA[@]}" >"$W/follower.log" 2>&1 &
  PIDS+=($!)
  # Every (region, datacenter) of the roster in turn, as many times as NODES-2 probers need.
  mapfile -t places < <("$MESHLB" regions | awk '{ for (i = 2; i <= NF; i++) if ($i ~ /^[a-z][a-z][a-z]$/) print $1, $i }')
  local n=0
  while [ "$n" -lt $((NODES - 2)) ]; do
    local place=${places[$((n % ${#places[@]}))]}
    port=$((port + 1))
    "$MESHLB" prober --config "$W/prober-$port.toml" --config-from-mesh --region "${place% *}" \
      --dc "${place#* }" --node-id "prober-$port" --listen 127.0.0.1:$port --seed "$SEED" \
      --metrics 127.0.0.1:$((port + 10000)) --config-verify-key "$W/signing.pub" \
      --key-file "$W/key" --gossip-interval-ms "$GOSSIP_MS" "${GOSSIP_EXTRA[@]}" >"$W/prober-$port.log" 2>&1 &
    PIDS+=($!)
    n=$((n + 1))
  done
}

run() {
  local size=$1
  rm -f "$W"/*.toml "$W"/*.generation "$W"/*.previous
  config "$size" > "$W/primary.toml"
  start
  python3 - "$ADMIN" "$W/token" "$WRITES" "$size" "$NODES" "$SETTLE_S" "$W" <<'PY'
import datetime, glob, json, re, sys, time, urllib.request
admin, token_file, writes, size, nodes, settle, logs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6]), sys.argv[7]
token = open(token_file).read().strip()
def call(method, path, body=None, headers={}):
    req = urllib.request.Request(f"http://{admin}{path}", method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.headers.get("ETag", "").strip('"'), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("ETag", "").strip('"'), e.read()
    except OSError:
        return 0, "", b""
def members():
    status, _, body = call("GET", "/members")
    return json.loads(body) if status == 200 else []
def at(generation):
    live = [m for m in members() if m["alive"]]
    return len(live), sum(1 for m in live if m.get("config_generation") == generation)
def metric(address, prefix):
    try:
        with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as r:
            text = r.read().decode()
    except OSError:
        return 0.0
    return sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines() if l.startswith(prefix))
def sent():
    return metric(admin, "meshlb_config_document_bytes_sent_total")
# Every node's metrics listener: the two aggregators' admin, each prober's --metrics.
listeners = [admin, "127.0.0.1:18891"] + [f"127.0.0.1:{p + 10000}" for p in range(18902, 18902 + nodes - 2)]
def everywhere(prefix):
    return sum(metric(a, prefix) for a in listeners)
deadline = time.time() + 300
while time.time() < deadline and at(1) != (nodes, nodes):
    time.sleep(0.5)
if at(1) != (nodes, nodes):
    sys.exit(f"the mesh did not form: {at(1)}")
# Steady state: the nodes that just started are still exchanging every node's state.
time.sleep(settle)
# A first, untimed write: the API writes the document in its own form, so a hand-written
# file's every resource changes text once (and every follower parses it all).
def patch(weight):
    status, _, body = call("GET", pool)
    origins = json.loads(body)["result"]["origins"]
    origins[0]["weight"] = weight
    start = time.time()
    status, etag, body = call("PATCH", pool, {"origins": origins})
    if status != 200:
        sys.exit(f"write: {status} {body[:300]}")
    return start, int(etag)
pool = "/client/v4/accounts/x/load_balancers/pools/pool-0"
_, generation = patch(0.9)
while at(generation) != (nodes, nodes) and time.time() < deadline:
    time.sleep(0.1)
sent_before = sent()
failed_before = everywhere('meshlb_config_fetches_total{result="failure"}')
busy_before = everywhere('meshlb_config_fetches_served_total{sent="busy"}')
times = []
started = {}
for w in range(writes):
    start, generation = patch(0.5 + (w % 2) * 0.25)
    while at(generation) != (nodes, nodes):
        if time.time() - start > 60:
            sys.exit(f"write {w}: generation {generation} not everywhere after 60 s: {at(generation)}")
        time.sleep(0.02)
    times.append((time.time() - start) * 1000)
    started[generation] = start
# When each follower put each generation in force, from its own log (one clock on loopback).
applied = {}
line = re.compile(r"^(\S+) +INFO config reloaded \(generation (\d+) from ")
for path in glob.glob(f"{logs}/*.log"):
    if path.endswith("/primary.log"):
        continue
    for l in open(path, errors="replace"):
        m = line.match(l)
        if m and int(m.group(2)) in started:
            at_s = datetime.datetime.fromisoformat(m.group(1).replace("Z", "+00:00")).timestamp()
            applied.setdefault(int(m.group(2)), []).append(at_s)
everywhere_ms = sorted((max(applied[g]) - s) * 1000 for g, s in started.items()
                       if len(applied.get(g, [])) == nodes - 1)
if len(everywhere_ms) != writes:
    sys.exit(f"only {len(everywhere_ms)} of {writes} generations logged by every follower")
_, _, body = call("GET", "/config")
doc = json.loads(body)["result"]
times.sort()
pct = lambda ts, p: round(ts[min(len(ts) - 1, int(len(ts) * p))], 1)
print(json.dumps({"endpoints": size, "writes": writes, "nodes": nodes,
    "applied_p50_ms": pct(everywhere_ms, 0.5), "applied_p99_ms": pct(everywhere_ms, 0.99),
    "applied_max_ms": round(everywhere_ms[-1], 1),
    "confirmed_p50_ms": pct(times, 0.5), "confirmed_p99_ms": pct(times, 0.99),
    "confirmed_max_ms": round(times[-1], 1),
    "document_bytes": doc["size"],
    "primary_bytes_per_generation": round((sent() - sent_before) / writes),
    "fetch_failures": everywhere('meshlb_config_fetches_total{result="failure"}') - failed_before,
    "busy_refusals": everywhere('meshlb_config_fetches_served_total{sent="busy"}') - busy_before,
    "slowest_confirmed_ms": [round(t) for t in times[-5:]],
    "uncompressed_from_one_primary": doc["size"] * (nodes - 1)}))
PY
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  PIDS=()
}

for size in $SIZES; do run "$size"; done
