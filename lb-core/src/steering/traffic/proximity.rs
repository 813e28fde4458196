//! Proximity steering: the pool nearest (great-circle) to the client's location. Pools without
//! coordinates follow in failover order.

use crate::config::PoolId;
use crate::steering::trace::Trace;
use crate::steering::traffic::PoolView;
use crate::steering::PoolList;

pub(super) fn order(pools: &[PoolId], view: &PoolView<'_>, trace: &mut Trace) -> PoolList {
    let here = view.location.coordinates;
    let mut located: Vec<(PoolId, f64)> = pools
        .iter()
        .filter_map(|&p| {
            view.config
                .pool(p)
                .coordinates
                .map(|c| (p, here.distance_km(c)))
        })
        .collect();
    located.sort_by(|a, b| a.1.total_cmp(&b.1));
    trace.note(|| {
        let parts: Vec<String> = located
            .iter()
            .map(|&(p, km)| format!("{}={km:.0}km", view.name(p)))
            .collect();
        format!(
            "client at ({:.2}, {:.2}) by {}: distances [{}]",
            here.latitude,
            here.longitude,
            view.location.source.name(),
            parts.join(", ")
        )
    });
    let mut order: PoolList = located.into_iter().map(|(p, _)| p).collect();
    super::append_missing(&mut order, pools);
    order
}
