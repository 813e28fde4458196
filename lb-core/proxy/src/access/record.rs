//! One access record and its two encodings: JSON lines (every field, names stable, listed in
//! docs/operations.md#access-logs) and Apache's `combined` format for tools that read it.

use std::borrow::Cow;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use http::{HeaderValue, Version};
use lb_core::config::{Address, Config, Endpoint, LbId};
use lb_core::steering::{Target, Why};
use lb_records::time::{self, Rfc3339};
use serde::{Serialize, Serializer};

use super::texts::{Text, Texts};
use super::TlsFacts;

/// How records are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AccessFormat {
    #[default]
    Json,
    /// `%h - - [%t] "%r" %>s %b "%{Referer}i" "%{User-Agent}i"`, as Apache and nginx write it.
    Combined,
}

impl AccessFormat {
    pub fn parse(s: &str) -> Option<AccessFormat> {
        match s {
            "json" => Some(AccessFormat::Json),
            "combined" => Some(AccessFormat::Combined),
            _ => None,
        }
    }
}

/// What steering decided, kept for the record.
#[derive(Debug)]
pub(crate) struct Decided {
    pub why: Why,
    pub rules: Vec<String>,
}

/// One request, as the access log writes it.
#[derive(Debug)]
pub struct AccessRecord {
    pub(crate) format: AccessFormat,
    pub(crate) query: bool,
    pub(crate) time: SystemTime,
    pub(crate) start: Instant,
    pub(crate) client: SocketAddr,
    pub(crate) tls: Option<TlsFacts>,
    pub(crate) version: Version,
    /// Method, host, path, query, user agent and referer, copied and bounded.
    pub(crate) texts: Texts,
    pub(crate) request_id: HeaderValue,
    pub(crate) bytes_in: u64,
    /// The generation's config, for the names of the load balancer, pool and endpoint:
    /// looked up by the writer, not on the request's path.
    pub(crate) config: Option<Arc<Config>>,
    pub(crate) lb: Option<LbId>,
    pub(crate) decision: Option<Decided>,
    pub(crate) affinity_hit: bool,
    pub(crate) first: Option<Target>,
    pub(crate) served_by: Option<Target>,
    /// The load balancer speaks TLS to its origins (the endpoint's default port is 443).
    pub(crate) origin_tls: bool,
    pub(crate) connect: Option<Duration>,
    pub(crate) first_byte: Option<Duration>,
    pub(crate) status: u16,
    pub(crate) bytes_out: Option<u64>,
    pub(crate) total: Duration,
}

impl lb_records::Record for AccessRecord {
    fn is_error(&self) -> bool {
        self.status >= 500
    }

    fn encode(&self, out: &mut Vec<u8>) {
        match self.format {
            AccessFormat::Json => {
                // Writing to a Vec fails only on a serializer error, which these types have not.
                let _ = serde_json::to_writer(&mut *out, &self.json());
            }
            AccessFormat::Combined => self.combined(out),
        }
    }
}

/// Cloudflare's name for a 52x (and meshlb's 530), so that dashboards need no table.
pub(crate) fn error_class(status: u16) -> Option<&'static str> {
    Some(match status {
        502 => "bad_gateway",
        521 => "origin_refused",
        522 => "origin_connect_timeout",
        523 => "origin_unreachable",
        524 => "origin_response_timeout",
        525 => "origin_tls_handshake_failed",
        526 => "origin_certificate_invalid",
        530 => "no_pool_available",
        _ => return None,
    })
}

fn millis(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

fn protocol(v: Version) -> &'static str {
    match v {
        Version::HTTP_09 => "HTTP/0.9",
        Version::HTTP_10 => "HTTP/1.0",
        Version::HTTP_2 => "HTTP/2.0",
        Version::HTTP_3 => "HTTP/3.0",
        _ => "HTTP/1.1",
    }
}

/// A value written through its `Display`, without an intermediate string.
struct Shown<T>(T);

impl<T: fmt::Display> Serialize for Shown<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}

/// An endpoint's `host:port` as the proxy reaches it (`live::origin_authority`).
struct Authority<'a>(&'a Endpoint, bool);

impl fmt::Display for Authority<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let port = match (self.0.port, self.1) {
            (0, false) => 80,
            (0, true) => 443,
            (p, _) => p,
        };
        match &self.0.address {
            Address::Ip(ip) => write!(f, "{}", SocketAddr::new(*ip, port)),
            Address::Hostname(h) => write!(f, "{h}:{port}"),
        }
    }
}

/// The pool and endpoint of a target, by name.
#[derive(Serialize)]
struct Place<'a> {
    pool: &'a str,
    endpoint: &'a str,
}

#[derive(Serialize)]
struct Json<'a> {
    time: Shown<Rfc3339>,
    client_ip: IpAddr,
    client_port: u16,
    tls_version: Option<&'static str>,
    sni: Option<&'a str>,
    protocol: &'static str,
    method: Option<Cow<'a, str>>,
    host: Option<Cow<'a, str>>,
    path: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    query: Option<Option<Cow<'a, str>>>,
    status: u16,
    bytes_in: u64,
    bytes_out: Option<u64>,
    duration_ms: f64,
    origin_connect_ms: Option<f64>,
    origin_first_byte_ms: Option<f64>,
    load_balancer: Option<&'a str>,
    pool: Option<&'a str>,
    endpoint: Option<&'a str>,
    endpoint_address: Option<Shown<Authority<'a>>>,
    steering_policy: Option<&'static str>,
    reason: Option<&'static str>,
    rules: &'a [String],
    affinity_hit: bool,
    client_region: Option<&'static str>,
    location_source: Option<&'static str>,
    retried_from: Option<Place<'a>>,
    error: Option<&'static str>,
    request_id: &'a str,
    user_agent: Option<Cow<'a, str>>,
    referer: Option<Cow<'a, str>>,
}

impl AccessRecord {
    fn endpoint(&self, t: Target) -> Option<(&str, &Endpoint)> {
        let pool = self.config.as_ref()?.pools.get(t.pool.0)?;
        Some((&pool.name, pool.endpoints.get(t.endpoint.0)?))
    }

    fn place(&self, t: Target) -> Option<Place<'_>> {
        let (pool, e) = self.endpoint(t)?;
        Some(Place {
            pool,
            endpoint: &e.name,
        })
    }

    fn json(&self) -> Json<'_> {
        let served = self.served_by.and_then(|t| self.endpoint(t));
        let why = self.decision.as_ref().map(|d| d.why);
        let retried_from = match (self.first, self.served_by) {
            (Some(first), Some(last)) if first != last => self.place(first),
            _ => None,
        };
        Json {
            time: Shown(Rfc3339(self.time)),
            client_ip: self.client.ip(),
            client_port: self.client.port(),
            tls_version: self.tls.as_ref().map(|t| t.version),
            sni: self.tls.as_ref().and_then(|t| t.sni.as_deref()),
            protocol: protocol(self.version),
            method: self.texts.text(Text::Method),
            host: self.texts.text(Text::Host),
            path: self.texts.text(Text::Path),
            query: self.query.then(|| self.texts.text(Text::Query)),
            status: self.status,
            bytes_in: self.bytes_in,
            bytes_out: self.bytes_out,
            duration_ms: millis(self.total),
            origin_connect_ms: self.connect.map(millis),
            origin_first_byte_ms: self.first_byte.map(millis),
            load_balancer: self
                .lb
                .and_then(|lb| self.config.as_ref()?.load_balancers.get(lb.0))
                .map(|lb| lb.name.as_str()),
            pool: served.map(|(p, _)| p),
            endpoint: served.map(|(_, e)| e.name.as_str()),
            endpoint_address: served.map(|(_, e)| Shown(Authority(e, self.origin_tls))),
            steering_policy: why.map(|w| w.policy.name()),
            reason: why.map(|w| w.reason.name()),
            rules: self.decision.as_ref().map_or(&[], |d| &d.rules),
            affinity_hit: self.affinity_hit,
            client_region: why.and_then(|w| w.location).map(|(r, _)| r.code()),
            location_source: why.and_then(|w| w.location).map(|(_, s)| s.code()),
            retried_from,
            error: error_class(self.status),
            request_id: self.request_id.to_str().unwrap_or_default(),
            user_agent: self.texts.text(Text::UserAgent),
            referer: self.texts.text(Text::Referer),
        }
    }

    fn combined(&self, out: &mut Vec<u8>) {
        use std::io::Write;
        let _ = write!(
            out,
            "{} - - [{}] \"",
            self.client.ip(),
            time::common_log(self.time)
        );
        escape(self.texts.get(Text::Method), out);
        out.push(b' ');
        escape(self.texts.get(Text::Path), out);
        let query = self.texts.get(Text::Query);
        if self.query && !query.is_empty() {
            out.push(b'?');
            escape(query, out);
        }
        let _ = write!(out, " {}\" {} ", protocol(self.version), self.status);
        match self.bytes_out {
            Some(n) if n > 0 => {
                let _ = write!(out, "{n}");
            }
            _ => out.push(b'-'),
        }
        for field in [Text::Referer, Text::UserAgent] {
            out.extend_from_slice(b" \"");
            match self.texts.get(field) {
                [] => out.push(b'-'),
                v => escape(v, out),
            }
            out.push(b'"');
        }
    }
}

/// As nginx escapes log variables: `"`, `\` and bytes outside printable ASCII as `\xHH`.
fn escape(bytes: &[u8], out: &mut Vec<u8>) {
    for &b in bytes {
        if b == b'"' || b == b'\\' || !(0x20..0x7f).contains(&b) {
            out.extend_from_slice(format!("\\x{b:02X}").as_bytes());
        } else {
            out.push(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combined_escapes_what_would_break_its_quotes() {
        let mut out = Vec::new();
        escape(b"a\"b\\c\x01\xff", &mut out);
        assert_eq!(out, b"a\\x22b\\x5Cc\\x01\\xFF");
    }

    #[test]
    fn every_52x_has_a_class() {
        for s in [502, 521, 522, 523, 524, 525, 526, 530] {
            assert!(error_class(s).is_some(), "{s}");
        }
        assert!(error_class(200).is_none() && error_class(503).is_none());
    }
}
