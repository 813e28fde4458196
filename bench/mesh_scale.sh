#!/usr/bin/env bash
# The mesh at fleet size, simulated (mesh/sim): NODES real mesh nodes — chitchat, the sealed
# transport, its fragmentation and reassembly — in one process on a model of the WAN, on
# tokio's paused clock. Measures a change's spread (TRIALS of them, one every TRIAL_EVERY_MS
# (200) whether or not the last has landed, each from a random node), the largest datagram,
# gossip bits per second per node, false deaths over HOURS simulated hours, and optionally a
# death (DEATH=1) and a rolling restart (ROLLING=1).
# No packet leaves the process.
#
#   NODES=1000 RTT_MS=100 LOSS=0.01 TRIALS=100 ./bench/mesh_scale.sh
#
# RTT_MS unset: the 13-region round-trip matrix (20-300 ms, mesh/sim/src/regions.rs). LOSS is
# per IP fragment (1500-byte MTU). PROBERS (0): that many nodes advance a `progress` key every
# second, as probers do. GOSSIP_MS (100), DROP_FRAGMENTS=1 (paths that filter IP fragments),
# SEED. Progress on stderr; the last line is one JSON object.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p mesh-sim --bin mesh-scale
exec target/release/mesh-scale
