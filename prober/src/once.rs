//! Each selected target probed once, now, outside any schedule: what `meshlb probe` prints
//! before an operator trusts a monitor with traffic. For a pool with a monitor group every
//! enabled member is probed, and [`group_verdicts`] gives the verdict the group would reach on
//! each endpoint if these results were everyone's (`lb_core::group_verdict`).

use std::time::Duration;

use lb_core::config::{Config, MemberRole};
use serde::Serialize;

use crate::monitors::{check_for, probe, Dialer, IcmpClients};
pub use crate::probed::Probed;
use crate::{Attempt, Failure, ProbeResult, ProbeTarget};

/// What a monitor group makes of one endpoint's member results.
#[derive(Debug, Serialize)]
pub struct GroupVerdict {
    pub pool: String,
    pub endpoint: String,
    pub group: String,
    pub group_verdict: &'static str,
}

/// The role of `t`'s monitor in its pool's group, when the pool has one.
fn role(config: &Config, t: &ProbeTarget) -> Option<MemberRole> {
    t.group.as_ref()?;
    let pool = config.pool(config.pool_by_name(&t.key.pool)?);
    pool.checks
        .iter()
        .find(|c| config.check_monitor(c).name == t.monitor.name)
        .map(|c| c.role)
}

/// Probes every target of `config` in `targets` once, all at once. Private endpoints fail
/// as `no_tunnel`: `meshlb probe` is no member of the mesh, and knows no tunnel.
pub async fn probe_once(config: &Config, targets: &[ProbeTarget]) -> Vec<Probed> {
    let icmp = IcmpClients::new();
    let dial = Dialer::direct();
    let probes = targets.iter().map(|t| {
        let check = check_for(&t.monitor, &icmp, &dial);
        async move {
            match check {
                Ok(c) => probe(c.as_ref(), t).await,
                Err(e) => ProbeResult {
                    attempt: Attempt::fail(Duration::ZERO, None, Failure::Setup(e.to_string())),
                    tries: 0,
                },
            }
        }
    });
    let results = futures::future::join_all(probes).await;
    targets
        .iter()
        .zip(results)
        .map(|(t, result)| Probed::new(t, role(config, t), result))
        .collect()
}

/// One verdict per endpoint of a group pool: the group's over the members' results.
pub fn group_verdicts(probed: &[Probed]) -> Vec<GroupVerdict> {
    let mut out: Vec<GroupVerdict> = Vec::new();
    for r in probed {
        let Some(group) = &r.group else { continue };
        if out
            .iter()
            .any(|g| g.pool == r.pool && g.endpoint == r.endpoint)
        {
            continue;
        }
        let members = probed
            .iter()
            .filter(|o| o.pool == r.pool && o.endpoint == r.endpoint)
            .filter_map(|o| Some((o.role?, Some(o.result.attempt.passed))));
        out.push(GroupVerdict {
            pool: r.pool.clone(),
            endpoint: r.endpoint.clone(),
            group: group.clone(),
            group_verdict: match lb_core::group_verdict::group_verdict(members) {
                Some(true) => "healthy",
                Some(false) => "unhealthy",
                None => "unknown",
            },
        });
    }
    out
}
