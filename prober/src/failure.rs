//! Why a probe failed, and why a monitor could not be set up.
//!
//! A [`Failure`] is shown — in results, gossip, logs and `meshlb probe` — as the short phrase
//! operators search for (`timeout (connect)`, `connection refused`, `unexpected code 503`,
//! `tls: certificate expired`); [`Failure::class`] is its bounded label for metrics.

use std::fmt;

/// The phase of a probe that ran out of time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Connect,
    TlsHandshake,
    WaitingForResponse,
    ReadingBody,
    NoEchoReply,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Phase::Connect => "connect",
            Phase::TlsHandshake => "tls handshake",
            Phase::WaitingForResponse => "waiting for response",
            Phase::ReadingBody => "reading body",
            Phase::NoEchoReply => "no echo reply",
        })
    }
}

/// Why one attempt failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Failure {
    /// The monitor's whole timeout passed.
    #[error("timeout")]
    Timeout,
    #[error("timeout ({0})")]
    TimeoutIn(Phase),
    #[error("connection refused")]
    Refused,
    #[error("connection reset")]
    Reset,
    #[error("host unreachable")]
    HostUnreachable,
    #[error("network unreachable")]
    NetworkUnreachable,
    #[error("connection closed")]
    Closed,
    #[error("connection closed before a complete response")]
    ClosedEarly,
    /// Another socket error, in the system's words.
    #[error("{0}")]
    Io(String),
    #[error("dns: {host}: {detail}")]
    Dns { host: String, detail: String },
    /// The TLS handshake failed (`certificate expired`, `unknown issuer ...`).
    #[error("tls: {0}")]
    Tls(String),
    #[error("http: {0}")]
    Http(String),
    /// A status code that `expected_codes` does not take.
    #[error("unexpected code {0}")]
    UnexpectedCode(u16),
    #[error("body mismatch")]
    BodyMismatch,
    /// A 3xx while `follow_redirects` is off (Cloudflare: the probe fails).
    #[error("redirect {code} to {location} (follow_redirects is off)")]
    RedirectNotFollowed { code: u32, location: String },
    #[error("more than {0} redirects")]
    TooManyRedirects(u32),
    /// The redirect's base URL could not be made.
    #[error("redirect: {0}")]
    RedirectBase(String),
    #[error("redirect to `{location}`: {detail}")]
    RedirectInvalid { location: String, detail: String },
    #[error("redirect to unsupported scheme {0}")]
    RedirectScheme(String),
    #[error("redirect without a host")]
    RedirectWithoutHost,
    #[error("icmp: {0}")]
    Icmp(String),
    /// UDP-ICMP: the echo that must pass before the datagram did not.
    #[error("icmp echo failed first: {0}")]
    EchoFirst(Box<Failure>),
    /// UDP-ICMP: an ICMP port-unreachable came back.
    #[error("udp: port unreachable")]
    PortUnreachable,
    #[error("udp: {0}")]
    Udp(String),
    /// SMTP: a reply code other than the step expects.
    #[error("unexpected code {code} to {step}{}", expected.map(|e| format!(" (expected {e})")).unwrap_or_default())]
    SmtpCode {
        code: u32,
        step: &'static str,
        expected: Option<u32>,
    },
    #[error("not an SMTP reply: {0:?}")]
    NotSmtp(String),
    #[error("reply longer than {0} lines")]
    LongReply(usize),
    /// LDAP: a step failed (`connect: ...`, `bind failed: invalid credentials (49)`).
    #[error("ldap: {0}")]
    Ldap(String),
    /// The monitor could not be set up (say, an unreadable CA file): every probe fails with it.
    #[error("{0}")]
    Setup(String),
    /// A private endpoint (`virtual_network_id`) that no live tunnel connection of the mesh
    /// reaches, or whose monitor type cannot cross a tunnel (ICMP, UDP, LDAP): never dialed
    /// directly (docs/private-networks.md).
    #[error("private network: no tunnel reaches it from this prober")]
    NoTunnel,
    /// The tunnel's connector could not connect to the private endpoint.
    #[error("private network: the tunnel's connector could not reach it")]
    TunnelUnreachable,
}

impl Failure {
    /// A socket error in the words operators search for.
    pub fn from_io(e: &std::io::Error) -> Failure {
        use std::io::ErrorKind::*;
        match e.kind() {
            ConnectionRefused => Failure::Refused,
            ConnectionReset => Failure::Reset,
            TimedOut => Failure::Timeout,
            HostUnreachable => Failure::HostUnreachable,
            NetworkUnreachable => Failure::NetworkUnreachable,
            UnexpectedEof => Failure::Closed,
            _ => Failure::Io(e.to_string()),
        }
    }

    /// The failure's class, a metric label of bounded cardinality.
    pub fn class(&self) -> &'static str {
        match self {
            Failure::Timeout | Failure::TimeoutIn(_) => "timeout",
            Failure::Refused => "refused",
            Failure::Reset => "reset",
            Failure::HostUnreachable | Failure::NetworkUnreachable | Failure::TunnelUnreachable => {
                "unreachable"
            }
            Failure::UnexpectedCode(_) | Failure::SmtpCode { .. } => "code",
            Failure::BodyMismatch => "body",
            Failure::RedirectNotFollowed { .. } | Failure::TooManyRedirects(_) => "redirect",
            Failure::PortUnreachable => "port_unreachable",
            Failure::NoTunnel => "no_tunnel",
            Failure::Closed
            | Failure::ClosedEarly
            | Failure::NotSmtp(_)
            | Failure::LongReply(_) => "other",
            // Free words (a TLS error, an LDAP step, an echo's own failure): classed by what
            // they say, so a handshake that was reset counts as a reset.
            _ => class_of_words(&self.to_string()),
        }
    }
}

/// A failure's class by the words in it: the first of these that it contains.
fn class_of_words(words: &str) -> &'static str {
    [
        ("timeout", "timeout"),
        ("refused", "refused"),
        ("reset", "reset"),
        ("tls:", "tls"),
        ("unexpected code", "code"),
        ("body mismatch", "body"),
        ("redirect", "redirect"),
        ("dns:", "dns"),
        ("port unreachable", "port_unreachable"),
        ("icmp", "icmp"),
        ("ldap", "ldap"),
        ("unreachable", "unreachable"),
    ]
    .iter()
    .find(|(needle, _)| words.contains(needle))
    .map_or("other", |(_, class)| class)
}

/// Serialised as its words, as results have always shown it.
impl serde::Serialize for Failure {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Why a monitor's check could not be built.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(transparent)]
    Tls(#[from] lb_tls::TlsError),
    #[error("header {name}: {reason}")]
    Header { name: String, reason: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_read_as_they_always_have() {
        let cases: Vec<(Failure, &str, &str)> = vec![
            (Failure::Timeout, "timeout", "timeout"),
            (
                Failure::TimeoutIn(Phase::Connect),
                "timeout (connect)",
                "timeout",
            ),
            (
                Failure::TimeoutIn(Phase::TlsHandshake),
                "timeout (tls handshake)",
                "timeout",
            ),
            (Failure::Refused, "connection refused", "refused"),
            (Failure::UnexpectedCode(503), "unexpected code 503", "code"),
            (Failure::BodyMismatch, "body mismatch", "body"),
            (
                Failure::RedirectNotFollowed {
                    code: 301,
                    location: "/x".into(),
                },
                "redirect 301 to /x (follow_redirects is off)",
                "redirect",
            ),
            (
                Failure::RedirectWithoutHost,
                "redirect without a host",
                "redirect",
            ),
            (
                Failure::RedirectScheme("ftp".into()),
                "redirect to unsupported scheme ftp",
                "redirect",
            ),
            (
                Failure::Dns {
                    host: "a.test".into(),
                    detail: "no address".into(),
                },
                "dns: a.test: no address",
                "dns",
            ),
            (
                Failure::Tls("certificate expired".into()),
                "tls: certificate expired",
                "tls",
            ),
            (
                Failure::Tls("connection reset".into()),
                "tls: connection reset",
                "reset",
            ),
            (
                Failure::PortUnreachable,
                "udp: port unreachable",
                "port_unreachable",
            ),
            (
                Failure::EchoFirst(Box::new(Failure::TimeoutIn(Phase::NoEchoReply))),
                "icmp echo failed first: timeout (no echo reply)",
                "timeout",
            ),
            (
                Failure::SmtpCode {
                    code: 554,
                    step: "greeting",
                    expected: Some(220),
                },
                "unexpected code 554 to greeting (expected 220)",
                "code",
            ),
            (
                Failure::SmtpCode {
                    code: 421,
                    step: "EHLO",
                    expected: None,
                },
                "unexpected code 421 to EHLO",
                "code",
            ),
            (
                Failure::Ldap("bind failed: invalid credentials (49)".into()),
                "ldap: bind failed: invalid credentials (49)",
                "ldap",
            ),
            (Failure::Closed, "connection closed", "other"),
        ];
        for (failure, words, class) in cases {
            assert_eq!(failure.to_string(), words);
            assert_eq!(failure.class(), class, "{words}");
            assert_eq!(
                serde_json::to_string(&failure).expect("json"),
                format!("{words:?}")
            );
        }
    }
}
