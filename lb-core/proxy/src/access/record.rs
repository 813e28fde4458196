//! One access record and its two encodings: JSON lines (every field, names stable, listed in
//! docs/operations.md#access-logs; `lb_records::JsonLine`) and Apache's `combined` format for
//! tools that read it.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use http::{HeaderValue, Version};
use lb_core::config::{Address, Config, Endpoint, LbId};
use lb_core::steering::{Target, Why};
use lb_records::time::{self, Rfc3339};
use lb_records::JsonLine;

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
            AccessFormat::Json => self.json(out),
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

fn protocol(v: Version) -> &'static str {
    match v {
        Version::HTTP_09 => "HTTP/0.9",
        Version::HTTP_10 => "HTTP/1.0",
        Version::HTTP_2 => "HTTP/2.0",
        Version::HTTP_3 => "HTTP/3.0",
        _ => "HTTP/1.1",
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

impl AccessRecord {
    fn endpoint(&self, t: Target) -> Option<(&str, &Endpoint)> {
        let pool = self.config.as_ref()?.pools.get(t.pool.0)?;
        Some((&pool.name, pool.endpoints.get(t.endpoint.0)?))
    }

    /// The JSON line: every field of docs/operations.md#access-logs, in that order.
    fn json(&self, out: &mut Vec<u8>) {
        let served = self.served_by.and_then(|t| self.endpoint(t));
        let why = self.decision.as_ref().map(|d| d.why);
        let retried_from = match (self.first, self.served_by) {
            (Some(first), Some(last)) if first != last => self.endpoint(first),
            _ => None,
        };
        let located = why.and_then(|w| w.location);
        let mut j = JsonLine::new(out);
        j.shown("time", Some(Rfc3339(self.time)))
            .shown("client_ip", Some(self.client.ip()))
            .u64("client_port", Some(u64::from(self.client.port())))
            .str("tls_version", self.tls.as_ref().map(|t| t.version))
            .str("sni", self.tls.as_ref().and_then(|t| t.sni.as_deref()))
            .str("protocol", Some(protocol(self.version)))
            .text("method", self.texts.get(Text::Method))
            .text("host", self.texts.get(Text::Host))
            .text("path", self.texts.get(Text::Path));
        if self.query {
            j.text("query", self.texts.get(Text::Query));
        }
        j.u64("status", Some(u64::from(self.status)))
            .u64("bytes_in", Some(self.bytes_in))
            .u64("bytes_out", self.bytes_out)
            .millis("duration_ms", Some(self.total))
            .millis("origin_connect_ms", self.connect)
            .millis("origin_first_byte_ms", self.first_byte)
            .str(
                "load_balancer",
                self.lb
                    .and_then(|lb| self.config.as_ref()?.load_balancers.get(lb.0))
                    .map(|lb| lb.name.as_str()),
            )
            .str("pool", served.map(|(p, _)| p))
            .str("endpoint", served.map(|(_, e)| e.name.as_str()))
            .shown(
                "endpoint_address",
                served.map(|(_, e)| Authority(e, self.origin_tls)),
            )
            .str("steering_policy", why.map(|w| w.policy.name()))
            .str("reason", why.map(|w| w.reason.name()))
            .strs("rules", self.decision.as_ref().map_or(&[], |d| &d.rules))
            .bool("affinity_hit", self.affinity_hit)
            .str("client_region", located.map(|(r, _)| r.code()))
            .str("location_source", located.map(|(_, s)| s.code()))
            .object(
                "retried_from",
                retried_from
                    .map(|(pool, e)| [("pool", pool), ("endpoint", e.name.as_str())])
                    .as_ref()
                    .map(|f| &f[..]),
            )
            .str("error", error_class(self.status))
            .str("request_id", self.request_id.to_str().ok())
            .text("user_agent", self.texts.get(Text::UserAgent))
            .text("referer", self.texts.get(Text::Referer))
            .end();
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
