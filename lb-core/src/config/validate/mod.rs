//! Raw file -> validated model. Every rule of docs/design.md#configuration-validation lives here, and every violation
//! is reported (file, field path, reason) before anything is rejected.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

mod affinity;
mod layer4;
mod load_balancer;
mod monitor_group;
mod notifications;
mod pool;
pub(crate) mod private;
mod probe_zone;
mod zone;

use super::load_balancer::*;
use super::monitor::*;
use super::monitor_group::*;
use super::pool::*;
use super::raw::*;
use super::Config;
use crate::choice::Choice;
use crate::error::{ConfigErrors, ErrorSink};
use crate::geo::Coordinates;
use crate::region::Region;
use crate::regions_table::{CountryCode, RegionsTable};
use crate::rules::Condition;

/// `sink` already holds the unknown-field errors of the parse.
pub(super) fn validate(
    sink: ErrorSink,
    raw: RawConfig,
    regions: &RegionsTable,
) -> Result<Config, ConfigErrors> {
    let mut v = Validator {
        sink,
        regions,
        monitor_index: HashMap::new(),
        monitor_kinds: HashMap::new(),
        groups: HashMap::new(),
        pool_located: Vec::new(),
        pool_index: HashMap::new(),
        networks: private::Networks::default(),
    };
    // Networks before pools: an endpoint's virtual_network_id is checked against them.
    let private = v.private_networks(&raw.tunnels, &raw.virtual_networks, &raw.routes);
    let mut monitors: Vec<Monitor> = raw
        .monitors
        .iter()
        .enumerate()
        .filter_map(|(i, m)| v.monitor(i, m))
        .collect();
    for m in &monitors {
        if let Some(&i) = v.monitor_index.get(&m.name) {
            v.monitor_kinds.insert(i, m.kind.clone());
        }
    }
    let monitor_groups = v.monitor_groups(&raw.monitor_groups);
    // Pool names first, so that load balancers can refer to any pool.
    for (i, p) in raw.pools.iter().enumerate() {
        if let Some(problem) = name_problem(&p.name) {
            v.sink.push(format!("pools[{i}].name"), problem);
        } else if v.pool_index.insert(p.name.clone(), PoolId(i)).is_some() {
            v.sink.push(
                format!("pools[{i}].name"),
                format!("duplicate pool name `{}`", p.name),
            );
        }
    }
    let pools: Vec<Pool> = raw
        .pools
        .iter()
        .enumerate()
        .map(|(i, p)| v.pool(i, p))
        .collect();
    v.pool_located = pools.iter().map(|p| p.coordinates.is_some()).collect();
    let mut lb_index = HashMap::new();
    let mut load_balancers = Vec::new();
    let mut raw_index = Vec::new();
    for (i, lb) in raw.load_balancers.iter().enumerate() {
        if let Some(lb) = v.load_balancer(i, lb) {
            raw_index.push(i);
            if lb_index
                .insert(lb.name.clone(), LbId(load_balancers.len()))
                .is_some()
            {
                v.sink.push(
                    format!("load_balancers[{i}].name"),
                    format!("duplicate load balancer `{}`", lb.name),
                );
            }
            load_balancers.push(lb);
        }
    }
    let numbered: Vec<(usize, &LoadBalancer)> =
        raw_index.iter().copied().zip(&load_balancers).collect();
    v.layer4_ports(&numbered);
    let zones = v.zones(&raw.zones, &load_balancers);
    v.probe_zones(&mut monitors, &load_balancers, &zones);
    let geolocation = v.geolocation(&raw.geolocation);
    let notifications = v.notifications(&raw.notifications);
    v.pool_emails_have_a_channel(&pools, &notifications);
    let pool_index = v.pool_index;
    let fallback_only = super::fallback_only(pools.len(), &load_balancers);
    v.sink.finish(Config {
        monitors,
        monitor_groups,
        pools,
        load_balancers,
        zones,
        geolocation,
        notifications,
        private,
        pool_index: pool_index.into_iter().collect(),
        lb_index,
        fallback_only,
    })
}

pub(in crate::config) struct Validator<'a> {
    pub(in crate::config) sink: ErrorSink,
    regions: &'a RegionsTable,
    monitor_index: HashMap<String, usize>,
    /// The kind of each valid monitor, by index, for pool-level checks.
    monitor_kinds: HashMap<usize, MonitorKind>,
    /// Valid monitor groups by name: their index and the checks a pool using them runs.
    groups: HashMap<String, (usize, Vec<PoolCheck>)>,
    /// Whether each pool has coordinates, for proximity steering checks.
    pool_located: Vec<bool>,
    pool_index: HashMap<String, PoolId>,
    /// The virtual networks and their routes, for private endpoints.
    networks: private::Networks,
}

impl Validator<'_> {
    /// `raw` as one of `C`'s choices, else an error at `path` naming every choice
    /// (`unknown {what} `x` (expected a, b or c)`) and `fallback`.
    pub(super) fn choice<C: Choice>(
        &mut self,
        path: impl Into<String>,
        what: &str,
        raw: &str,
        fallback: C,
    ) -> C {
        C::parse(raw).unwrap_or_else(|| {
            self.sink.push(
                path,
                format!("unknown {what} `{raw}` (expected {})", C::expected()),
            );
            fallback
        })
    }

    /// [`Validator::choice`], the case of `raw` ignored (cookie attributes, as browsers do).
    pub(super) fn choice_ignoring_case<C: Choice>(
        &mut self,
        path: impl Into<String>,
        what: &str,
        raw: &str,
        fallback: C,
    ) -> C {
        let found = C::ALL
            .iter()
            .copied()
            .find(|c| c.name().eq_ignore_ascii_case(raw));
        match found {
            Some(c) => c,
            None => self.choice(path, what, raw, fallback),
        }
    }

    fn monitor(&mut self, i: usize, m: &RawMonitor) -> Option<Monitor> {
        let path = format!("monitors[{i}]");
        let before = self.sink_len();
        if let Some(problem) = name_problem(&m.name) {
            self.sink.push(format!("{path}.name"), problem);
        } else if self.monitor_index.insert(m.name.clone(), i).is_some() {
            self.sink.push(
                format!("{path}.name"),
                format!("duplicate monitor name `{}`", m.name),
            );
        }
        if !(1..=3600).contains(&m.interval) {
            self.sink.push(
                format!("{path}.interval"),
                format!("must be 1..=3600 seconds (got {})", m.interval),
            );
        }
        if m.timeout < 1 || m.timeout > m.interval.max(1) {
            self.sink.push(
                format!("{path}.timeout"),
                format!(
                    "must be at least 1 second and no longer than the interval ({} s) (got {})",
                    m.interval, m.timeout
                ),
            );
        }
        if m.retries > 5 {
            self.sink.push(
                format!("{path}.retries"),
                format!("must be 0..=5 (got {})", m.retries),
            );
        }
        let port = self.port(&format!("{path}.port"), m.port);
        let kind = self.monitor_kind(&path, m, port)?;
        let threshold = self.threshold(&path, m);
        if self.sink_len() != before {
            return None;
        }
        Some(Monitor {
            name: m.name.clone(),
            description: m.description.clone(),
            kind,
            interval: Duration::from_secs(m.interval),
            timeout: Duration::from_secs(m.timeout),
            retries: m.retries.min(5) as u8,
            consecutive_up: m.consecutive_up.max(1),
            consecutive_down: m.consecutive_down.max(1),
            probe_zone: m.probe_zone.clone(),
            zone_tls: None,
            threshold,
        })
    }

    /// The monitor's type-specific settings: its `type` among [`MonitorType::ALL`], the fields
    /// that type does not take refused, and the type's own validation.
    fn monitor_kind(&mut self, path: &str, m: &RawMonitor, port: u16) -> Option<MonitorKind> {
        let Some(kind) = MonitorType::parse(&m.kind) else {
            self.sink.push(
                format!("{path}.type"),
                format!(
                    "unknown monitor type `{}` (expected one of {})",
                    m.kind,
                    MonitorType::ALL
                        .iter()
                        .map(|t| t.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            );
            return None;
        };
        if !kind.is_http() {
            self.http_fields_refused(path, m);
        }
        if !kind.is_http() {
            self.method_must_be(path, m, kind.method());
        }
        let built = match kind {
            MonitorType::Http => MonitorKind::Http(self.http_check(path, m, port)),
            MonitorType::Https => MonitorKind::Https(self.http_check(path, m, port)),
            MonitorType::Tcp => MonitorKind::Tcp { port },
            // Port 0: each endpoint's own port, which pool validation then requires.
            MonitorType::UdpIcmp => MonitorKind::UdpIcmp { port },
            MonitorType::IcmpPing => MonitorKind::IcmpPing,
            MonitorType::Smtp => MonitorKind::Smtp { port },
            MonitorType::Ldap => MonitorKind::Ldap(self.ldap_check(path, m, port)),
        };
        if m.ldap.is_some() && kind != MonitorType::Ldap {
            self.sink.push(
                format!("{path}.ldap"),
                format!("only applies to ldap monitors, not {}", m.kind),
            );
        }
        if m.ca_file.is_some() && !kind.takes_ca_file() {
            self.sink.push(
                format!("{path}.ca_file"),
                format!("only applies to https and ldap monitors, not {}", m.kind),
            );
        }
        Some(built)
    }

    /// The HTTP fields set on a monitor of another type, each refused by name.
    fn http_fields_refused(&mut self, path: &str, m: &RawMonitor) {
        {
            let http_only = [
                ("expected_codes", m.expected_codes.is_some()),
                ("expected_body", !m.expected_body.is_empty()),
                ("follow_redirects", m.follow_redirects),
                ("header", !m.header.is_empty()),
                ("path", m.path != "/"),
            ];
            for (field, set) in http_only {
                if set {
                    self.sink.push(
                        format!("{path}.{field}"),
                        format!("only applies to http and https monitors, not {}", m.kind),
                    );
                }
            }
        }
    }

    fn threshold(&mut self, path: &str, m: &RawMonitor) -> Threshold {
        let consecutive = Threshold::Consecutive {
            up: m.consecutive_up.max(1),
            down: m.consecutive_down.max(1),
        };
        let Some(t) = &m.threshold else {
            return consecutive;
        };
        let tpath = format!("{path}.threshold");
        let mode = self.choice(
            format!("{tpath}.mode"),
            "mode",
            &t.mode,
            ThresholdMode::Consecutive,
        );
        let mut positive = |field: &str, value: Option<u32>, default: u32| {
            let v = value.unwrap_or(default);
            if !(1..=1000).contains(&v) {
                self.sink.push(
                    format!("{tpath}.{field}"),
                    format!("must be 1..=1000 (got {v})"),
                );
            }
            v
        };
        let (window_fields, counter_fields) = (
            t.sample_size.is_some() || t.successful_samples_required.is_some(),
            t.down_thresh.is_some() || t.ok_thresh.is_some() || t.up_thresh.is_some(),
        );
        match mode {
            ThresholdMode::Consecutive => {
                if window_fields || counter_fields {
                    self.sink.push(&tpath, "consecutive mode takes consecutive_up/consecutive_down on the monitor, no other threshold fields");
                }
                consecutive
            }
            ThresholdMode::Window => {
                // Azure Front Door's defaults: 3 of the last 4.
                let sample_size = positive("sample_size", t.sample_size, 4);
                let required = positive(
                    "successful_samples_required",
                    t.successful_samples_required,
                    3,
                );
                if required > sample_size {
                    self.sink.push(
                        format!("{tpath}.successful_samples_required"),
                        format!("cannot exceed sample_size ({sample_size})"),
                    );
                }
                if counter_fields {
                    self.sink.push(
                        &tpath,
                        "down_thresh/ok_thresh/up_thresh belong to counter mode",
                    );
                }
                Threshold::Window {
                    sample_size,
                    required,
                }
            }
            ThresholdMode::Counter => {
                // gdnsd's defaults.
                let down_thresh = positive("down_thresh", t.down_thresh, 10);
                let ok_thresh = positive("ok_thresh", t.ok_thresh, 10);
                let up_thresh = positive("up_thresh", t.up_thresh, 20);
                if window_fields {
                    self.sink.push(
                        &tpath,
                        "sample_size/successful_samples_required belong to window mode",
                    );
                }
                Threshold::Counter {
                    down_thresh,
                    ok_thresh,
                    up_thresh,
                }
            }
        }
    }

    fn sink_len(&self) -> usize {
        self.sink.len()
    }

    fn method_must_be(&mut self, path: &str, m: &RawMonitor, allowed: Option<&str>) {
        if let Some(method) = &m.method {
            if Some(method.as_str()) != allowed {
                let expected = allowed.map_or_else(
                    || "leave it unset".to_string(),
                    |a| format!("`{a}` or leave it unset"),
                );
                self.sink.push(
                    format!("{path}.method"),
                    format!(
                        "`{method}` is not a method of {} monitors: {expected}",
                        m.kind
                    ),
                );
            }
        }
    }

    pub(in crate::config) fn headers(
        &mut self,
        path: &str,
        raw: &BTreeMap<String, HeaderValues>,
        host_only: bool,
    ) -> Vec<(String, Vec<String>)> {
        let mut out = Vec::new();
        for (name, values) in raw {
            let values = values.clone().into_vec();
            let hpath = format!("{path}.{name}");
            if name.is_empty()
                || !name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
            {
                self.sink.push(&hpath, "is not a valid HTTP header name");
            } else if host_only && !name.eq_ignore_ascii_case("host") {
                self.sink.push(
                    &hpath,
                    "endpoints override only the Host header (Cloudflare's rule)",
                );
            }
            if values.is_empty() || (host_only && values.len() != 1) {
                self.sink.push(&hpath, "needs exactly one value");
            }
            if values.iter().any(|v| v.contains(['\r', '\n'])) {
                self.sink
                    .push(&hpath, "header values must not contain line breaks");
            }
            out.push((name.clone(), values));
        }
        out
    }

    fn port(&mut self, path: &str, port: u32) -> u16 {
        match u16::try_from(port) {
            Ok(p) => p,
            Err(_) => {
                self.sink
                    .push(path, format!("must be 0..=65535 (got {port})"));
                0
            }
        }
    }
}

/// Names end up in cookies, gossip keys and metric labels: keep them short and printable.
pub(super) fn name_problem(name: &str) -> Option<&'static str> {
    if name.trim().is_empty() {
        Some("must not be empty")
    } else if name.len() > 255 {
        Some("must be at most 255 bytes")
    } else if name.chars().any(char::is_control) {
        Some("must not contain control characters")
    } else {
        None
    }
}

/// RFC 1123 host name: labels of letters, digits and hyphens, 1..=63 bytes, 253 in all.
pub(super) fn is_hostname(s: &str) -> bool {
    let s = s.trim_end_matches('.');
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
        // An all-numeric name is a mistyped address, not a host.
        && !s.split('.').all(|l| l.bytes().all(|b| b.is_ascii_digit()))
}
