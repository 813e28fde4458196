//! Builders for meshlb's configuration file (`lb-core/src/config/raw.rs` is its schema,
//! `docs/configuration.md` its reference): the one place the tests render TOML.
//!
//! ```
//! use test_support::config::{Config, Lb, Monitor, Pool};
//! let addr: std::net::SocketAddr = "127.0.0.1:8001".parse().unwrap();
//! let toml = Config::new()
//!     .monitor(Monitor::http("m").interval(1).timeout(1).retries(0).consecutive(2, 2))
//!     .pool(Pool::new("eu").monitor("m").regions(&["WEU"]).origin("a", addr))
//!     .load_balancer(Lb::new("app.example.test").pools(&["eu"]).proxied())
//!     .render();
//! assert!(toml.contains("origins = [{ name = \"a\", address = \"127.0.0.1\", port = 8001 }]"));
//! ```
//!
//! Each builder sets the fields the tests use, by their names in the file; a field set twice
//! keeps its first place and takes the last value. `.extra("key = value")` adds a raw line to
//! the item's table for anything rarer; `Config::extra` appends raw TOML (tables) at the end.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;

/// `s` as a TOML basic string, quoted and escaped.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A TOML array of strings.
pub fn list<S: AsRef<str>>(items: &[S]) -> String {
    let items: Vec<String> = items.iter().map(|s| quote(s.as_ref())).collect();
    format!("[{}]", items.join(", "))
}

/// A float as TOML writes it (`1.0`, `0.25`).
fn float(x: f64) -> String {
    format!("{x:?}")
}

/// The fields of one table, in the order first set, with their values already rendered; then
/// raw lines.
#[derive(Debug, Clone, Default)]
struct Fields {
    set: Vec<(String, String)>,
    extra: Vec<String>,
}

impl Fields {
    fn set(&mut self, key: &str, value: String) {
        match self.set.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value,
            None => self.set.push((key.to_string(), value)),
        }
    }

    fn is_empty(&self) -> bool {
        self.set.is_empty() && self.extra.is_empty()
    }

    /// `key = value` lines.
    fn lines(&self, out: &mut String) {
        for (k, v) in &self.set {
            out.push_str(&format!("{k} = {v}\n"));
        }
        for line in &self.extra {
            out.push_str(line.trim_end());
            out.push('\n');
        }
    }

    /// `{ key = value, ... }` (raw lines are taken as `key = value` pairs).
    fn inline(&self) -> String {
        let mut parts: Vec<String> = self.set.iter().map(|(k, v)| format!("{k} = {v}")).collect();
        parts.extend(self.extra.iter().map(|l| l.trim().to_string()));
        format!("{{ {} }}", parts.join(", "))
    }
}

/// Fields every builder has: `.set(key, raw value)` and `.extra(raw line)`.
macro_rules! raw_fields {
    ($ty:ty) => {
        impl $ty {
            /// Sets `key` to `value`, a TOML value as written (`"text"`, `3`, `[1, 2]`).
            pub fn set(mut self, key: &str, value: impl Into<String>) -> Self {
                self.fields.set(key, value.into());
                self
            }

            /// A raw `key = value` line for a field no method names.
            pub fn extra(mut self, line: impl Into<String>) -> Self {
                self.fields.extra.push(line.into());
                self
            }
        }
    };
}

/// Where an origin is: an address with or without a port. `SocketAddr`s and `(ip, port)`
/// pairs give both; an IP or a host name (`&str`) only the address (the monitor's or the load
/// balancer's port applies).
pub trait Address {
    /// (address, port).
    fn address(&self) -> (String, Option<u16>);
}

impl Address for SocketAddr {
    fn address(&self) -> (String, Option<u16>) {
        (self.ip().to_string(), Some(self.port()))
    }
}
impl Address for IpAddr {
    fn address(&self) -> (String, Option<u16>) {
        (self.to_string(), None)
    }
}
impl Address for Ipv4Addr {
    fn address(&self) -> (String, Option<u16>) {
        (self.to_string(), None)
    }
}
impl Address for Ipv6Addr {
    fn address(&self) -> (String, Option<u16>) {
        (self.to_string(), None)
    }
}
impl Address for &str {
    fn address(&self) -> (String, Option<u16>) {
        (self.to_string(), None)
    }
}
impl Address for String {
    fn address(&self) -> (String, Option<u16>) {
        (self.clone(), None)
    }
}
impl<A: Address> Address for (A, u16) {
    fn address(&self) -> (String, Option<u16>) {
        (self.0.address().0, Some(self.1))
    }
}

/// A whole configuration file.
#[derive(Debug, Clone, Default)]
pub struct Config {
    monitors: Vec<Monitor>,
    groups: Vec<MonitorGroup>,
    pools: Vec<Pool>,
    load_balancers: Vec<Lb>,
    zones: Vec<Zone>,
    networks: Vec<String>,
    extra: Vec<String>,
}

impl Config {
    pub fn new() -> Config {
        Config::default()
    }

    pub fn monitor(mut self, m: Monitor) -> Config {
        self.monitors.push(m);
        self
    }

    pub fn monitor_group(mut self, g: MonitorGroup) -> Config {
        self.groups.push(g);
        self
    }

    pub fn pool(mut self, p: Pool) -> Config {
        self.pools.push(p);
        self
    }

    pub fn load_balancer(mut self, lb: Lb) -> Config {
        self.load_balancers.push(lb);
        self
    }

    pub fn zone(mut self, z: Zone) -> Config {
        self.zones.push(z);
        self
    }

    /// `[geolocation] networks`: `cidr` placed in region `code` (`WEU`, `ENAM`...).
    pub fn network_in_region(mut self, cidr: &str, code: &str) -> Config {
        self.networks.push(format!(
            "{{ cidr = {}, region = {} }}",
            quote(cidr),
            quote(code)
        ));
        self
    }

    /// `[geolocation] networks`: `cidr` placed in a country (`DE`).
    pub fn network_in_country(mut self, cidr: &str, country: &str) -> Config {
        self.networks.push(format!(
            "{{ cidr = {}, country = {} }}",
            quote(cidr),
            quote(country)
        ));
        self
    }

    /// Raw TOML appended after everything else: whole tables (`[notifications]`,
    /// `[[notifications.webhooks]]`...), each starting with its header.
    pub fn extra(mut self, toml: impl Into<String>) -> Config {
        self.extra.push(toml.into());
        self
    }

    /// The file's text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for m in &self.monitors {
            m.render(&mut out);
        }
        for g in &self.groups {
            g.render(&mut out);
        }
        for p in &self.pools {
            p.render(&mut out);
        }
        for lb in &self.load_balancers {
            lb.render(&mut out);
        }
        for z in &self.zones {
            z.render(&mut out);
        }
        if !self.networks.is_empty() {
            out.push_str(&format!(
                "[geolocation]\nnetworks = [{}]\n",
                self.networks.join(", ")
            ));
        }
        for e in &self.extra {
            out.push_str(e.trim_end());
            out.push('\n');
        }
        out
    }

    /// Writes the file's text to `path` (a test's config file).
    pub fn write(&self, path: &Path) {
        std::fs::write(path, self.render())
            .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    }
}

/// `[[monitors]]`.
#[derive(Debug, Clone)]
pub struct Monitor {
    fields: Fields,
}

raw_fields!(Monitor);

impl Monitor {
    /// A monitor of type `kind` (`http`, `https`, `tcp`, `udp_icmp`, `icmp_ping`, `smtp`,
    /// `ldap`...).
    pub fn new(name: &str, kind: &str) -> Monitor {
        let mut fields = Fields::default();
        fields.set("name", quote(name));
        if kind != "http" {
            fields.set("type", quote(kind));
        }
        Monitor { fields }
    }

    pub fn http(name: &str) -> Monitor {
        Monitor::new(name, "http")
    }

    pub fn https(name: &str) -> Monitor {
        Monitor::new(name, "https")
    }

    pub fn tcp(name: &str) -> Monitor {
        Monitor::new(name, "tcp")
    }

    /// Seconds between probes.
    pub fn interval(self, seconds: u64) -> Monitor {
        self.set("interval", seconds.to_string())
    }

    /// Seconds before a probe gives up.
    pub fn timeout(self, seconds: u64) -> Monitor {
        self.set("timeout", seconds.to_string())
    }

    pub fn retries(self, n: u64) -> Monitor {
        self.set("retries", n.to_string())
    }

    /// `consecutive_down` and `consecutive_up`.
    pub fn consecutive(self, down: u32, up: u32) -> Monitor {
        self.consecutive_down(down).consecutive_up(up)
    }

    pub fn consecutive_down(self, n: u32) -> Monitor {
        self.set("consecutive_down", n.to_string())
    }

    pub fn consecutive_up(self, n: u32) -> Monitor {
        self.set("consecutive_up", n.to_string())
    }

    pub fn path(self, path: &str) -> Monitor {
        self.set("path", quote(path))
    }

    pub fn port(self, port: u16) -> Monitor {
        self.set("port", port.to_string())
    }

    pub fn method(self, method: &str) -> Monitor {
        self.set("method", quote(method))
    }

    pub fn expected_codes(self, codes: &str) -> Monitor {
        self.set("expected_codes", quote(codes))
    }

    pub fn expected_body(self, body: &str) -> Monitor {
        self.set("expected_body", quote(body))
    }

    /// Extra trust anchors (PEM) for https and ldaps monitors.
    pub fn ca_file(self, path: &Path) -> Monitor {
        self.set("ca_file", quote(&path.display().to_string()))
    }

    fn render(&self, out: &mut String) {
        out.push_str("[[monitors]]\n");
        self.fields.lines(out);
    }
}

/// `[[monitor_groups]]`.
#[derive(Debug, Clone)]
pub struct MonitorGroup {
    fields: Fields,
    members: Vec<String>,
}

raw_fields!(MonitorGroup);

impl MonitorGroup {
    pub fn new(name: &str) -> MonitorGroup {
        let mut fields = Fields::default();
        fields.set("name", quote(name));
        MonitorGroup {
            fields,
            members: Vec::new(),
        }
    }

    /// A member whose verdict counts like any other.
    pub fn member(self, monitor: &str) -> MonitorGroup {
        self.member_with(monitor, "")
    }

    /// A member that must be healthy for the group to be.
    pub fn must_be_healthy(self, monitor: &str) -> MonitorGroup {
        self.member_with(monitor, ", must_be_healthy = true")
    }

    /// A member probed and reported, whose verdict does not count.
    pub fn monitoring_only(self, monitor: &str) -> MonitorGroup {
        self.member_with(monitor, ", monitoring_only = true")
    }

    fn member_with(mut self, monitor: &str, more: &str) -> MonitorGroup {
        self.members
            .push(format!("{{ monitor = {}{more} }}", quote(monitor)));
        self
    }

    fn render(&self, out: &mut String) {
        out.push_str("[[monitor_groups]]\n");
        self.fields.lines(out);
        out.push_str(&format!("members = [{}]\n", self.members.join(", ")));
    }
}

/// One of a pool's `origins`.
#[derive(Debug, Clone)]
pub struct Endpoint {
    fields: Fields,
}

raw_fields!(Endpoint);

impl Endpoint {
    pub fn new(name: &str, at: impl Address) -> Endpoint {
        let (address, port) = at.address();
        let mut fields = Fields::default();
        fields.set("name", quote(name));
        fields.set("address", quote(&address));
        if let Some(port) = port {
            fields.set("port", port.to_string());
        }
        Endpoint { fields }
    }

    pub fn weight(self, w: f64) -> Endpoint {
        self.set("weight", float(w))
    }

    pub fn enabled(self, on: bool) -> Endpoint {
        self.set("enabled", on.to_string())
    }

    pub fn priority(self, p: u32) -> Endpoint {
        self.set("priority", p.to_string())
    }

    /// The `Host` header sent to this origin (Cloudflare's origin-level `header`).
    pub fn host(self, host: &str) -> Endpoint {
        self.set("header", format!("{{ Host = [{}] }}", quote(host)))
    }
}

/// `[[pools]]`.
#[derive(Debug, Clone)]
pub struct Pool {
    fields: Fields,
    origins: Vec<Endpoint>,
}

raw_fields!(Pool);

impl Pool {
    pub fn new(name: &str) -> Pool {
        let mut fields = Fields::default();
        fields.set("name", quote(name));
        Pool {
            fields,
            origins: Vec::new(),
        }
    }

    pub fn monitor(self, name: &str) -> Pool {
        self.set("monitor", quote(name))
    }

    pub fn monitor_group(self, name: &str) -> Pool {
        self.set("monitor_group", quote(name))
    }

    /// `check_regions`: the regions whose probers probe this pool.
    pub fn regions(self, codes: &[&str]) -> Pool {
        self.set("check_regions", list(codes))
    }

    /// An origin named `name` at `at` (see `Address`).
    pub fn origin(self, name: &str, at: impl Address) -> Pool {
        self.endpoint(Endpoint::new(name, at))
    }

    /// An origin with more than a name and an address (weight, priority...).
    pub fn endpoint(mut self, e: Endpoint) -> Pool {
        self.origins.push(e);
        self
    }

    pub fn enabled(self, on: bool) -> Pool {
        self.set("enabled", on.to_string())
    }

    pub fn minimum_origins(self, n: u32) -> Pool {
        self.set("minimum_origins", n.to_string())
    }

    /// `latitude` and `longitude`, for proximity steering.
    pub fn at(self, latitude: f64, longitude: f64) -> Pool {
        self.set("latitude", float(latitude))
            .set("longitude", float(longitude))
    }

    /// `origin_steering = { policy = ... }`: `random`, `hash`, `least_outstanding_requests`,
    /// `least_connections`.
    pub fn steering(self, policy: &str) -> Pool {
        self.set(
            "origin_steering",
            format!("{{ policy = {} }}", quote(policy)),
        )
    }

    fn render(&self, out: &mut String) {
        out.push_str("[[pools]]\n");
        self.fields.lines(out);
        let origins: Vec<String> = self.origins.iter().map(|e| e.fields.inline()).collect();
        out.push_str(&format!("origins = [{}]\n", origins.join(", ")));
    }
}

/// `[[load_balancers]]`: DNS by default, `.proxied()` for the HTTP proxy, `.protocol("tcp")`
/// for layer 4.
#[derive(Debug, Clone)]
pub struct Lb {
    fields: Fields,
    /// `session_affinity_attributes`.
    affinity: Fields,
    rules: Vec<Rule>,
}

raw_fields!(Lb);

impl Lb {
    pub fn new(name: &str) -> Lb {
        let mut fields = Fields::default();
        fields.set("name", quote(name));
        Lb {
            fields,
            affinity: Fields::default(),
            rules: Vec::new(),
        }
    }

    /// `default_pools`, in failover order.
    pub fn pools(self, names: &[&str]) -> Lb {
        self.set("default_pools", list(names))
    }

    /// `fallback_pool`.
    pub fn fallback(self, pool: &str) -> Lb {
        self.set("fallback_pool", quote(pool))
    }

    pub fn proxied(self) -> Lb {
        self.set("proxied", "true")
    }

    pub fn enabled(self, on: bool) -> Lb {
        self.set("enabled", on.to_string())
    }

    pub fn ttl(self, seconds: u32) -> Lb {
        self.set("ttl", seconds.to_string())
    }

    /// `steering_policy`: `off`, `geo`, `random`, `dynamic_latency`, `proximity`,
    /// `least_outstanding_requests`, `least_connections`.
    pub fn steering(self, policy: &str) -> Lb {
        self.set("steering_policy", quote(policy))
    }

    /// `region_pools`: one entry per (region, pools).
    pub fn region_pools(self, entries: &[(&str, &[&str])]) -> Lb {
        self.set("region_pools", pool_map(entries))
    }

    pub fn country_pools(self, entries: &[(&str, &[&str])]) -> Lb {
        self.set("country_pools", pool_map(entries))
    }

    pub fn pop_pools(self, entries: &[(&str, &[&str])]) -> Lb {
        self.set("pop_pools", pool_map(entries))
    }

    /// `session_affinity`: `none`, `cookie`, `ip_cookie`, `header`.
    pub fn affinity(self, kind: &str) -> Lb {
        self.set("session_affinity", quote(kind))
    }

    pub fn affinity_ttl(self, seconds: u32) -> Lb {
        self.set("session_affinity_ttl", seconds.to_string())
    }

    /// `session_affinity_attributes.drain_duration`.
    pub fn drain_duration(mut self, seconds: u32) -> Lb {
        self.affinity.set("drain_duration", seconds.to_string());
        self
    }

    /// `session_affinity_attributes.zero_downtime_failover`: `none`, `temporary`, `sticky`.
    pub fn zero_downtime_failover(mut self, mode: &str) -> Lb {
        self.affinity.set("zero_downtime_failover", quote(mode));
        self
    }

    /// `adaptive_routing = { failover_across_pools = true }`.
    pub fn failover_across_pools(self) -> Lb {
        self.set("adaptive_routing", "{ failover_across_pools = true }")
    }

    /// `location_strategy = { prefer_ecs = ... }`: `always`, `never`, `proximity`, `geo`.
    pub fn prefer_ecs(self, when: &str) -> Lb {
        self.set(
            "location_strategy",
            format!("{{ prefer_ecs = {} }}", quote(when)),
        )
    }

    /// `origin_tls`: `off`, `full`, `strict`.
    pub fn origin_tls(self, mode: &str) -> Lb {
        self.set("origin_tls", quote(mode))
    }

    pub fn origin_ca_file(self, path: &Path) -> Lb {
        self.set("origin_ca_file", quote(&path.display().to_string()))
    }

    /// `protocol`: `http` (the default), `tcp`, `udp`.
    pub fn protocol(self, protocol: &str) -> Lb {
        self.set("protocol", quote(protocol))
    }

    /// Layer 4: `listen`, the ports listened on.
    pub fn listen(self, ports: &[u16]) -> Lb {
        let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
        self.set("listen", format!("[{}]", ports.join(", ")))
    }

    /// Layer 4: `origin_port`, one for all.
    pub fn origin_port(self, port: u16) -> Lb {
        self.set("origin_port", port.to_string())
    }

    /// Layer 4: `proxy_protocol`: `off`, `v1`, `v2`, `simple`.
    pub fn proxy_protocol(self, version: &str) -> Lb {
        self.set("proxy_protocol", quote(version))
    }

    /// A custom rule (`[[load_balancers.rules]]`), after the rules added before.
    pub fn rule(mut self, r: Rule) -> Lb {
        self.rules.push(r);
        self
    }

    fn render(&self, out: &mut String) {
        out.push_str("[[load_balancers]]\n");
        self.fields.lines(out);
        if !self.affinity.is_empty() {
            out.push_str(&format!(
                "session_affinity_attributes = {}\n",
                self.affinity.inline()
            ));
        }
        for r in &self.rules {
            out.push_str("[[load_balancers.rules]]\n");
            r.fields.lines(out);
        }
    }
}

/// `{ KEY = ["pool", ...], ... }`.
fn pool_map(entries: &[(&str, &[&str])]) -> String {
    let parts: Vec<String> = entries
        .iter()
        .map(|(k, pools)| format!("{k} = {}", list(pools)))
        .collect();
    format!("{{ {} }}", parts.join(", "))
}

/// `[[load_balancers.rules]]`.
#[derive(Debug, Clone)]
pub struct Rule {
    fields: Fields,
}

raw_fields!(Rule);

impl Rule {
    /// A rule named `name` that applies when `condition` (the rule language) holds.
    pub fn new(name: &str, condition: &str) -> Rule {
        let mut fields = Fields::default();
        fields.set("name", quote(name));
        fields.set("condition", quote(condition));
        Rule { fields }
    }

    pub fn priority(self, p: u32) -> Rule {
        self.set("priority", p.to_string())
    }

    pub fn terminates(self) -> Rule {
        self.set("terminates", "true")
    }

    /// `overrides = { ... }`, written as TOML inline-table fields (`ttl = 5, ...`).
    pub fn overrides(self, fields: &str) -> Rule {
        self.set("overrides", format!("{{ {fields} }}"))
    }

    /// `fixed_response = { ... }`, written as TOML inline-table fields.
    pub fn fixed_response(self, fields: &str) -> Rule {
        self.set("fixed_response", format!("{{ {fields} }}"))
    }
}

/// `[[zones]]`: a zone served authoritatively.
#[derive(Debug, Clone)]
pub struct Zone {
    fields: Fields,
}

raw_fields!(Zone);

impl Zone {
    pub fn new(name: &str) -> Zone {
        let mut fields = Fields::default();
        fields.set("name", quote(name));
        Zone { fields }
    }

    pub fn nameservers(self, names: &[&str]) -> Zone {
        self.set("nameservers", list(names))
    }

    pub fn ttl(self, seconds: u64) -> Zone {
        self.set("ttl", seconds.to_string())
    }

    pub fn negative_ttl(self, seconds: u64) -> Zone {
        self.set("negative_ttl", seconds.to_string())
    }

    fn render(&self, out: &mut String) {
        out.push_str("[[zones]]\n");
        self.fields.lines(out);
    }
}

#[cfg(test)]
mod tests;
