//! Geo steering: the serving PoP's `pop_pools`, else the client country's `country_pools`,
//! else its region's `region_pools`, each list in failover order; then the default pools.

use crate::config::SteeringSettings;
use crate::steering::trace::Trace;
use crate::steering::traffic::PoolView;
use crate::steering::PoolList;

pub(super) fn order(
    settings: &SteeringSettings,
    view: &PoolView<'_>,
    trace: &mut Trace,
) -> PoolList {
    let loc = view.location;
    trace.note(|| {
        format!(
            "client in {} (country {}, by {})",
            loc.region,
            loc.country.map_or("unknown".to_string(), |c| c.to_string()),
            loc.source.name()
        )
    });
    let pop = view.pop_datacenter.and_then(|dc| {
        settings
            .pop_pools
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(dc))
            .map(|(k, l)| (format!("pop_pools[{k}]"), l))
    });
    let country = loc.country.and_then(|c| {
        settings
            .country_pools
            .get(&c)
            .map(|l| (format!("country_pools[{c}]"), l))
    });
    let region = settings
        .region_pools
        .get(&loc.region)
        .map(|l| (format!("region_pools[{}]", loc.region), l));
    // Every mapping that applies, most specific first, each in failover order; the default
    // pools last (docs/design.md#geo: no mapping, or every mapped pool critical, means failover order).
    let mut order = PoolList::new();
    for (key, list) in [pop, country, region].into_iter().flatten() {
        trace.note(|| format!("{key} = {}", view.describe(list)));
        for &p in list {
            if !order.contains(&p) && view.usable(p) {
                order.push(p);
            }
        }
    }
    for &p in &settings.default_pools {
        if !order.contains(&p) && view.usable(p) {
            order.push(p);
        }
    }
    order
}
