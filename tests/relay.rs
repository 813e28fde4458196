//! Signed generations relayed by any holder (docs/api.md#signed-generations-and-relays): a
//! real mesh with an Ed25519 writer key, a relay, a follower that cannot reach the primary,
//! and a node holding only the cluster key trying to hand out a generation.
//!
//! A harness of named trials over one shared mesh (`test_support::trials`); each trial writes
//! pools of its own names.

mod relay {
    pub mod checks;
    pub mod world;
}

use relay::*;
use test_support::{trials, Threads};

fn main() {
    let all = trials![world::MESH =>
        checks::a_follower_that_cannot_reach_the_primary_takes_the_generation_from_a_relay,
        checks::a_generation_announced_by_a_node_holding_only_the_cluster_key_is_refused,
        checks::a_node_holding_only_the_cluster_key_is_not_taken_for_the_primary,
        checks::a_follower_one_generation_behind_takes_a_delta,
    ];
    test_support::trials::run(all, Threads::One);
}
