//! The configuration file exactly as written: serde types whose field names are Cloudflare's
//! Load Balancing API names, with Cloudflare's defaults. Unknown keys are caught by
//! `parse_toml_strict`; meaning is checked when these become the validated model.

use std::collections::BTreeMap;

use serde::Deserialize;

/// `meshlb.toml`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RawConfig {
    #[serde(default)]
    pub monitors: Vec<RawMonitor>,
    #[serde(default)]
    pub monitor_groups: Vec<RawMonitorGroup>,
    #[serde(default)]
    pub pools: Vec<RawPool>,
    #[serde(default)]
    pub load_balancers: Vec<RawLoadBalancer>,
    #[serde(default)]
    pub zones: Vec<RawZone>,
    #[serde(default)]
    pub geolocation: RawGeolocation,
    #[serde(default)]
    pub notifications: RawNotifications,
    #[serde(default)]
    pub tunnels: Vec<RawTunnel>,
    #[serde(default)]
    pub virtual_networks: Vec<RawVirtualNetwork>,
    #[serde(default)]
    pub routes: Vec<RawRoute>,
}

/// `[[tunnels]]` (Cloudflare's `cfd_tunnel`: `id`, `name`, `tunnel_secret`).
#[derive(Debug, Clone, Deserialize)]
pub struct RawTunnel {
    pub id: String,
    pub name: String,
    pub tunnel_secret: String,
    /// When it was made (RFC 3339, UTC), as the API records it.
    pub created_at: Option<String>,
}

/// `[[virtual_networks]]` (Cloudflare's `teamnet/virtual_networks`).
#[derive(Debug, Clone, Deserialize)]
pub struct RawVirtualNetwork {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub comment: String,
    #[serde(default)]
    pub is_default_network: bool,
    pub created_at: Option<String>,
}

/// `[[routes]]` (Cloudflare's `teamnet/routes`).
#[derive(Debug, Clone, Deserialize)]
pub struct RawRoute {
    /// A UUID, as the API gives routes; optional in a file.
    pub id: Option<String>,
    pub network: String,
    pub tunnel_id: String,
    pub virtual_network_id: Option<String>,
    #[serde(default)]
    pub comment: String,
    pub created_at: Option<String>,
}

/// `[[monitor_groups]]` (Cloudflare's monitor group: `description`, `members`).
#[derive(Debug, Clone, Deserialize)]
pub struct RawMonitorGroup {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub members: Vec<RawGroupMember>,
}

/// A member: Cloudflare's `monitor_id` is accepted as the monitor's name.
#[derive(Debug, Clone, Deserialize)]
pub struct RawGroupMember {
    #[serde(alias = "monitor_id")]
    pub monitor: String,
    #[serde(default = "default_true")]
    pub enabled: bool,
    #[serde(default)]
    pub monitoring_only: bool,
    #[serde(default)]
    pub must_be_healthy: bool,
}

/// `[notifications]`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RawNotifications {
    pub batch_seconds: Option<u32>,
    pub max_attempts: Option<u32>,
    #[serde(default)]
    pub email: Vec<RawEmail>,
    #[serde(default)]
    pub webhooks: Vec<RawWebhook>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct RawEmail {
    pub name: String,
    pub from: String,
    pub to: Vec<String>,
    pub smtp_host: String,
    pub smtp_port: Option<u16>,
    pub smtp_tls: Option<String>,
    pub username: Option<String>,
    pub password_file: Option<String>,
    pub password_env: Option<String>,
    pub ca_file: Option<String>,
    #[serde(default)]
    pub pools: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct RawWebhook {
    pub name: String,
    pub url: String,
    pub secret_file: Option<String>,
    pub secret_env: Option<String>,
    #[serde(default)]
    pub pools: Vec<String>,
}

/// A pool's `notification_filter` (Cloudflare).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RawNotificationFilter {
    pub origin: Option<RawKindFilter>,
    pub pool: Option<RawKindFilter>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct RawKindFilter {
    #[serde(default)]
    pub disable: bool,
    pub healthy: Option<bool>,
}

/// `[[zones]]`: a DNS zone served authoritatively (SOA and NS at its apex).
#[derive(Debug, Clone, Deserialize)]
pub struct RawZone {
    pub name: String,
    #[serde(default)]
    pub nameservers: Vec<String>,
    pub hostmaster: Option<String>,
    #[serde(default = "default_zone_ttl")]
    pub ttl: u64,
    #[serde(default = "default_negative_ttl")]
    pub negative_ttl: u64,
    pub serial: Option<u32>,
}

fn default_zone_ttl() -> u64 {
    3600
}

fn default_negative_ttl() -> u64 {
    60
}

/// `[geolocation]`: where client and resolver addresses are.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RawGeolocation {
    pub database: Option<String>,
    #[serde(default)]
    pub networks: Vec<RawGeoNetwork>,
}

/// `[[geolocation.networks]]`: a CIDR placed in a country or a region.
#[derive(Debug, Clone, Deserialize)]
pub struct RawGeoNetwork {
    pub cidr: String,
    pub country: Option<String>,
    pub region: Option<String>,
}

/// A header value: Cloudflare's API takes a list (`Host = ["a.example"]`); one string is
/// accepted as a list of one.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum HeaderValues {
    One(String),
    Many(Vec<String>),
}

impl HeaderValues {
    pub fn into_vec(self) -> Vec<String> {
        match self {
            HeaderValues::One(s) => vec![s],
            HeaderValues::Many(v) => v,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct RawMonitor {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default = "default_monitor_type", rename = "type")]
    pub kind: String,
    pub method: Option<String>,
    #[serde(default = "default_path")]
    pub path: String,
    #[serde(default)]
    pub header: BTreeMap<String, HeaderValues>,
    #[serde(default)]
    pub port: u32,
    #[serde(default = "default_timeout")]
    pub timeout: u64,
    #[serde(default = "default_interval")]
    pub interval: u64,
    #[serde(default = "default_retries")]
    pub retries: u64,
    pub expected_codes: Option<String>,
    #[serde(default)]
    pub expected_body: String,
    #[serde(default)]
    pub follow_redirects: bool,
    #[serde(default)]
    pub allow_insecure: bool,
    #[serde(default)]
    pub consecutive_up: u32,
    #[serde(default)]
    pub consecutive_down: u32,
    pub probe_zone: Option<String>,
    /// meshlb: an anti-flap rule other than Cloudflare's consecutive counts.
    pub threshold: Option<RawThreshold>,
    /// meshlb: settings of `ldap` monitors.
    pub ldap: Option<RawLdap>,
    /// meshlb: extra trust anchors (PEM) for https and ldaps monitors.
    pub ca_file: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct RawThreshold {
    pub mode: String,
    pub sample_size: Option<u32>,
    pub successful_samples_required: Option<u32>,
    pub down_thresh: Option<u32>,
    pub ok_thresh: Option<u32>,
    pub up_thresh: Option<u32>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct RawLdap {
    #[serde(default = "default_ldap_scheme")]
    pub scheme: String,
    pub bind_dn: Option<String>,
    pub password_file: Option<String>,
    pub password_env: Option<String>,
    pub search_dn: Option<String>,
}

fn default_ldap_scheme() -> String {
    "ldap".into()
}

fn default_monitor_type() -> String {
    "http".into()
}
fn default_path() -> String {
    "/".into()
}
fn default_timeout() -> u64 {
    5
}
fn default_interval() -> u64 {
    60
}
fn default_retries() -> u64 {
    2
}
fn default_true() -> bool {
    true
}
fn default_weight() -> f64 {
    1.0
}
fn default_minimum_origins() -> u32 {
    1
}
fn default_priority() -> u32 {
    1
}
fn default_ttl() -> u32 {
    30
}

#[derive(Debug, Clone, Deserialize)]
pub struct RawPool {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default = "default_true")]
    pub enabled: bool,
    #[serde(default = "default_minimum_origins")]
    pub minimum_origins: u32,
    pub monitor: Option<String>,
    pub monitor_group: Option<String>,
    pub check_regions: Option<Vec<String>>,
    pub latitude: Option<f64>,
    pub longitude: Option<f64>,
    #[serde(alias = "endpoints")]
    pub origins: Vec<RawEndpoint>,
    pub load_shedding: Option<RawLoadShedding>,
    pub origin_steering: Option<RawOriginSteering>,
    pub health_sources: Option<Vec<String>>,
    pub notification_filter: Option<RawNotificationFilter>,
    /// Cloudflare's `notification_email`: addresses, comma-separated.
    pub notification_email: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct RawEndpoint {
    pub name: String,
    pub address: String,
    #[serde(default)]
    pub port: u32,
    #[serde(default = "default_true")]
    pub enabled: bool,
    #[serde(default = "default_weight")]
    pub weight: f64,
    #[serde(default = "default_priority")]
    pub priority: u32,
    #[serde(default)]
    pub header: BTreeMap<String, HeaderValues>,
    /// A private endpoint's virtual network (`config/private.rs`); none: the public internet.
    pub virtual_network_id: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct RawLoadShedding {
    #[serde(default)]
    pub default_percent: f64,
    #[serde(default = "default_shed_policy")]
    pub default_policy: String,
    #[serde(default)]
    pub session_percent: f64,
    #[serde(default = "default_session_shed_policy")]
    pub session_policy: String,
}

fn default_shed_policy() -> String {
    "random".into()
}
fn default_session_shed_policy() -> String {
    "hash".into()
}

#[derive(Debug, Clone, Deserialize)]
pub struct RawOriginSteering {
    #[serde(default = "default_origin_policy")]
    pub policy: String,
    #[serde(default)]
    pub latency_sensitivity_ms: u32,
}

fn default_origin_policy() -> String {
    "random".into()
}

#[derive(Debug, Clone, Deserialize)]
pub struct RawLoadBalancer {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default = "default_true")]
    pub enabled: bool,
    #[serde(default)]
    pub proxied: bool,
    #[serde(default = "default_ttl")]
    pub ttl: u32,
    pub default_pools: Vec<String>,
    pub fallback_pool: Option<String>,
    #[serde(default)]
    pub region_pools: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    pub country_pools: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    pub pop_pools: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    pub steering_policy: String,
    pub random_steering: Option<RawRandomSteering>,
    #[serde(default = "default_affinity")]
    pub session_affinity: String,
    pub session_affinity_ttl: Option<u32>,
    pub session_affinity_attributes: Option<RawAffinityAttributes>,
    pub adaptive_routing: Option<RawAdaptiveRouting>,
    pub location_strategy: Option<RawLocationStrategy>,
    #[serde(default)]
    pub rules: Vec<RawRule>,
    /// meshlb: how the proxy talks to origins (Cloudflare's SSL mode): off, full, strict.
    pub origin_tls: Option<String>,
    /// meshlb: extra trust anchors (PEM) for `origin_tls = "strict"`.
    pub origin_ca_file: Option<String>,
    /// meshlb (Cloudflare's authenticated origin pulls): a client certificate chain (PEM)
    /// the proxy presents to origins, and its key.
    pub origin_client_cert: Option<String>,
    pub origin_client_key: Option<String>,
    /// meshlb (Spectrum's protocols): "http" (default), "tcp" or "udp".
    pub protocol: Option<String>,
    /// Layer 4: the ports listened on, numbers or "first-last" ranges.
    pub listen: Option<Vec<RawPorts>>,
    /// Layer 4: the origin port (one for all), or a range as long as `listen`'s ports.
    pub origin_port: Option<RawPorts>,
    /// Layer 4: "off" (default), "v1", "v2" or, for UDP, "simple".
    pub proxy_protocol: Option<String>,
}

/// A port or a range of ports: `22` or `"8000-8010"`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum RawPorts {
    One(i64),
    Range(String),
}

fn default_affinity() -> String {
    "none".into()
}

#[derive(Debug, Clone, Deserialize)]
pub struct RawRandomSteering {
    #[serde(default = "default_weight")]
    pub default_weight: f64,
    #[serde(default)]
    pub pool_weights: BTreeMap<String, f64>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct RawAffinityAttributes {
    #[serde(default = "default_auto")]
    pub samesite: String,
    #[serde(default = "default_auto")]
    pub secure: String,
    #[serde(default)]
    pub drain_duration: u32,
    #[serde(default = "default_zdt")]
    pub zero_downtime_failover: String,
    #[serde(default)]
    pub headers: Vec<String>,
    #[serde(default)]
    pub require_all_headers: bool,
}

fn default_auto() -> String {
    "Auto".into()
}
fn default_zdt() -> String {
    "none".into()
}

#[derive(Debug, Clone, Deserialize)]
pub struct RawAdaptiveRouting {
    #[serde(default)]
    pub failover_across_pools: bool,
}

#[derive(Debug, Clone, Deserialize)]
pub struct RawLocationStrategy {
    #[serde(default = "default_prefer_ecs")]
    pub prefer_ecs: String,
    #[serde(default = "default_location_mode")]
    pub mode: String,
}

fn default_prefer_ecs() -> String {
    "proximity".into()
}
fn default_location_mode() -> String {
    "pop".into()
}

#[derive(Debug, Clone, Deserialize)]
pub struct RawRule {
    pub name: String,
    pub condition: String,
    #[serde(default)]
    pub priority: u32,
    #[serde(default)]
    pub disabled: bool,
    #[serde(default)]
    pub terminates: bool,
    pub fixed_response: Option<RawFixedResponse>,
    #[serde(default)]
    pub overrides: RawOverrides,
}

#[derive(Debug, Clone, Deserialize)]
pub struct RawFixedResponse {
    #[serde(default = "default_fixed_status")]
    pub status_code: u16,
    #[serde(default)]
    pub message_body: String,
    #[serde(default = "default_content_type")]
    pub content_type: String,
    pub location: Option<String>,
}

fn default_fixed_status() -> u16 {
    200
}
fn default_content_type() -> String {
    "text/plain".into()
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct RawOverrides {
    pub default_pools: Option<Vec<String>>,
    pub fallback_pool: Option<String>,
    pub region_pools: Option<BTreeMap<String, Vec<String>>>,
    pub country_pools: Option<BTreeMap<String, Vec<String>>>,
    pub pop_pools: Option<BTreeMap<String, Vec<String>>>,
    pub steering_policy: Option<String>,
    pub random_steering: Option<RawRandomSteering>,
    pub session_affinity: Option<String>,
    pub session_affinity_ttl: Option<u32>,
    pub session_affinity_attributes: Option<RawAffinityAttributes>,
    pub adaptive_routing: Option<RawAdaptiveRouting>,
    pub location_strategy: Option<RawLocationStrategy>,
    pub ttl: Option<u32>,
}
