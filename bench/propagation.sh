#!/usr/bin/env bash
# Gossip propagation: how long until a change made on one node is seen by every node, on a
# mesh of sealed chitchat nodes on loopback (one process), at 39 and 100 nodes, 100 and 200 ms
# gossip intervals. Each node carries 100 pool values (~2 KB each), like a prober of a large
# config. Prints one JSON line per run. Talks only to loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-31}
cargo build --release -q -p prober --example propagation
for nodes in 39 100; do
  for interval in 100 200; do
    target/release/examples/propagation --nodes "$nodes" --interval-ms "$interval" --rounds "$ROUNDS" --keys 100
  done
done
