//! `meshlb.toml`: monitors, pools and load balancers, validated into types that cannot hold a
//! dangling reference or an out-of-range value. See `validate.rs` for every rule.

pub mod document;
mod incremental;
mod layer4;
#[cfg(test)]
mod layer4_tests;
mod load_balancer;
mod monitor;
mod monitor_group;
mod notifications;
mod pool;
pub mod private;
#[cfg(test)]
mod probe_zone_tests;
mod raw;
pub mod references;
mod renumbering;
mod sections;
mod validate;
mod zone;

use std::collections::HashMap;

pub use incremental::IncrementalParser;
pub use layer4::{Layer4, PortMap, ProxyProtocol, Transport, MAX_LAYER4_PORTS};
pub use load_balancer::{
    AdaptiveRouting, AffinityKind, ClientCertFiles, FixedResponse, LbId, LoadBalancer,
    LocationMode, LocationStrategy, OriginTls, OriginTlsSettings, Overrides, PreferEcs,
    RandomSteering, Rule, RuleAction, SameSite, Secure, SessionAffinity, SteeringPolicy,
    SteeringSettings, ZeroDowntimeFailover,
};
pub use monitor::{
    CodesError, ExpectedCodes, HttpCheck, HttpMethod, LdapCheck, LdapScheme, Monitor, MonitorKind,
    MonitorType, SecretError, SecretSource, Threshold, ThresholdMode,
};
pub use monitor_group::{GroupMember, MemberRole, MonitorGroup, PoolCheck, MAX_GROUP_MEMBERS};
pub use notifications::{
    EmailChannel, KindFilter, NotificationFilter, Notifications, SmtpTls, WebhookChannel,
};
pub use pool::{
    Address, Endpoint, EndpointId, HealthSources, LoadShedding, OriginPolicy, OriginSteering, Pool,
    PoolId, ShedPolicy,
};
pub use renumbering::Renumbering;
pub use zone::{GeoNetwork, Geolocation, Zone};

use crate::error::{parse_toml_strict, ConfigError, ConfigErrors};
use crate::regions_table::RegionsTable;

/// A validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub monitors: Vec<Monitor>,
    /// `[[monitor_groups]]`: monitors combined into one verdict per endpoint.
    pub monitor_groups: Vec<MonitorGroup>,
    pub pools: Vec<Pool>,
    pub load_balancers: Vec<LoadBalancer>,
    /// `[[zones]]`; empty: every load balancer is the apex of its own zone.
    pub zones: Vec<Zone>,
    pub geolocation: Geolocation,
    /// `[notifications]`: email and webhook channels for health changes.
    pub notifications: Notifications,
    /// `[[tunnels]]`, `[[virtual_networks]]`, `[[routes]]`: private endpoints' reach.
    pub private: private::PrivateNetworks,
    pool_index: HashMap<String, PoolId>,
    lb_index: HashMap<String, LbId>,
    /// `fallback_only[pool]`: the pool serves only as a fallback pool (`Config::fallback_only`).
    fallback_only: Vec<bool>,
}

/// For each of `pools` pools: whether some load balancer (or one of its rules) names it as its
/// fallback pool and none routes to it otherwise (default, region, country or PoP pools).
fn fallback_only(pools: usize, load_balancers: &[LoadBalancer]) -> Vec<bool> {
    let (mut fallback, mut routed) = (vec![false; pools], vec![false; pools]);
    for lb in load_balancers {
        let overridden = lb.rules.iter().filter_map(|r| match &r.action {
            RuleAction::Overrides(o) => {
                let mut settings = lb.settings.clone();
                o.apply_to(&mut settings);
                Some(settings)
            }
            RuleAction::FixedResponse(_) => None,
        });
        for settings in std::iter::once(lb.settings.clone()).chain(overridden) {
            if let Some(f) = settings.fallback_pool {
                if let Some(slot) = fallback.get_mut(f.0) {
                    *slot = true;
                }
            }
            let maps = settings
                .region_pools
                .values()
                .chain(settings.country_pools.values())
                .chain(settings.pop_pools.values());
            for p in settings.default_pools.iter().chain(maps.flatten()) {
                if let Some(slot) = routed.get_mut(p.0) {
                    *slot = true;
                }
            }
        }
    }
    fallback
        .iter()
        .zip(&routed)
        .map(|(&f, &r)| f && !r)
        .collect()
}

impl Config {
    /// Parses and validates configuration text; `file` names it in errors.
    pub fn parse(file: &str, text: &str, regions: &RegionsTable) -> Result<Config, ConfigErrors> {
        let whole = Self::parse_whole(file, text, regions);
        // Every config text a test of this crate parses also checks that the section-wise
        // parse (`incremental.rs`) comes to the same config or the same errors.
        #[cfg(test)]
        incremental::assert_same_as_whole(file, text, regions, &whole);
        whole
    }

    fn parse_whole(file: &str, text: &str, regions: &RegionsTable) -> Result<Config, ConfigErrors> {
        let (raw, sink): (raw::RawConfig, _) = parse_toml_strict(file, text)?;
        validate::validate(sink, raw, regions)
    }

    /// Reads, parses and validates a file.
    pub fn load(path: &std::path::Path, regions: &RegionsTable) -> Result<Config, ConfigErrors> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| {
            ConfigErrors(vec![ConfigError {
                file: file.clone(),
                path: String::new(),
                reason: format!("cannot read the file: {e}"),
            }])
        })?;
        Self::parse(&file, &text, regions)
    }

    /// Every file this config names whose bytes a node reads as it builds what serves it: the
    /// geolocation database, the origins' CA and client certificates, the email channels'
    /// CAs and the monitors' TLS files (`Monitor::tls_files`). A reload of an unchanged text
    /// still builds again when one of them changed. Secrets are not among them: they are read
    /// at every use.
    pub fn named_files(&self) -> Vec<&std::path::Path> {
        let mut files: Vec<&std::path::Path> = Vec::new();
        files.extend(self.geolocation.database.as_deref());
        for lb in &self.load_balancers {
            files.extend(lb.origin_ca_file.as_deref());
            if let Some(c) = &lb.origin_client_cert {
                files.extend([c.cert.as_path(), c.key.as_path()]);
            }
        }
        for email in &self.notifications.email {
            files.extend(email.ca_file.as_deref());
        }
        for monitor in &self.monitors {
            files.extend(monitor.tls_files());
        }
        files.sort();
        files.dedup();
        files
    }

    /// The monitor of a pool's check (see [`Pool::checks`]).
    pub fn check_monitor(&self, check: &PoolCheck) -> &Monitor {
        &self.monitors[check.monitor]
    }

    /// The name a check's results are known by in gossip and in `/status`: `None` for a
    /// pool's own `monitor`, the member monitor's name for a group's.
    pub fn check_label(&self, pool: &Pool, check: &PoolCheck) -> Option<&str> {
        pool.monitor_group
            .map(|_| self.check_monitor(check).name.as_str())
    }

    pub fn pool(&self, id: PoolId) -> &Pool {
        &self.pools[id.0]
    }

    /// Whether the pool serves only as a fallback pool: its state is never consulted, and it
    /// is shown as `no_health` (Cloudflare's dashboard: "No health: reserved for the Fallback Pool";
    /// docs/design.md#the-fallback-pool).
    pub fn fallback_only(&self, pool: PoolId) -> bool {
        self.fallback_only.get(pool.0).copied().unwrap_or(false)
    }

    pub fn pool_by_name(&self, name: &str) -> Option<PoolId> {
        self.pool_index.get(name).copied()
    }

    /// Finds a load balancer by hostname, case-insensitively and ignoring a trailing dot.
    pub fn load_balancer(&self, name: &str) -> Option<&LoadBalancer> {
        self.load_balancer_id(name).map(|id| self.lb(id))
    }

    /// The index of a load balancer by hostname, as [`Config::load_balancer`] finds it.
    pub fn load_balancer_id(&self, name: &str) -> Option<LbId> {
        let key = name.trim_end_matches('.').to_ascii_lowercase();
        self.lb_index.get(&key).copied()
    }

    pub fn lb(&self, id: LbId) -> &LoadBalancer {
        &self.load_balancers[id.0]
    }

    /// Every load balancer with its index.
    pub fn lbs(&self) -> impl Iterator<Item = (LbId, &LoadBalancer)> {
        self.load_balancers
            .iter()
            .enumerate()
            .map(|(i, lb)| (LbId(i), lb))
    }

    /// The Host a `probe_zone` monitor sends for `pool` (`validate/probe_zone.rs`): the name
    /// of the zone's first proxied HTTP load balancer that can send traffic to the pool, else
    /// of the zone's first proxied HTTP load balancer.
    pub fn probe_zone_host(&self, zone: &str, pool: PoolId) -> Option<&str> {
        let zone = zone.trim_end_matches('.').to_ascii_lowercase();
        let zone = self.zones.iter().find(|z| z.name == zone)?;
        let mut proxied = self
            .load_balancers
            .iter()
            .filter(|lb| lb.proxied_http() && zone.contains(&lb.name));
        let first = proxied.clone().next()?;
        let serving = proxied.find(|lb| lb.settings.uses_pool(pool));
        Some(serving.unwrap_or(first).name.as_str())
    }

    pub fn endpoint_count(&self) -> usize {
        self.pools.iter().map(|p| p.endpoints.len()).sum()
    }
}

#[cfg(test)]
mod reference_tests;
#[cfg(test)]
mod tests;
