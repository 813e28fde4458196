//! Azure Front Door's routing (docs/design.md#latency-endpoint-steering): among enabled, healthy endpoints keep the lowest
//! priority value, then those within `latency_sensitivity_ms` of the fastest as measured from
//! the PoP's region (Azure Front Door: from the environment where the request arrived); weights then
//! split traffic among what is left.

use crate::config::{EndpointId, PoolId};
use crate::steering::endpoint::EndpointView;
use crate::steering::trace::Trace;
use crate::steering::EndpointList;

pub(super) fn filter(
    view: &EndpointView<'_>,
    pool: PoolId,
    usable: EndpointList,
    sensitivity_ms: u32,
    trace: &mut Trace,
) -> EndpointList {
    let p = view.config.pool(pool);
    let Some(top) = usable.iter().map(|e| p.endpoints[e.0].priority).min() else {
        return usable;
    };
    let prioritized: EndpointList = usable
        .into_iter()
        .filter(|e| p.endpoints[e.0].priority == top)
        .collect();
    let region = view.pop_region;
    let rtt = |e: EndpointId| {
        view.health
            .endpoint(pool, e)
            .rtt_ms
            .get(region)
            .filter(|r| r.is_finite())
    };
    let Some(fastest) = prioritized
        .iter()
        .filter_map(|&e| rtt(e))
        .min_by(|a, b| a.total_cmp(b))
    else {
        trace.note(|| format!("latency: priority {top}, no RTT data from {region}: all kept"));
        return prioritized;
    };
    let limit = fastest + f64::from(sensitivity_ms);
    // With data for some endpoints, one without data cannot be shown to be within range.
    let kept: EndpointList = prioritized
        .iter()
        .copied()
        .filter(|&e| rtt(e).is_some_and(|r| r <= limit))
        .collect();
    trace.note(|| {
        let names: Vec<&str> = kept.iter().map(|&e| view.name(pool, e)).collect();
        format!(
            "latency: priority {top}, fastest {fastest:.1}ms from {region}, sensitivity {sensitivity_ms}ms: [{}]",
            names.join(", ")
        )
    });
    kept
}
