//! Private network load balancing in network namespaces (docs/private-networks.md): an origin
//! in a private network that nothing outside it can reach, two replicas of a connector there
//! with outbound reach only, two PoPs (one holding the tunnel) and three probers.
//!
//! A harness of named trials over one shared world (`test_support::trials`). Needs root
//! (namespaces), iproute2 and dig.

// The chaos suite's namespaces and origins (tests/chaos), not all of whose helpers this suite
// uses.
#[allow(dead_code, unused_imports)]
#[path = "chaos/origins.rs"]
mod origins;
#[allow(dead_code)]
#[path = "chaos/world.rs"]
mod world;

mod private_network {
    pub mod checks;
    pub mod world;
}

use private_network::checks;
use test_support::{trials, Threads};

fn main() {
    let all = trials![private_network::world::WORLD =>
        checks::the_private_origin_answers_only_inside_its_network,
        checks::the_pop_holding_the_tunnel_proxies_to_the_private_origin,
        checks::a_pop_without_a_tunnel_connection_proxies_through_the_pop_that_holds_it,
        checks::a_layer_4_load_balancer_reaches_the_private_origin_through_either_pop,
        checks::a_replica_killed_under_load_loses_no_request,
        checks::every_connection_dropped_fails_over_within_the_bound,
        checks::a_connector_with_a_wrong_token_is_refused,
        checks::a_connector_claiming_a_foreign_route_is_refused,
        checks::explain_tells_the_tunnel_a_private_endpoint_is_reached_through,
        checks::the_console_pool_view_shows_a_private_endpoints_tunnel,
    ];
    test_support::trials::run(all, Threads::One);
}
