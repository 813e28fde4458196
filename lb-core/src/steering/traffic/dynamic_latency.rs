//! Dynamic steering (docs/design.md#dynamic-latency): the pool with the lowest EWMA RTT measured from the serving
//! PoP's region (the region whose probers measured it). Pools without RTT data there follow in failover order, so with no data at all the
//! order is plain failover, as Cloudflare does while it builds RTT profiles.

use crate::config::PoolId;
use crate::steering::trace::Trace;
use crate::steering::traffic::PoolView;
use crate::steering::PoolList;

pub(super) fn order(pools: &[PoolId], view: &PoolView<'_>, trace: &mut Trace) -> PoolList {
    let region = view.pop_region;
    let mut measured: Vec<(PoolId, f64)> = pools
        .iter()
        .filter_map(|&p| {
            view.health
                .pool(p)
                .rtt_ms
                .get(region)
                .filter(|r| r.is_finite())
                .map(|rtt| (p, rtt))
        })
        .collect();
    // Stable, so equal RTTs keep failover order (non-finite values were dropped above).
    measured.sort_by(|a, b| a.1.total_cmp(&b.1));
    trace.note(|| {
        let parts: Vec<String> = measured
            .iter()
            .map(|&(p, rtt)| format!("{}={rtt:.1}ms", view.name(p)))
            .collect();
        if measured.is_empty() {
            format!("no RTT data from {region}: failover order")
        } else {
            format!("EWMA RTT from {region}: [{}]", parts.join(", "))
        }
    });
    let mut order: PoolList = measured.into_iter().map(|(p, _)| p).collect();
    super::append_missing(&mut order, pools);
    order
}
