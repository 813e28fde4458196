//! What a prober probes: every enabled endpoint of every enabled, monitored pool whose
//! `check_regions` include the prober's region, under each of the pool's monitors (its
//! `monitor`, or each enabled member of its `monitor_group`), with the settings resolved.

use std::sync::Arc;

use lb_core::config::private::{NetworkIndex, PrivateNetworks};
use lb_core::config::{Address, Config, Monitor};
use lb_core::Region;

/// Identifies a target across config reloads: the same pool, endpoint and monitor settings keep
/// their schedule and debounce state.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TargetKey {
    pub pool: String,
    pub endpoint: String,
    /// The member monitor's name when the pool uses a monitor group; `None` for its `monitor`.
    pub member: Option<String>,
}

impl TargetKey {
    /// The gossip key its results are published under (`mesh::keys::pool_key`).
    pub fn gossip_key(&self) -> String {
        mesh::keys::pool_key(&self.pool, self.member.as_deref())
    }
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
    /// The monitor group the monitor is a member of, when the pool uses one.
    pub group: Option<String>,
    /// The region of the prober that probes it (`None` for `meshlb probe`).
    pub region: Option<Region>,
    /// The bytes of the monitor's TLS files (`Monitor::tls_files`) when the targets were made,
    /// `None` for one that could not be read; shared by the monitor's targets. A reload that
    /// changes them builds the check again.
    pub tls_files: Arc<Vec<Option<Vec<u8>>>>,
    /// A private endpoint's (`virtual_network_id`): reached only through a tunnel.
    pub private: Option<PrivateTarget>,
}

/// Where a private endpoint is: its network, and the config's routes to find its tunnel by.
#[derive(Debug, Clone)]
pub struct PrivateTarget {
    pub network: NetworkIndex,
    pub networks: Arc<PrivateNetworks>,
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
    let tls_files: Vec<Arc<Vec<Option<Vec<u8>>>>> = monitors
        .iter()
        .map(|m| {
            let read = m.tls_files().into_iter().map(|f| std::fs::read(f).ok());
            Arc::new(read.collect())
        })
        .collect();
    let networks = Arc::new(config.private.clone());
    let mut out = Vec::new();
    for pool in &config.pools {
        if !pool.enabled || region.is_some_and(|r| !pool.check_regions.contains(&r)) {
            continue;
        }
        let group = pool
            .monitor_group
            .and_then(|g| config.monitor_groups.get(g))
            .map(|g| g.name.clone());
        for check in &pool.checks {
            let (Some(monitor), Some(files)) =
                (monitors.get(check.monitor), tls_files.get(check.monitor))
            else {
                continue;
            };
            let member = config.check_label(pool, check).map(str::to_string);
            // A probe_zone monitor sends what proxied requests carry: the load balancer's name.
            let zone_host = monitor
                .probe_zone
                .as_deref()
                .filter(|_| monitor.zone_tls.is_some())
                .and_then(|z| {
                    config
                        .pool_by_name(&pool.name)
                        .and_then(|id| config.probe_zone_host(z, id))
                })
                .map(str::to_string);
            let monitor_host = zone_host.or_else(|| monitor_host_header(monitor));
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
                        member: member.clone(),
                    },
                    address: e.address.clone(),
                    port: monitor.kind.resolve_port(e.port),
                    host,
                    monitor: Arc::clone(monitor),
                    tls_files: Arc::clone(files),
                    group: group.clone(),
                    region,
                    private: e.network.map(|network| PrivateTarget {
                        network,
                        networks: Arc::clone(&networks),
                    }),
                });
            }
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

    #[test]
    fn a_group_pool_is_probed_under_each_enabled_member() {
        let config = Config::parse(
            "t.toml",
            r#"
[[monitors]]
name = "http"
[[monitors]]
name = "tcp"
type = "tcp"
port = 8443
[[monitors]]
name = "off"
[[monitor_groups]]
name = "g"
members = [{ monitor = "http" }, { monitor = "tcp", monitoring_only = true }, { monitor = "off", enabled = false }]
[[pools]]
name = "web"
monitor_group = "g"
origins = [{ name = "a", address = "127.0.0.1", port = 8080 }, { name = "b", address = "127.0.0.2" }]
"#,
            &RegionsTable::embedded().expect("regions"),
        )
        .expect("config");
        let t = targets(&config, None);
        let seen: Vec<(&str, Option<&str>, u16)> = t
            .iter()
            .map(|t| (t.key.endpoint.as_str(), t.key.member.as_deref(), t.port))
            .collect();
        assert_eq!(
            seen,
            [
                ("a", Some("http"), 8080),
                ("b", Some("http"), 80),
                ("a", Some("tcp"), 8443),
                ("b", Some("tcp"), 8443),
            ]
        );
        assert!(t.iter().all(|t| t.group.as_deref() == Some("g")));
        assert_ne!(t[0].key.gossip_key(), t[2].key.gossip_key());
    }
}
