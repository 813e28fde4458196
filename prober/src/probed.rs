//! One target probed once: which target, by which monitor, and the result. What `meshlb probe`
//! prints (`once.rs`), what a preview publishes (`preview.rs`), and the heart of every
//! scheduled report (`sink.rs`'s `ProbeReport`, which adds the debounced state).

use lb_core::config::MemberRole;
use serde::Serialize;

use crate::{ProbeResult, ProbeTarget};

/// One target's probe.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Probed {
    pub pool: String,
    pub endpoint: String,
    pub address: String,
    pub port: u16,
    pub monitor: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The monitor group `monitor` is a member of, when the pool uses one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The member's role in its group: decides, must_be_healthy or monitoring_only (given by
    /// `meshlb probe` and previews, which read the config; scheduled reports leave it out).
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "role_name")]
    pub role: Option<MemberRole>,
    #[serde(flatten)]
    pub result: ProbeResult,
}

impl Probed {
    /// `target`'s probe with `result`.
    pub fn new(target: &ProbeTarget, role: Option<MemberRole>, result: ProbeResult) -> Probed {
        Probed {
            pool: target.key.pool.clone(),
            endpoint: target.key.endpoint.clone(),
            address: target.address.to_string(),
            port: target.port,
            monitor: target.monitor.name.clone(),
            kind: target.monitor.kind.type_name(),
            group: target.group.clone(),
            role,
            result,
        }
    }
}

fn role_name<S: serde::Serializer>(role: &Option<MemberRole>, s: S) -> Result<S::Ok, S::Error> {
    match role {
        Some(r) => s.serialize_str(r.name()),
        None => s.serialize_none(),
    }
}
