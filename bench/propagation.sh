#!/usr/bin/env bash
# Gossip propagation: how long until a change made on one node is seen by every node, on a
# mesh of sealed chitchat nodes on loopback, for the shapes below (nodes:gossip interval
# ms:pool keys per node; a key is ~2 KB, like a prober's value for a pool of ~100 endpoints, so
# 100 keys is a prober of a 10,000-endpoint config). The first change after the bulk state
# transfer is reported apart ("first_after_sync_ms"). Prints one JSON line per shape. Run it on
# an otherwise idle machine. Talks only to loopback.
#
#   ./bench/propagation.sh                 every node its own process (the default)
#   PROCESSES=0 ./bench/propagation.sh     all nodes in one process, polled for the change
#   MAX_DATAGRAM=0 ./bench/propagation.sh  full digests (--gossip-max-datagram 0); the default
#                                          is bounded gossip at 1400 bytes, as meshlb's
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-31}
MAX_DATAGRAM=${MAX_DATAGRAM:-1400}
PROCESSES=${PROCESSES:-1}
SHAPES=${SHAPES:-"39:100:10 39:100:100 100:200:10 100:300:100"}
if [ "$PROCESSES" = 1 ]; then
  example=propagation_processes
else
  example=propagation
fi
cargo build --release -q -p mesh --example "$example"
for shape in $SHAPES; do
  IFS=: read -r nodes interval keys <<<"$shape"
  "target/release/examples/$example" --nodes "$nodes" --interval-ms "$interval" --rounds "$ROUNDS" --keys "$keys" \
    ${MAX_DATAGRAM:+--max-datagram "$MAX_DATAGRAM"}
done
