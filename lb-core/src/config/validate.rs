//! Raw file -> validated model. Every rule of DESIGN section 2 lives here, and every violation
//! is reported (file, field path, reason) before anything is rejected.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;
use std::time::Duration;

use super::load_balancer::*;
use super::monitor::*;
use super::pool::*;
use super::raw::*;
use super::Config;
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
        pool_index: HashMap::new(),
    };
    let monitors: Vec<Monitor> = raw
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
    // Pool names first, so that load balancers can refer to any pool.
    for (i, p) in raw.pools.iter().enumerate() {
        if p.name.trim().is_empty() {
            v.sink.push(format!("pools[{i}].name"), "must not be empty");
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
    let mut lb_index = HashMap::new();
    let mut load_balancers = Vec::new();
    for (i, lb) in raw.load_balancers.iter().enumerate() {
        if let Some(lb) = v.load_balancer(i, lb) {
            if lb_index
                .insert(lb.name.clone(), load_balancers.len())
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
    let pool_index = v.pool_index;
    v.sink.finish(Config {
        monitors,
        pools,
        load_balancers,
        pool_index: pool_index.into_iter().collect(),
        lb_index,
    })
}

struct Validator<'a> {
    sink: ErrorSink,
    regions: &'a RegionsTable,
    monitor_index: HashMap<String, usize>,
    /// The kind of each valid monitor, by index, for pool-level checks.
    monitor_kinds: HashMap<usize, MonitorKind>,
    pool_index: HashMap<String, PoolId>,
}

const MONITOR_TYPES: &str = "http, https, tcp, udp_icmp, icmp_ping, smtp, ldap";

impl Validator<'_> {
    fn monitor(&mut self, i: usize, m: &RawMonitor) -> Option<Monitor> {
        let path = format!("monitors[{i}]");
        let before = self.sink_len();
        if m.name.trim().is_empty() {
            self.sink.push(format!("{path}.name"), "must not be empty");
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
        let is_http = matches!(m.kind.as_str(), "http" | "https");
        if !is_http {
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
        let kind = match m.kind.as_str() {
            "http" | "https" => {
                let check = self.http_check(&path, m, port);
                if m.kind == "http" {
                    MonitorKind::Http(check)
                } else {
                    MonitorKind::Https(check)
                }
            }
            "tcp" => {
                self.method_must_be(&path, m, Some("connection_established"));
                MonitorKind::Tcp { port }
            }
            "udp_icmp" => {
                self.method_must_be(&path, m, None);
                // Port 0: each endpoint's own port, which pool validation then requires.
                MonitorKind::UdpIcmp { port }
            }
            "icmp_ping" => {
                self.method_must_be(&path, m, None);
                MonitorKind::IcmpPing
            }
            "smtp" => {
                self.method_must_be(&path, m, None);
                MonitorKind::Smtp { port }
            }
            "ldap" => {
                self.method_must_be(&path, m, None);
                MonitorKind::Ldap(self.ldap_check(&path, m, port))
            }
            other => {
                self.sink.push(
                    format!("{path}.type"),
                    format!("unknown monitor type `{other}` (expected one of {MONITOR_TYPES})"),
                );
                return None;
            }
        };
        if m.ldap.is_some() && m.kind != "ldap" {
            self.sink.push(
                format!("{path}.ldap"),
                format!("only applies to ldap monitors, not {}", m.kind),
            );
        }
        if m.ca_file.is_some() && !matches!(m.kind.as_str(), "https" | "ldap") {
            self.sink.push(
                format!("{path}.ca_file"),
                format!("only applies to https and ldap monitors, not {}", m.kind),
            );
        }
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
            threshold,
        })
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
        match t.mode.as_str() {
            "consecutive" => {
                if window_fields || counter_fields {
                    self.sink.push(&tpath, "consecutive mode takes consecutive_up/consecutive_down on the monitor, no other threshold fields");
                }
                consecutive
            }
            "window" => {
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
            "counter" => {
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
            other => {
                self.sink.push(
                    format!("{tpath}.mode"),
                    format!("unknown mode `{other}` (expected consecutive, window or counter)"),
                );
                consecutive
            }
        }
    }

    fn ldap_check(&mut self, path: &str, m: &RawMonitor, port: u16) -> LdapCheck {
        let lpath = format!("{path}.ldap");
        let (tls, bind, search_dn) = match &m.ldap {
            None => (false, None, None),
            Some(l) => {
                let tls = match l.scheme.as_str() {
                    "ldap" => false,
                    "ldaps" => true,
                    other => {
                        self.sink.push(
                            format!("{lpath}.scheme"),
                            format!("unknown scheme `{other}` (expected ldap or ldaps)"),
                        );
                        false
                    }
                };
                let secret = match (&l.password_file, &l.password_env) {
                    (Some(f), None) => Some(SecretSource::File(f.into())),
                    (None, Some(e)) => Some(SecretSource::Env(e.clone())),
                    (None, None) => None,
                    (Some(_), Some(_)) => {
                        self.sink
                            .push(&lpath, "give password_file or password_env, not both");
                        None
                    }
                };
                let bind = match (&l.bind_dn, secret) {
                    (Some(dn), Some(secret)) => Some((dn.clone(), secret)),
                    (None, None) => None,
                    (Some(_), None) => {
                        self.sink.push(format!("{lpath}.bind_dn"), "a DN bind needs password_file or password_env (passwords never sit in the config)");
                        None
                    }
                    (None, Some(_)) => {
                        self.sink.push(format!("{lpath}.bind_dn"), "a password without bind_dn: set the DN, or drop the password for an anonymous bind");
                        None
                    }
                };
                (tls, bind, l.search_dn.clone())
            }
        };
        LdapCheck {
            port,
            tls,
            bind,
            search_dn,
            allow_insecure: m.allow_insecure,
            ca_file: m.ca_file.as_ref().map(Into::into),
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

    fn http_check(&mut self, path: &str, m: &RawMonitor, port: u16) -> HttpCheck {
        let method = match m.method.as_deref().map(str::to_ascii_uppercase).as_deref() {
            None | Some("GET") => HttpMethod::Get,
            Some("HEAD") => HttpMethod::Head,
            Some(_) => {
                self.sink.push(
                    format!("{path}.method"),
                    "HTTP monitors use GET or HEAD (Cloudflare's choice: probes must not change state)",
                );
                HttpMethod::Get
            }
        };
        if !m.path.starts_with('/') {
            self.sink
                .push(format!("{path}.path"), "must start with `/`");
        }
        let expected_codes =
            match ExpectedCodes::parse(m.expected_codes.as_deref().unwrap_or("200")) {
                Ok(c) => c,
                Err(e) => {
                    self.sink.push(format!("{path}.expected_codes"), e);
                    ExpectedCodes::default()
                }
            };
        let headers = self.headers(&format!("{path}.header"), &m.header, false);
        HttpCheck {
            method,
            path: m.path.clone(),
            port,
            headers,
            expected_codes,
            expected_body: (!m.expected_body.is_empty()).then(|| m.expected_body.clone()),
            follow_redirects: m.follow_redirects,
            allow_insecure: m.allow_insecure,
            ca_file: m.ca_file.as_ref().map(Into::into),
        }
    }

    fn headers(
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

    fn pool(&mut self, i: usize, p: &RawPool) -> Pool {
        let path = format!("pools[{i}]");
        let monitor = p.monitor.as_ref().and_then(|name| {
            let found = self.monitor_index.get(name).copied();
            if found.is_none() {
                self.sink.push(
                    format!("{path}.monitor"),
                    format!("no monitor is named `{name}`"),
                );
            }
            found
        });
        let check_regions = match &p.check_regions {
            None => Region::ALL.to_vec(),
            Some(list) if list.is_empty() => {
                self.sink.push(
                    format!("{path}.check_regions"),
                    "must name at least one region, or be left unset for all regions",
                );
                Vec::new()
            }
            Some(list) => {
                let mut out = Vec::new();
                for (j, r) in list.iter().enumerate() {
                    if r == "ALL_REGIONS" {
                        out = Region::ALL.to_vec();
                        break;
                    }
                    match r.parse::<Region>() {
                        Ok(r) if !out.contains(&r) => out.push(r),
                        Ok(_) => {}
                        Err(e) => self
                            .sink
                            .push(format!("{path}.check_regions[{j}]"), e.to_string()),
                    }
                }
                out
            }
        };
        let coordinates = match (p.latitude, p.longitude) {
            (None, None) => None,
            (Some(lat), Some(lon)) => {
                let c = Coordinates::new(lat, lon);
                if !c.is_valid() {
                    self.sink.push(
                        format!("{path}.latitude"),
                        "latitude must be within -90..90 and longitude within -180..180",
                    );
                }
                Some(c)
            }
            _ => {
                self.sink.push(
                    format!("{path}.latitude"),
                    "latitude and longitude must be given together",
                );
                None
            }
        };
        if p.origins.is_empty() {
            self.sink.push(
                format!("{path}.origins"),
                "a pool needs at least one endpoint",
            );
        }
        let mut names = HashSet::new();
        let endpoints: Vec<Endpoint> = p
            .origins
            .iter()
            .enumerate()
            .map(|(j, e)| {
                let epath = format!("{path}.origins[{j}]");
                if !names.insert(e.name.as_str()) {
                    self.sink.push(
                        format!("{epath}.name"),
                        format!("duplicate endpoint name `{}` in pool `{}`", e.name, p.name),
                    );
                }
                self.endpoint(&epath, e)
            })
            .collect();
        if let Some(MonitorKind::UdpIcmp { port: 0 }) =
            monitor.and_then(|m| self.monitor_kinds.get(&m))
        {
            for (j, e) in endpoints.iter().enumerate() {
                if e.port == 0 {
                    self.sink.push(
                        format!("{path}.origins[{j}].port"),
                        "the pool's udp_icmp monitor has no port, so each endpoint needs its UDP port",
                    );
                }
            }
        }
        if p.minimum_origins < 1 || p.minimum_origins as usize > endpoints.len().max(1) {
            self.sink.push(
                format!("{path}.minimum_origins"),
                format!(
                    "must be 1..={} (the pool's endpoint count) (got {})",
                    endpoints.len().max(1),
                    p.minimum_origins
                ),
            );
        }
        let load_shedding = p
            .load_shedding
            .as_ref()
            .map(|s| self.load_shedding(&format!("{path}.load_shedding"), s))
            .unwrap_or_default();
        let origin_steering = p
            .origin_steering
            .as_ref()
            .map(|s| {
                let policy = match s.policy.as_str() {
                    "random" => OriginPolicy::Random,
                    "hash" => OriginPolicy::Hash,
                    "least_outstanding_requests" => OriginPolicy::LeastOutstandingRequests,
                    "least_connections" => OriginPolicy::LeastConnections,
                    "latency" => OriginPolicy::Latency,
                    other => {
                        self.sink.push(
                            format!("{path}.origin_steering.policy"),
                            format!("unknown policy `{other}` (expected random, hash, least_outstanding_requests, least_connections or latency)"),
                        );
                        OriginPolicy::Random
                    }
                };
                OriginSteering {
                    policy,
                    latency_sensitivity_ms: s.latency_sensitivity_ms,
                }
            })
            .unwrap_or_default();
        let health_sources = match p.health_sources.as_deref() {
            None => HealthSources::Global,
            Some([g]) if g == "global" => HealthSources::Global,
            Some([r, g]) if r == "regional" && g == "global" => HealthSources::RegionalThenGlobal,
            Some(_) => {
                self.sink.push(
                    format!("{path}.health_sources"),
                    r#"must be ["global"] or ["regional", "global"]"#,
                );
                HealthSources::Global
            }
        };
        Pool {
            name: p.name.clone(),
            description: p.description.clone(),
            enabled: p.enabled,
            minimum_origins: p.minimum_origins,
            monitor,
            check_regions,
            coordinates,
            endpoints,
            load_shedding,
            origin_steering,
            health_sources,
        }
    }

    fn endpoint(&mut self, path: &str, e: &RawEndpoint) -> Endpoint {
        if e.name.trim().is_empty() {
            self.sink.push(format!("{path}.name"), "must not be empty");
        }
        let address = match e.address.parse::<IpAddr>() {
            Ok(ip) => Address::Ip(ip),
            Err(_) if is_hostname(&e.address) => {
                Address::Hostname(e.address.trim_end_matches('.').to_ascii_lowercase())
            }
            Err(_) => {
                self.sink.push(
                    format!("{path}.address"),
                    format!("`{}` is neither an IP address nor a hostname", e.address),
                );
                Address::Hostname(String::new())
            }
        };
        let port = self.port(&format!("{path}.port"), e.port);
        if !(0.0..=1.0).contains(&e.weight) {
            self.sink.push(
                format!("{path}.weight"),
                format!("must be between 0 and 1 (got {})", e.weight),
            );
        }
        if !(1..=5).contains(&e.priority) {
            self.sink.push(
                format!("{path}.priority"),
                format!("must be 1..=5 (got {})", e.priority),
            );
        }
        let headers = self.headers(&format!("{path}.header"), &e.header, true);
        let host_header = headers.into_iter().next().and_then(|(_, mut v)| v.pop());
        Endpoint {
            name: e.name.clone(),
            address,
            port,
            enabled: e.enabled,
            weight: e.weight.clamp(0.0, 1.0),
            priority: e.priority.clamp(1, 5) as u8,
            host_header,
        }
    }

    fn load_shedding(&mut self, path: &str, s: &RawLoadShedding) -> LoadShedding {
        for (field, value) in [
            ("default_percent", s.default_percent),
            ("session_percent", s.session_percent),
        ] {
            if !(0.0..=100.0).contains(&value) {
                self.sink.push(
                    format!("{path}.{field}"),
                    format!("must be 0..=100 (got {value})"),
                );
            }
        }
        let mut policy = |field: &str, v: &str| match v {
            "random" => ShedPolicy::Random,
            "hash" => ShedPolicy::Hash,
            other => {
                self.sink.push(
                    format!("{path}.{field}"),
                    format!("unknown policy `{other}` (expected random or hash)"),
                );
                ShedPolicy::Random
            }
        };
        LoadShedding {
            default_percent: s.default_percent.clamp(0.0, 100.0),
            default_policy: policy("default_policy", &s.default_policy),
            session_percent: s.session_percent.clamp(0.0, 100.0),
            session_policy: policy("session_policy", &s.session_policy),
        }
    }

    fn load_balancer(&mut self, i: usize, lb: &RawLoadBalancer) -> Option<LoadBalancer> {
        let path = format!("load_balancers[{i}]");
        let name = lb.name.trim_end_matches('.').to_ascii_lowercase();
        if !is_hostname(&name) {
            self.sink.push(
                format!("{path}.name"),
                format!("`{}` is not a hostname", lb.name),
            );
        }
        if lb.default_pools.is_empty() {
            self.sink
                .push(format!("{path}.default_pools"), "needs at least one pool");
        }
        let default_pools = self.pool_list(&format!("{path}.default_pools"), &lb.default_pools);
        let fallback_pool = lb
            .fallback_pool
            .as_ref()
            .and_then(|f| self.pool_ref(&format!("{path}.fallback_pool"), f));
        let region_pools = self.region_pools(&format!("{path}.region_pools"), &lb.region_pools);
        let country_pools = self.country_pools(&format!("{path}.country_pools"), &lb.country_pools);
        let pop_pools = self.pop_pools(&format!("{path}.pop_pools"), &lb.pop_pools);
        let has_geo =
            !(region_pools.is_empty() && country_pools.is_empty() && pop_pools.is_empty());
        let steering_policy = self.steering_policy(
            &format!("{path}.steering_policy"),
            &lb.steering_policy,
            has_geo,
        );
        let random_steering = self.random_steering(
            &format!("{path}.random_steering"),
            lb.random_steering.as_ref(),
        );
        let session_affinity = self.session_affinity(
            &path,
            &lb.session_affinity,
            lb.session_affinity_ttl,
            lb.session_affinity_attributes.as_ref(),
            lb.proxied,
        );
        let adaptive_routing = AdaptiveRouting {
            failover_across_pools: lb
                .adaptive_routing
                .as_ref()
                .is_some_and(|a| a.failover_across_pools),
        };
        let location_strategy = self.location_strategy(
            &format!("{path}.location_strategy"),
            lb.location_strategy.as_ref(),
        );
        let ttl = self.ttl(&format!("{path}.ttl"), lb.ttl);
        let settings = SteeringSettings {
            default_pools,
            fallback_pool,
            region_pools,
            country_pools,
            pop_pools,
            steering_policy,
            random_steering,
            session_affinity,
            adaptive_routing,
            location_strategy,
            ttl,
        };
        let mut rule_names = HashSet::new();
        let mut rules: Vec<Rule> = Vec::new();
        for (j, r) in lb.rules.iter().enumerate() {
            let rpath = format!("{path}.rules[{j}]");
            if !rule_names.insert(r.name.as_str()) {
                self.sink.push(
                    format!("{rpath}.name"),
                    format!("duplicate rule name `{}`", r.name),
                );
            }
            if let Some(rule) = self.rule(&rpath, r, lb.proxied, has_geo) {
                if !r.disabled {
                    rules.push(rule);
                }
            }
        }
        // Stable sort: equal priorities keep the order of the file.
        rules.sort_by_key(|r| r.priority);
        Some(LoadBalancer {
            name,
            description: lb.description.clone(),
            enabled: lb.enabled,
            proxied: lb.proxied,
            rules,
            settings,
        })
    }

    fn ttl(&mut self, path: &str, ttl: u32) -> u32 {
        if !(1..=86_400).contains(&ttl) {
            self.sink
                .push(path, format!("must be 1..=86400 seconds (got {ttl})"));
        }
        ttl
    }

    fn pool_ref(&mut self, path: &str, name: &str) -> Option<PoolId> {
        let found = self.pool_index.get(name).copied();
        if found.is_none() {
            self.sink.push(path, format!("no pool is named `{name}`"));
        }
        found
    }

    fn pool_list(&mut self, path: &str, names: &[String]) -> Vec<PoolId> {
        let mut out = Vec::new();
        for (k, name) in names.iter().enumerate() {
            if let Some(id) = self.pool_ref(&format!("{path}[{k}]"), name) {
                if out.contains(&id) {
                    self.sink.push(
                        format!("{path}[{k}]"),
                        format!("pool `{name}` is listed twice"),
                    );
                } else {
                    out.push(id);
                }
            }
        }
        out
    }

    fn region_pools(
        &mut self,
        path: &str,
        raw: &BTreeMap<String, Vec<String>>,
    ) -> BTreeMap<Region, Vec<PoolId>> {
        let mut out = BTreeMap::new();
        for (key, names) in raw {
            let list = self.pool_list(&format!("{path}.{key}"), names);
            match key.parse::<Region>() {
                Ok(r) => {
                    out.insert(r, list);
                }
                Err(e) => self.sink.push(format!("{path}.{key}"), e.to_string()),
            }
        }
        out
    }

    fn country_pools(
        &mut self,
        path: &str,
        raw: &BTreeMap<String, Vec<String>>,
    ) -> BTreeMap<CountryCode, Vec<PoolId>> {
        let mut out = BTreeMap::new();
        for (key, names) in raw {
            let list = self.pool_list(&format!("{path}.{key}"), names);
            match key.parse::<CountryCode>() {
                Ok(cc) if self.regions.country_region(cc).is_some() => {
                    out.insert(cc, list);
                }
                Ok(cc) => self.sink.push(
                    format!("{path}.{key}"),
                    format!("`{cc}` is not a country of the regions table"),
                ),
                Err(e) => self.sink.push(format!("{path}.{key}"), e),
            }
        }
        out
    }

    fn pop_pools(
        &mut self,
        path: &str,
        raw: &BTreeMap<String, Vec<String>>,
    ) -> BTreeMap<String, Vec<PoolId>> {
        let mut out = BTreeMap::new();
        for (key, names) in raw {
            let list = self.pool_list(&format!("{path}.{key}"), names);
            match self.regions.datacenter(key) {
                Some(dc) => {
                    out.insert(dc.code.clone(), list);
                }
                None => self.sink.push(
                    format!("{path}.{key}"),
                    format!("`{key}` is not a datacenter (PoP) of the regions table"),
                ),
            }
        }
        out
    }

    fn steering_policy(&mut self, path: &str, raw: &str, has_geo: bool) -> SteeringPolicy {
        if raw.is_empty() {
            // Cloudflare: "" means geo when any geo mapping is set, else off.
            return if has_geo {
                SteeringPolicy::Geo
            } else {
                SteeringPolicy::Off
            };
        }
        SteeringPolicy::parse(raw).unwrap_or_else(|| {
            self.sink.push(path, format!("unknown steering policy `{raw}` (expected off, random, geo, dynamic_latency, proximity, least_outstanding_requests or least_connections)"));
            SteeringPolicy::Off
        })
    }

    fn random_steering(&mut self, path: &str, raw: Option<&RawRandomSteering>) -> RandomSteering {
        let Some(raw) = raw else {
            return RandomSteering {
                default_weight: 1.0,
                pool_weights: BTreeMap::new(),
            };
        };
        let mut check = |p: String, w: f64| {
            if !(0.0..=1.0).contains(&w) {
                self.sink
                    .push(p, format!("must be between 0 and 1 (got {w})"));
            }
        };
        check(format!("{path}.default_weight"), raw.default_weight);
        let mut pool_weights = BTreeMap::new();
        for (name, &w) in &raw.pool_weights {
            let p = format!("{path}.pool_weights.{name}");
            if !(0.0..=1.0).contains(&w) {
                self.sink
                    .push(&p, format!("must be between 0 and 1 (got {w})"));
            }
            if let Some(id) = self.pool_ref(&p, name) {
                pool_weights.insert(id, w.clamp(0.0, 1.0));
            }
        }
        RandomSteering {
            default_weight: raw.default_weight.clamp(0.0, 1.0),
            pool_weights,
        }
    }

    fn session_affinity(
        &mut self,
        path: &str,
        kind: &str,
        ttl: Option<u32>,
        attrs: Option<&RawAffinityAttributes>,
        proxied: bool,
    ) -> SessionAffinity {
        let kind = match kind {
            "none" | "" => AffinityKind::None,
            "cookie" => AffinityKind::Cookie,
            "ip_cookie" => AffinityKind::IpCookie,
            "header" => AffinityKind::Header,
            other => {
                self.sink.push(
                    format!("{path}.session_affinity"),
                    format!("unknown session affinity `{other}` (expected none, cookie, ip_cookie or header)"),
                );
                AffinityKind::None
            }
        };
        if !proxied && matches!(kind, AffinityKind::Cookie | AffinityKind::Header) {
            self.sink.push(
                format!("{path}.session_affinity"),
                format!("`{}` affinity needs a proxied load balancer; DNS-only load balancers support ip_cookie (a stable answer per client address)", kind.name()),
            );
        }
        let (default_ttl, range) = match kind {
            AffinityKind::Header => (1800, 30..=3600),
            _ => (82_800, 1800..=604_800),
        };
        if let Some(t) = ttl {
            if kind != AffinityKind::None && !range.contains(&t) {
                self.sink.push(
                    format!("{path}.session_affinity_ttl"),
                    format!(
                        "must be {}..={} seconds for {} affinity (got {t})",
                        range.start(),
                        range.end(),
                        kind.name()
                    ),
                );
            }
        }
        let apath = format!("{path}.session_affinity_attributes");
        let default_attrs;
        let a = match attrs {
            Some(a) => a,
            None => {
                default_attrs = RawAffinityAttributes {
                    samesite: "Auto".into(),
                    secure: "Auto".into(),
                    drain_duration: 0,
                    zero_downtime_failover: "none".into(),
                    headers: Vec::new(),
                    require_all_headers: false,
                };
                &default_attrs
            }
        };
        let samesite = match a.samesite.to_ascii_lowercase().as_str() {
            "auto" => SameSite::Auto,
            "lax" => SameSite::Lax,
            "none" => SameSite::None,
            "strict" => SameSite::Strict,
            other => {
                self.sink.push(
                    format!("{apath}.samesite"),
                    format!("unknown value `{other}` (expected Auto, Lax, None or Strict)"),
                );
                SameSite::Auto
            }
        };
        let secure = match a.secure.to_ascii_lowercase().as_str() {
            "auto" => Secure::Auto,
            "always" => Secure::Always,
            "never" => Secure::Never,
            other => {
                self.sink.push(
                    format!("{apath}.secure"),
                    format!("unknown value `{other}` (expected Auto, Always or Never)"),
                );
                Secure::Auto
            }
        };
        if samesite == SameSite::None && secure == Secure::Never {
            self.sink.push(
                format!("{apath}.secure"),
                "SameSite=None cookies must be Secure (browsers drop them otherwise): use Auto or Always",
            );
        }
        let zero_downtime_failover = match a.zero_downtime_failover.as_str() {
            "none" => ZeroDowntimeFailover::None,
            "temporary" => ZeroDowntimeFailover::Temporary,
            "sticky" => ZeroDowntimeFailover::Sticky,
            other => {
                self.sink.push(
                    format!("{apath}.zero_downtime_failover"),
                    format!("unknown value `{other}` (expected none, temporary or sticky)"),
                );
                ZeroDowntimeFailover::None
            }
        };
        if zero_downtime_failover == ZeroDowntimeFailover::Sticky && kind == AffinityKind::Header {
            self.sink.push(
                format!("{apath}.zero_downtime_failover"),
                "sticky failover rewrites the affinity cookie, which header affinity does not have: use temporary",
            );
        }
        if a.drain_duration > 86_400 {
            self.sink.push(
                format!("{apath}.drain_duration"),
                format!("must be 0..=86400 seconds (got {})", a.drain_duration),
            );
        }
        if kind == AffinityKind::Header && !(1..=5).contains(&a.headers.len()) {
            self.sink.push(
                format!("{apath}.headers"),
                format!(
                    "header affinity needs 1 to 5 header names (got {})",
                    a.headers.len()
                ),
            );
        }
        for (k, h) in a.headers.iter().enumerate() {
            let name = h.strip_prefix("cookie:").unwrap_or(h);
            if name.is_empty() || name.contains([' ', ':', '\r', '\n']) {
                self.sink.push(
                    format!("{apath}.headers[{k}]"),
                    format!("`{h}` is not a header name or `cookie:<name>`"),
                );
            }
        }
        SessionAffinity {
            kind,
            ttl: ttl.unwrap_or(default_ttl),
            samesite,
            secure,
            drain_duration: a.drain_duration,
            zero_downtime_failover,
            headers: a.headers.iter().map(|h| h.to_ascii_lowercase()).collect(),
            require_all_headers: a.require_all_headers,
        }
    }

    fn location_strategy(
        &mut self,
        path: &str,
        raw: Option<&RawLocationStrategy>,
    ) -> LocationStrategy {
        let Some(raw) = raw else {
            return LocationStrategy::default();
        };
        let prefer_ecs = match raw.prefer_ecs.as_str() {
            "always" => PreferEcs::Always,
            "never" => PreferEcs::Never,
            "proximity" => PreferEcs::Proximity,
            "geo" => PreferEcs::Geo,
            other => {
                self.sink.push(
                    format!("{path}.prefer_ecs"),
                    format!("unknown value `{other}` (expected always, never, proximity or geo)"),
                );
                PreferEcs::Proximity
            }
        };
        let mode = match raw.mode.as_str() {
            "pop" => LocationMode::Pop,
            "resolver_ip" => LocationMode::ResolverIp,
            other => {
                self.sink.push(
                    format!("{path}.mode"),
                    format!("unknown value `{other}` (expected pop or resolver_ip)"),
                );
                LocationMode::Pop
            }
        };
        LocationStrategy { prefer_ecs, mode }
    }

    fn rule(&mut self, path: &str, r: &RawRule, proxied: bool, lb_has_geo: bool) -> Option<Rule> {
        if r.name.trim().is_empty() {
            self.sink.push(format!("{path}.name"), "must not be empty");
        }
        let condition = match Condition::parse(&r.condition) {
            Ok(c) => Some(c),
            Err(e) => {
                self.sink.push(format!("{path}.condition"), e.to_string());
                None
            }
        };
        let o = &r.overrides;
        let has_overrides = o.default_pools.is_some()
            || o.fallback_pool.is_some()
            || o.region_pools.is_some()
            || o.country_pools.is_some()
            || o.pop_pools.is_some()
            || o.steering_policy.is_some()
            || o.random_steering.is_some()
            || o.session_affinity.is_some()
            || o.session_affinity_ttl.is_some()
            || o.session_affinity_attributes.is_some()
            || o.adaptive_routing.is_some()
            || o.location_strategy.is_some()
            || o.ttl.is_some();
        let action =
            if let Some(f) = &r.fixed_response {
                if has_overrides {
                    self.sink.push(
                    format!("{path}.fixed_response"),
                    "a rule either answers with a fixed response or overrides settings, not both",
                );
                }
                if !proxied {
                    self.sink.push(
                        format!("{path}.fixed_response"),
                        "fixed responses need a proxied load balancer (DNS cannot carry them)",
                    );
                }
                if !(100..=599).contains(&f.status_code) {
                    self.sink.push(
                        format!("{path}.fixed_response.status_code"),
                        format!("must be 100..=599 (got {})", f.status_code),
                    );
                }
                RuleAction::FixedResponse(FixedResponse {
                    status_code: f.status_code,
                    message_body: f.message_body.clone(),
                    content_type: f.content_type.clone(),
                    location: f.location.clone(),
                })
            } else {
                let opath = format!("{path}.overrides");
                let region_pools = o
                    .region_pools
                    .as_ref()
                    .map(|m| self.region_pools(&format!("{opath}.region_pools"), m));
                let country_pools = o
                    .country_pools
                    .as_ref()
                    .map(|m| self.country_pools(&format!("{opath}.country_pools"), m));
                let pop_pools = o
                    .pop_pools
                    .as_ref()
                    .map(|m| self.pop_pools(&format!("{opath}.pop_pools"), m));
                let has_geo = lb_has_geo
                    || region_pools.as_ref().is_some_and(|m| !m.is_empty())
                    || country_pools.as_ref().is_some_and(|m| !m.is_empty())
                    || pop_pools.as_ref().is_some_and(|m| !m.is_empty());
                let affinity = if o.session_affinity.is_some()
                    || o.session_affinity_ttl.is_some()
                    || o.session_affinity_attributes.is_some()
                {
                    Some(self.session_affinity(
                        &opath,
                        o.session_affinity.as_deref().unwrap_or("none"),
                        o.session_affinity_ttl,
                        o.session_affinity_attributes.as_ref(),
                        proxied,
                    ))
                } else {
                    None
                };
                RuleAction::Overrides(Box::new(Overrides {
                    default_pools: o
                        .default_pools
                        .as_ref()
                        .map(|l| self.pool_list(&format!("{opath}.default_pools"), l)),
                    fallback_pool: o
                        .fallback_pool
                        .as_ref()
                        .and_then(|f| self.pool_ref(&format!("{opath}.fallback_pool"), f)),
                    region_pools,
                    country_pools,
                    pop_pools,
                    steering_policy: o.steering_policy.as_ref().map(|s| {
                        self.steering_policy(&format!("{opath}.steering_policy"), s, has_geo)
                    }),
                    random_steering: o.random_steering.as_ref().map(|r| {
                        self.random_steering(&format!("{opath}.random_steering"), Some(r))
                    }),
                    session_affinity: affinity,
                    adaptive_routing: o.adaptive_routing.as_ref().map(|a| AdaptiveRouting {
                        failover_across_pools: a.failover_across_pools,
                    }),
                    location_strategy: o.location_strategy.as_ref().map(|l| {
                        self.location_strategy(&format!("{opath}.location_strategy"), Some(l))
                    }),
                    ttl: o.ttl.map(|t| self.ttl(&format!("{opath}.ttl"), t)),
                }))
            };
        Some(Rule {
            name: r.name.clone(),
            condition: condition?,
            priority: r.priority,
            terminates: r.terminates || matches!(action, RuleAction::FixedResponse(_)),
            action,
        })
    }
}

/// RFC 1123 host name: labels of letters, digits and hyphens, 1..=63 bytes, 253 in all.
fn is_hostname(s: &str) -> bool {
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
