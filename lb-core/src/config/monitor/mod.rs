//! Validated monitors: what a prober runs against each endpoint of a pool. The types with
//! settings of their own have a module each, holding those settings, their defaults and their
//! validation from the config's (Cloudflare's) fields: [`http`] (http and https) and
//! [`ldap`]. The other types take only a port. A type's facts are [`MonitorType`]'s; its
//! probe is `prober/src/monitors/<type>.rs`.

mod http;
mod ldap;

pub use http::{CodesError, ExpectedCodes, HttpCheck, HttpMethod};
pub use ldap::{LdapCheck, LdapScheme};

use std::time::Duration;

/// A health monitor, validated. Field meanings and defaults are Cloudflare's.
#[derive(Debug, Clone, PartialEq)]
pub struct Monitor {
    pub name: String,
    pub description: String,
    pub kind: MonitorKind,
    /// Time between probes of one endpoint from one prober (1 s ..= 3600 s; default 60 s).
    pub interval: Duration,
    /// The deadline of each attempt of a probe (default 5 s; 1 s up to the interval); each
    /// retry gets its own (`prober/src/monitors/mod.rs`).
    pub timeout: Duration,
    /// Immediate retries after a failed probe (0..=5; default 2).
    pub retries: u8,
    /// Passing probes in a row to turn healthy (Cloudflare's `consecutive_up`; 0 means 1).
    pub consecutive_up: u32,
    /// Failing probes in a row to turn unhealthy (`consecutive_down`; 0 means 1).
    pub consecutive_down: u32,
    /// Cloudflare's "simulate zone": probe as the zone's proxied traffic reaches origins.
    pub probe_zone: Option<String>,
    /// What `probe_zone` resolves to: the TLS the proxy uses towards the zone's origins.
    pub zone_tls: Option<crate::config::OriginTlsSettings>,
    /// The anti-flap rule that turns raw probe results into a debounced state.
    pub threshold: Threshold,
}

impl Monitor {
    /// The files a prober reads as it builds this monitor's check: the CA of an HTTPS or LDAP
    /// monitor, or with `probe_zone` the zone's CA and client certificate and key. A prober
    /// builds the check again on a reload that changed their bytes, as the proxy does for its
    /// origins' TLS (`lb-core/proxy/src/route/origin_tls.rs`). Secrets are not among them: they
    /// are read at every probe.
    pub fn tls_files(&self) -> Vec<&std::path::Path> {
        let mut files = Vec::new();
        // What the check reads (prober/src/monitors/http.rs): a zone whose TLS is off leaves
        // the monitor's own CA in use.
        let zone = self
            .zone_tls
            .as_ref()
            .filter(|z| z.mode != crate::config::OriginTls::Off);
        match zone {
            Some(zone) => {
                files.extend(zone.trust_anchors());
                if let Some((cert, key)) = zone.identity() {
                    files.extend([cert, key]);
                }
            }
            None => match &self.kind {
                MonitorKind::Http(h) | MonitorKind::Https(h) => files.extend(h.ca_file.as_deref()),
                MonitorKind::Ldap(l) => files.extend(l.ca_file.as_deref()),
                MonitorKind::Tcp { .. }
                | MonitorKind::UdpIcmp { .. }
                | MonitorKind::IcmpPing
                | MonitorKind::Smtp { .. } => {}
            },
        }
        files
    }
}

/// Anti-flap rules. Cloudflare's consecutive counts are the default; Azure Front Door's window
/// and gdnsd's counter are offered because each damps a different kind of flapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threshold {
    /// `up` passes in a row to turn healthy, `down` failures in a row to turn unhealthy.
    Consecutive { up: u32, down: u32 },
    /// Healthy while at least `required` of the last `sample_size` probes passed.
    Window { sample_size: u32, required: u32 },
    /// gdnsd: while up, `down_thresh` failures (a run of `ok_thresh` passes forgives them) turn
    /// it down; while down, `up_thresh` passes in a row bring it back.
    Counter {
        down_thresh: u32,
        ok_thresh: u32,
        up_thresh: u32,
    },
}

crate::choice! {
    /// A threshold's `mode`: which of [`Threshold`]'s rules it is.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum ThresholdMode {
        Consecutive => "consecutive",
        Window => "window",
        Counter => "counter",
    }
}

impl Threshold {
    /// Which rule it is.
    pub const fn mode(&self) -> ThresholdMode {
        match self {
            Threshold::Consecutive { .. } => ThresholdMode::Consecutive,
            Threshold::Window { .. } => ThresholdMode::Window,
            Threshold::Counter { .. } => ThresholdMode::Counter,
        }
    }
}

/// Where a secret comes from: never the config file itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretSource {
    File(std::path::PathBuf),
    Env(String),
}

/// A secret that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("cannot read password file {}: {error}", path.display())]
    File {
        path: std::path::PathBuf,
        error: std::io::Error,
    },
    #[error("environment variable {0} is not set")]
    Env(String),
}

impl SecretSource {
    /// Reads the secret now (files are re-read on every call so rotation needs no restart).
    pub fn read(&self) -> Result<String, SecretError> {
        match self {
            SecretSource::File(p) => std::fs::read_to_string(p)
                .map(|s| s.trim_end_matches(['\r', '\n']).to_string())
                .map_err(|error| SecretError::File {
                    path: p.clone(),
                    error,
                }),
            SecretSource::Env(name) => {
                std::env::var(name).map_err(|_| SecretError::Env(name.clone()))
            }
        }
    }
}

crate::choice! {
    /// A monitor's `type`, and what each takes: the facts the validator, the prober and the
    /// docs ask of a type (`MonitorKind` holds a validated monitor's own settings).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum MonitorType {
        Http => "http",
        Https => "https",
        Tcp => "tcp",
        UdpIcmp => "udp_icmp",
        IcmpPing => "icmp_ping",
        Smtp => "smtp",
        Ldap => "ldap",
    }
}

impl MonitorType {
    /// Takes the HTTP fields (`path`, `header`, `expected_codes`, `expected_body`,
    /// `follow_redirects`) and a `method` of GET or HEAD.
    pub const fn is_http(self) -> bool {
        match self {
            MonitorType::Http | MonitorType::Https => true,
            MonitorType::Tcp
            | MonitorType::UdpIcmp
            | MonitorType::IcmpPing
            | MonitorType::Smtp
            | MonitorType::Ldap => false,
        }
    }

    /// Speaks TLS whose trust anchors `ca_file` may add to.
    pub const fn takes_ca_file(self) -> bool {
        match self {
            MonitorType::Https | MonitorType::Ldap => true,
            MonitorType::Http
            | MonitorType::Tcp
            | MonitorType::UdpIcmp
            | MonitorType::IcmpPing
            | MonitorType::Smtp => false,
        }
    }

    /// The `method` a type other than HTTP accepts besides none (Cloudflare's TCP monitors
    /// send `connection_established`).
    pub const fn method(self) -> Option<&'static str> {
        match self {
            MonitorType::Tcp => Some("connection_established"),
            MonitorType::Http
            | MonitorType::Https
            | MonitorType::UdpIcmp
            | MonitorType::IcmpPing
            | MonitorType::Smtp
            | MonitorType::Ldap => None,
        }
    }

    /// What a probe of the type checks, in a sentence.
    pub const fn help(self) -> &'static str {
        match self {
            MonitorType::Http => "an HTTP request answered with an expected code (and body)",
            MonitorType::Https => "an HTTPS request answered with an expected code (and body)",
            MonitorType::Tcp => "a TCP connection established",
            MonitorType::UdpIcmp => {
                "an ICMP echo answered, then a UDP datagram that draws no port-unreachable"
            }
            MonitorType::IcmpPing => "an ICMP echo answered",
            MonitorType::Smtp => "an SMTP greeting 220, EHLO 250 and QUIT 221",
            MonitorType::Ldap => "an LDAP bind (and a base-object search) that succeeds",
        }
    }
}

/// The monitor type with the settings that only make sense for that type, so that an HTTP
/// expectation can never be attached to a TCP check.
#[derive(Debug, Clone, PartialEq)]
pub enum MonitorKind {
    Http(HttpCheck),
    Https(HttpCheck),
    /// The TCP connection is established (then closed).
    Tcp {
        port: u16,
    },
    /// An ICMP echo must pass, then a UDP datagram to `port` must not draw a port-unreachable.
    UdpIcmp {
        port: u16,
    },
    IcmpPing,
    /// Greeting 220, HELO/EHLO 250, QUIT 221.
    Smtp {
        port: u16,
    },
    /// Connect and bind (and optionally search); port 389 (636 for ldaps) by default.
    Ldap(LdapCheck),
}

impl MonitorKind {
    /// The port the monitor names, 0 when it leaves it to the endpoint or the default.
    pub fn port(&self) -> u16 {
        match self {
            MonitorKind::Http(h) | MonitorKind::Https(h) => h.port,
            MonitorKind::Tcp { port }
            | MonitorKind::UdpIcmp { port }
            | MonitorKind::Smtp { port } => *port,
            MonitorKind::Ldap(l) => l.port,
            MonitorKind::IcmpPing => 0,
        }
    }

    /// The protocol's well-known port (0 for ICMP and for udp_icmp, which has none).
    pub fn default_port(&self) -> u16 {
        match self {
            MonitorKind::Http(_) | MonitorKind::Tcp { .. } => 80,
            MonitorKind::Https(_) => 443,
            MonitorKind::Smtp { .. } => 25,
            MonitorKind::Ldap(l) if l.tls => 636,
            MonitorKind::Ldap(_) => 389,
            MonitorKind::IcmpPing | MonitorKind::UdpIcmp { .. } => 0,
        }
    }

    /// Port precedence: the monitor's, else the endpoint's, else the protocol default.
    pub fn resolve_port(&self, endpoint_port: u16) -> u16 {
        [self.port(), endpoint_port]
            .into_iter()
            .find(|&p| p != 0)
            .unwrap_or_else(|| self.default_port())
    }

    /// The monitor's type.
    pub fn monitor_type(&self) -> MonitorType {
        match self {
            MonitorKind::Http(_) => MonitorType::Http,
            MonitorKind::Https(_) => MonitorType::Https,
            MonitorKind::Tcp { .. } => MonitorType::Tcp,
            MonitorKind::UdpIcmp { .. } => MonitorType::UdpIcmp,
            MonitorKind::IcmpPing => MonitorType::IcmpPing,
            MonitorKind::Smtp { .. } => MonitorType::Smtp,
            MonitorKind::Ldap(_) => MonitorType::Ldap,
        }
    }

    /// The `type` value as written in the configuration.
    pub fn type_name(&self) -> &'static str {
        self.monitor_type().name()
    }
}
