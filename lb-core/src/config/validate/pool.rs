//! Validation of pools.

use std::collections::HashSet;
use std::net::IpAddr;

use super::*;

impl Validator<'_> {
    pub(super) fn pool(&mut self, i: usize, p: &RawPool) -> Pool {
        let path = format!("pools[{i}]");
        let (checks, monitor_group) = self.pool_checks(&path, p);
        let check_regions = self.check_regions(&path, p.check_regions.as_deref());
        let coordinates = self.coordinates(&path, p.latitude, p.longitude);
        let endpoints = self.pool_endpoints(&path, p, &checks);
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
            .map(|s| self.origin_steering(&path, s))
            .unwrap_or_default();
        let health_sources = self.health_sources(&path, p.health_sources.as_deref());
        Pool {
            name: p.name.clone(),
            description: p.description.clone(),
            enabled: p.enabled,
            minimum_origins: p.minimum_origins,
            checks,
            monitor_group,
            check_regions,
            coordinates,
            endpoints,
            load_shedding,
            origin_steering,
            health_sources,
            notification_filter: Self::notification_filter(p.notification_filter.as_ref()),
            notification_email: self.notification_email(&path, p.notification_email.as_deref()),
        }
    }

    /// The regions whose probers check the pool: all of them unless `check_regions` names
    /// some (`ALL_REGIONS` as all).
    fn check_regions(&mut self, path: &str, list: Option<&[String]>) -> Vec<Region> {
        match list {
            None => Region::ALL.to_vec(),
            Some([]) => {
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
        }
    }

    /// The pool's coordinates, for proximity steering: both or neither.
    fn coordinates(
        &mut self,
        path: &str,
        latitude: Option<f64>,
        longitude: Option<f64>,
    ) -> Option<Coordinates> {
        match (latitude, longitude) {
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
        }
    }

    /// The pool's endpoints, each validated, with the rules that bind them together: unique
    /// names, some weight, a port where a portless udp_icmp monitor needs one.
    fn pool_endpoints(&mut self, path: &str, p: &RawPool, checks: &[PoolCheck]) -> Vec<Endpoint> {
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
                // Formatted only for an error: a follower validates every generation, and a
                // pool may hold thousands of endpoints.
                let epath = || format!("{path}.origins[{j}]");
                if !names.insert(e.name.as_str()) {
                    self.sink.push(
                        format!("{}.name", epath()),
                        format!("duplicate endpoint name `{}` in pool `{}`", e.name, p.name),
                    );
                }
                self.endpoint(&epath, e)
            })
            .collect();
        if !endpoints.is_empty() && endpoints.iter().all(|e| e.weight <= 0.0) {
            self.sink.push(
                format!("{path}.origins"),
                "every endpoint has weight 0, so the pool can never take traffic: disable the pool instead",
            );
        }
        let portless_udp = checks.iter().any(|c| {
            matches!(
                self.monitor_kinds.get(&c.monitor),
                Some(MonitorKind::UdpIcmp { port: 0 })
            )
        });
        if portless_udp {
            for (j, e) in endpoints.iter().enumerate() {
                if e.port == 0 {
                    self.sink.push(
                        format!("{path}.origins[{j}].port"),
                        "the pool's udp_icmp monitor has no port, so each endpoint needs its UDP port",
                    );
                }
            }
        }
        self.private_endpoints_monitored_by_streams(path, &endpoints, checks);
        endpoints
    }

    /// A private endpoint is probed through its tunnel, which carries streams: an ICMP or
    /// UDP monitor cannot cross it, nor LDAP (its client dials its own sockets).
    fn private_endpoints_monitored_by_streams(
        &mut self,
        path: &str,
        endpoints: &[Endpoint],
        checks: &[PoolCheck],
    ) {
        let Some(j) = endpoints.iter().position(|e| e.network.is_some()) else {
            return;
        };
        for c in checks {
            let kind = self.monitor_kinds.get(&c.monitor);
            let crosses = matches!(
                kind,
                Some(
                    MonitorKind::Http(_)
                        | MonitorKind::Https(_)
                        | MonitorKind::Tcp { .. }
                        | MonitorKind::Smtp { .. }
                ) | None
            );
            if let (false, Some(kind)) = (crosses, kind) {
                self.sink.push(
                    format!("{path}.origins[{j}].virtual_network_id"),
                    format!(
                        "a private endpoint is probed through its tunnel, which a {} monitor cannot cross: use http, https, tcp or smtp",
                        kind.type_name()
                    ),
                );
            }
        }
    }

    /// `origin_steering`: its policy among [`OriginPolicy::ALL`].
    fn origin_steering(&mut self, path: &str, s: &RawOriginSteering) -> OriginSteering {
        let policy = self.choice(
            format!("{path}.origin_steering.policy"),
            "policy",
            &s.policy,
            OriginPolicy::Random,
        );
        OriginSteering {
            policy,
            latency_sensitivity_ms: s.latency_sensitivity_ms,
        }
    }

    /// `health_sources`: `["global"]` (Cloudflare) or `["regional", "global"]`.
    fn health_sources(&mut self, path: &str, raw: Option<&[String]>) -> HealthSources {
        match raw {
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
        }
    }

    /// The pool's checks: its `monitor`, or its `monitor_group`'s enabled members.
    fn pool_checks(&mut self, path: &str, p: &RawPool) -> (Vec<PoolCheck>, Option<usize>) {
        match (&p.monitor, &p.monitor_group) {
            (Some(_), Some(_)) => {
                self.sink.push(
                    format!("{path}.monitor_group"),
                    "a pool takes `monitor` or `monitor_group`, not both",
                );
                (Vec::new(), None)
            }
            (Some(name), None) => match self.monitor_index.get(name) {
                Some(&monitor) => (
                    vec![PoolCheck {
                        monitor,
                        role: MemberRole::Decides,
                    }],
                    None,
                ),
                None => {
                    self.sink.push(
                        format!("{path}.monitor"),
                        format!("no monitor is named `{name}`"),
                    );
                    (Vec::new(), None)
                }
            },
            (None, Some(name)) => match self.groups.get(name) {
                Some((index, checks)) => (checks.clone(), Some(*index)),
                None => {
                    self.sink.push(
                        format!("{path}.monitor_group"),
                        format!("no monitor group is named `{name}`"),
                    );
                    (Vec::new(), None)
                }
            },
            (None, None) => (Vec::new(), None),
        }
    }

    pub(super) fn endpoint(&mut self, path: &dyn Fn() -> String, e: &RawEndpoint) -> Endpoint {
        if let Some(problem) = name_problem(&e.name) {
            self.sink.push(format!("{}.name", path()), problem);
        }
        let address = match e.address.parse::<IpAddr>() {
            Ok(ip) => Address::Ip(ip),
            Err(_) if is_hostname(&e.address) => {
                Address::Hostname(e.address.trim_end_matches('.').to_ascii_lowercase())
            }
            Err(_) => {
                self.sink.push(
                    format!("{}.address", path()),
                    format!("`{}` is neither an IP address nor a hostname", e.address),
                );
                Address::Hostname(String::new())
            }
        };
        let port = match u16::try_from(e.port) {
            Ok(port) => port,
            Err(_) => self.port(&format!("{}.port", path()), e.port),
        };
        if !(0.0..=1.0).contains(&e.weight) {
            self.sink.push(
                format!("{}.weight", path()),
                format!("must be between 0 and 1 (got {})", e.weight),
            );
        }
        if !(1..=5).contains(&e.priority) {
            self.sink.push(
                format!("{}.priority", path()),
                format!("must be 1..=5 (got {})", e.priority),
            );
        }
        let headers = match e.header.is_empty() {
            true => Vec::new(),
            false => self.headers(&format!("{}.header", path()), &e.header, true),
        };
        let host_header = headers.into_iter().next().and_then(|(_, mut v)| v.pop());
        let ip = match &address {
            Address::Ip(ip) => Some(*ip),
            Address::Hostname(_) => None,
        };
        let network = e
            .virtual_network_id
            .as_deref()
            .and_then(|id| self.endpoint_network(path, id, ip));
        Endpoint {
            name: e.name.clone(),
            address,
            port,
            enabled: e.enabled,
            weight: e.weight.clamp(0.0, 1.0),
            priority: e.priority.clamp(1, 5) as u8,
            host_header,
            network,
        }
    }

    pub(super) fn load_shedding(&mut self, path: &str, s: &RawLoadShedding) -> LoadShedding {
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
        let mut policy = |field: &str, v: &str| {
            self.choice(format!("{path}.{field}"), "policy", v, ShedPolicy::Random)
        };
        LoadShedding {
            default_percent: s.default_percent.clamp(0.0, 100.0),
            default_policy: policy("default_policy", &s.default_policy),
            session_percent: s.session_percent.clamp(0.0, 100.0),
            session_policy: policy("session_policy", &s.session_policy),
        }
    }
}
