//! The mesh's config in a real three-member etcd cluster (`--config-store`, docs/api.md#the-config-in-etcd):
//! two aggregators on the store, probers following through gossip; and a store behind etcd's
//! TLS, client certificates and users (`store/secured.rs`).
//!
//! A harness of named trials over one shared world (`test_support::trials`); each trial writes
//! pools of its own names, and the trials that kill etcd members start them again.

mod store {
    pub mod secured;
    pub mod world;
    pub mod writes;
}

use store::*;
use test_support::{trials, Threads};

fn main() {
    let mut all = trials![world::MESH =>
        writes::writes_through_either_aggregator_reach_both_and_the_probers,
        writes::two_writers_racing_with_one_if_match_land_exactly_once,
        writes::an_if_match_from_the_other_aggregator_is_taken_before_its_watch_brings_it,
        writes::killing_the_etcd_leader_loses_no_acknowledged_write,
        writes::with_etcd_gone_nodes_serve_and_writes_answer_503_until_it_returns,
    ];
    all.extend(trials![secured::SECURED =>
        secured::writes_land_in_etcd_over_tls_as_an_etcd_user,
        secured::an_expired_etcd_token_is_renewed_and_the_next_write_lands,
        secured::a_wrong_etcd_password_is_refused_and_the_write_says_so,
        secured::an_aggregator_that_does_not_trust_etcds_certificate_writes_nothing,
    ]);
    all.push(world::MESH.ending(
        "killing_the_aggregator_that_took_the_last_write_leaves_writes_to_the_other",
        writes::killing_the_aggregator_that_took_the_last_write_leaves_writes_to_the_other,
    ));
    test_support::trials::run(all, Threads::One);
}
