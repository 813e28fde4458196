//! Geo steering: the serving PoP's `pop_pools`, else the client country's `country_pools`,
//! else its region's `region_pools`, each list in failover order; then the default pools.

use crate::config::{PoolId, SteeringSettings};
use crate::steering::trace::Trace;
use crate::steering::traffic::PoolView;

pub(super) fn order(
    settings: &SteeringSettings,
    view: &PoolView<'_>,
    trace: &mut Trace,
) -> Vec<PoolId> {
    let loc = view.location;
    let mapped: Option<(String, &Vec<PoolId>)> = view
        .pop_datacenter
        .and_then(|dc| {
            settings
                .pop_pools
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(dc))
                .map(|(k, l)| (format!("pop_pools[{k}]"), l))
        })
        .or_else(|| {
            loc.country.and_then(|c| {
                settings
                    .country_pools
                    .get(&c)
                    .map(|l| (format!("country_pools[{c}]"), l))
            })
        })
        .or_else(|| {
            settings
                .region_pools
                .get(&loc.region)
                .map(|l| (format!("region_pools[{}]", loc.region), l))
        });
    let mut order: Vec<PoolId> = Vec::new();
    match mapped {
        Some((key, list)) => {
            trace.note(|| {
                format!(
                    "client in {} (country {}, by {}): {key} = {}",
                    loc.region,
                    loc.country.map_or("unknown".to_string(), |c| c.to_string()),
                    loc.source.name(),
                    view.describe(list)
                )
            });
            order.extend(list.iter().copied().filter(|&p| view.usable(p)));
        }
        None => trace.note(|| {
            format!(
                "client in {} (by {}): no geo mapping, default pools in failover order",
                loc.region,
                loc.source.name()
            )
        }),
    }
    // Seed 003: with no mapping, or every mapped pool critical, the default failover order.
    for &p in &settings.default_pools {
        if !order.contains(&p) && view.usable(p) {
            order.push(p);
        }
    }
    order
}
