//! Hash steering: weighted rendezvous hashing on the client address. Each endpoint scores
//! `-weight / ln(u)` with `u` a hash of (client, endpoint name) in (0, 1); the highest wins.
//! A client moves only when its endpoint leaves (or a weight changes), unlike `hash % n`,
//! which reshuffles everyone when one endpoint goes.

use std::net::IpAddr;

use crate::config::{EndpointId, PoolId};
use crate::steering::endpoint::EndpointView;
use crate::steering::weighted::{client_hash, unit_interval};

pub(super) fn pick(
    view: &EndpointView<'_>,
    pool: PoolId,
    eligible: &[EndpointId],
    client: IpAddr,
) -> Option<EndpointId> {
    eligible
        .iter()
        .map(|&e| {
            let pool_name = &view.config.pool(pool).name;
            let u = unit_interval(client_hash(
                client,
                &["endpoint", pool_name, view.name(pool, e)],
            ));
            (e, -view.weight(pool, e) / u.ln())
        })
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(e, _)| e)
}
