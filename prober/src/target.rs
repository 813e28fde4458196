//! What a prober probes: every enabled endpoint of every enabled, monitored pool whose
//! `check_regions` include the prober's region, with the monitor's settings resolved.

use std::sync::Arc;

use lb_core::config::{Address, Config, Monitor};
use lb_core::Region;

/// Identifies a target across config reloads: the same pool, endpoint and monitor settings keep
/// their schedule and debounce state.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TargetKey {
    pub pool: String,
    pub endpoint: String,
}

/// One endpoint under one monitor.
#[derive(Debug, Clone)]
pub struct ProbeTarget {
    pub key: TargetKey,
    pub address: Address,
    /// Resolved: the monitor's port, else the endpoint's, else the protocol default.
    pub port: u16,
    /// Host precedence (Cloudflare): the endpoint's `header.Host`, else the monitor's, else
    /// the address.
    pub host: String,
    pub monitor: Arc<Monitor>,
    /// The region of the prober that probes it (`None` for `meshlb probe`).
    pub region: Option<Region>,
}

impl ProbeTarget {
    /// The User-Agent of HTTP probes, naming meshlb, the pool (Cloudflare names the pool too)
    /// and the prober's region, so an origin's logs tell which region probed.
    pub fn user_agent(&self) -> String {
        match self.region {
            Some(r) => format!(
                "meshlb-prober/{} (pool {}; region {})",
                env!("CARGO_PKG_VERSION"),
                self.key.pool,
                r.code()
            ),
            None => format!(
                "meshlb-prober/{} (pool {})",
                env!("CARGO_PKG_VERSION"),
                self.key.pool
            ),
        }
    }
}

/// The targets of a prober in `region` (`None`: every target, as `meshlb probe` does).
pub fn targets(config: &Config, region: Option<Region>) -> Vec<ProbeTarget> {
    let monitors: Vec<Arc<Monitor>> = config.monitors.iter().cloned().map(Arc::new).collect();
    let mut out = Vec::new();
    for pool in &config.pools {
        let Some(monitor) = pool.monitor.and_then(|m| monitors.get(m)) else {
            continue;
        };
        if !pool.enabled || region.is_some_and(|r| !pool.check_regions.contains(&r)) {
            continue;
        }
        let monitor_host = monitor_host_header(monitor);
        for e in pool.endpoints.iter().filter(|e| e.enabled) {
            let host = e
                .host_header
                .clone()
                .or_else(|| monitor_host.clone())
                .unwrap_or_else(|| e.address.to_string());
            out.push(ProbeTarget {
                key: TargetKey {
                    pool: pool.name.clone(),
                    endpoint: e.name.clone(),
                },
                address: e.address.clone(),
                port: monitor.kind.resolve_port(e.port),
                host,
                monitor: Arc::clone(monitor),
                region,
            });
        }
    }
    out
}

fn monitor_host_header(m: &Monitor) -> Option<String> {
    use lb_core::config::MonitorKind;
    match &m.kind {
        MonitorKind::Http(h) | MonitorKind::Https(h) => h
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("host"))
            .and_then(|(_, v)| v.first().cloned()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lb_core::RegionsTable;

    #[test]
    fn the_user_agent_names_the_pool_and_the_probing_region() {
        let config = Config::parse(
            "t.toml",
            "[[monitors]]\nname = \"m\"\n[[pools]]\nname = \"web\"\nmonitor = \"m\"\norigins = [{ name = \"a\", address = \"127.0.0.1\" }]\n",
            &RegionsTable::embedded().expect("regions"),
        )
        .expect("config");
        let ua = |region| targets(&config, region)[0].user_agent();
        assert!(ua(Some(Region::Seas)).ends_with("(pool web; region SEAS)"));
        assert!(
            ua(None).ends_with("(pool web)"),
            "meshlb probe has no region"
        );
    }
}
