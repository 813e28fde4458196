//! One access record and its two encodings: JSON lines (every field, names stable, listed in
//! docs/operations.md#access-logs) and Apache's `combined` format for tools that read it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use http::{HeaderValue, Method, Uri, Version};
use lb_core::config::{Config, LbId};
use lb_core::steering::{Target, Why};
use serde::Serialize;

use super::TlsFacts;
use lb_records::time;

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
    pub(crate) method: Method,
    pub(crate) host: Option<HeaderValue>,
    pub(crate) uri: Uri,
    pub(crate) user_agent: Option<HeaderValue>,
    pub(crate) referer: Option<HeaderValue>,
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

fn text(v: &Option<HeaderValue>) -> Option<&str> {
    v.as_ref().and_then(|v| v.to_str().ok())
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

/// The pool and endpoint of a target, by name.
#[derive(Serialize)]
struct Place<'a> {
    pool: &'a str,
    endpoint: &'a str,
}

#[derive(Serialize)]
struct Json<'a> {
    time: String,
    client_ip: String,
    client_port: u16,
    tls_version: Option<&'static str>,
    sni: Option<&'a str>,
    protocol: &'static str,
    method: &'a str,
    host: Option<&'a str>,
    path: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    query: Option<&'a str>,
    status: u16,
    bytes_in: u64,
    bytes_out: Option<u64>,
    duration_ms: f64,
    origin_connect_ms: Option<f64>,
    origin_first_byte_ms: Option<f64>,
    load_balancer: Option<&'a str>,
    pool: Option<&'a str>,
    endpoint: Option<&'a str>,
    endpoint_address: Option<String>,
    steering_policy: Option<&'static str>,
    reason: Option<&'static str>,
    rules: &'a [String],
    affinity_hit: bool,
    client_region: Option<&'static str>,
    location_source: Option<&'static str>,
    retried_from: Option<Place<'a>>,
    error: Option<&'static str>,
    request_id: &'a str,
    user_agent: Option<&'a str>,
    referer: Option<&'a str>,
}

impl AccessRecord {
    fn place(&self, t: Target) -> Option<Place<'_>> {
        let pool = self.config.as_ref()?.pools.get(t.pool.0)?;
        let endpoint = pool.endpoints.get(t.endpoint.0)?;
        Some(Place {
            pool: &pool.name,
            endpoint: &endpoint.name,
        })
    }

    fn json(&self) -> Json<'_> {
        let config = self.config.as_deref();
        let served = self.served_by.and_then(|t| self.place(t));
        let address = self.served_by.and_then(|t| {
            let e = config?.pools.get(t.pool.0)?.endpoints.get(t.endpoint.0)?;
            Some(crate::live::origin_authority(e, false))
        });
        let why = self.decision.as_ref().map(|d| d.why);
        let retried_from = match (self.first, self.served_by) {
            (Some(first), Some(last)) if first != last => self.place(first),
            _ => None,
        };
        let endpoint_named = served.is_some();
        Json {
            time: time::rfc3339(self.time),
            client_ip: self.client.ip().to_string(),
            client_port: self.client.port(),
            tls_version: self.tls.as_ref().map(|t| t.version),
            sni: self.tls.as_ref().and_then(|t| t.sni.as_deref()),
            protocol: protocol(self.version),
            method: self.method.as_str(),
            host: text(&self.host),
            path: self.uri.path(),
            query: if self.query { self.uri.query() } else { None },
            status: self.status,
            bytes_in: self.bytes_in,
            bytes_out: self.bytes_out,
            duration_ms: millis(self.total),
            origin_connect_ms: self.connect.map(millis),
            origin_first_byte_ms: self.first_byte.map(millis),
            load_balancer: self
                .lb
                .and_then(|lb| config?.load_balancers.get(lb.0))
                .map(|lb| lb.name.as_str()),
            pool: served.as_ref().map(|p| p.pool),
            endpoint: served.as_ref().map(|p| p.endpoint),
            endpoint_address: address.filter(|_| endpoint_named),
            steering_policy: why.map(|w| w.policy.name()),
            reason: why.map(|w| w.reason.name()),
            rules: self.decision.as_ref().map_or(&[], |d| &d.rules),
            affinity_hit: self.affinity_hit,
            client_region: why.and_then(|w| w.location).map(|(r, _)| r.code()),
            location_source: why.and_then(|w| w.location).map(|(_, s)| s.code()),
            retried_from,
            error: error_class(self.status),
            request_id: self.request_id.to_str().unwrap_or_default(),
            user_agent: text(&self.user_agent),
            referer: text(&self.referer),
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
        escape(self.method.as_str().as_bytes(), out);
        out.push(b' ');
        escape(self.uri.path().as_bytes(), out);
        if let Some(q) = self.uri.query().filter(|_| self.query) {
            out.push(b'?');
            escape(q.as_bytes(), out);
        }
        let _ = write!(out, " {}\" {} ", protocol(self.version), self.status);
        match self.bytes_out {
            Some(n) if n > 0 => {
                let _ = write!(out, "{n}");
            }
            _ => out.push(b'-'),
        }
        for v in [&self.referer, &self.user_agent] {
            out.extend_from_slice(b" \"");
            match v {
                Some(v) => escape(v.as_bytes(), out),
                None => out.push(b'-'),
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
