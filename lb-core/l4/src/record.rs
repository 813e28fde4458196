//! The layer-4 log (docs/operations.md#the-layer-4-log): one JSON line per TCP connection and per
//! UDP flow, written when it ends — where it went, the bytes (and datagrams) each way, how long
//! it lasted and why it ended. Handed to `lb_records`' queue; encoded by the log's thread.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use lb_core::config::{Config, LbId};
use lb_core::steering::Target;
use serde::Serialize;

/// Where layer-4 records go (`--l4-log`). Equal when it is the same log.
#[derive(Debug, Clone)]
pub struct L4Log(pub Arc<lb_records::Sink<L4Record>>);

impl PartialEq for L4Log {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for L4Log {}

/// Why a connection or flow ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Close {
    /// Both sides finished sending (TCP).
    Done,
    /// No byte (or datagram) either way for the idle timeout.
    Idle,
    /// A read or write on the client's side failed (a reset).
    ClientError,
    /// A read or write on the endpoint's side failed.
    OriginError,
    /// No pool could take it.
    NoPool,
    /// No endpoint accepted the connection (the retry included).
    ConnectFailed,
    /// The PROXY header could not be sent.
    HeaderFailed,
    /// The UDP flow table was full and this flow was the least recently active.
    Evicted,
    /// The listener stopped (a reload removed the port, or the node stops).
    Stopped,
}

impl Close {
    pub fn name(self) -> &'static str {
        match self {
            Close::Done => "done",
            Close::Idle => "idle_timeout",
            Close::ClientError => "client_error",
            Close::OriginError => "origin_error",
            Close::NoPool => "no_pool",
            Close::ConnectFailed => "connect_failed",
            Close::HeaderFailed => "proxy_header_failed",
            Close::Evicted => "evicted",
            Close::Stopped => "stopped",
        }
    }
}

/// Datagram counts and times of a UDP flow.
#[derive(Debug, Clone, Copy, Default)]
pub struct Datagrams {
    pub from_client: u64,
    pub to_client: u64,
    /// The last datagram either way, after the first.
    pub last_after: Duration,
}

/// One connection or flow.
#[derive(Debug)]
pub struct L4Record {
    pub(crate) udp: Option<Datagrams>,
    pub(crate) opened: SystemTime,
    pub(crate) lasted: Duration,
    pub(crate) client: SocketAddr,
    pub(crate) listen_port: u16,
    pub(crate) config: Arc<Config>,
    pub(crate) lb: LbId,
    pub(crate) first: Option<Target>,
    pub(crate) target: Option<Target>,
    pub(crate) bytes_in: u64,
    pub(crate) bytes_out: u64,
    pub(crate) close: Close,
}

#[derive(Serialize)]
struct Json<'a> {
    time: String,
    protocol: &'static str,
    client_ip: String,
    client_port: u16,
    listen_port: u16,
    load_balancer: Option<&'a str>,
    pool: Option<&'a str>,
    endpoint: Option<&'a str>,
    retried_from: Option<String>,
    bytes_in: u64,
    bytes_out: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    datagrams_in: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    datagrams_out: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_datagram_ms: Option<f64>,
    duration_ms: f64,
    close_reason: &'static str,
}

fn millis(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

impl L4Record {
    fn names(&self, t: Option<Target>) -> (Option<&str>, Option<&str>) {
        let Some(t) = t else {
            return (None, None);
        };
        let pool = self.config.pools.get(t.pool.0);
        let endpoint = pool.and_then(|p| p.endpoints.get(t.endpoint.0));
        (
            pool.map(|p| p.name.as_str()),
            endpoint.map(|e| e.name.as_str()),
        )
    }
}

impl lb_records::Record for L4Record {
    fn is_error(&self) -> bool {
        matches!(
            self.close,
            Close::NoPool | Close::ConnectFailed | Close::OriginError | Close::HeaderFailed
        )
    }

    fn encode(&self, out: &mut Vec<u8>) {
        let (pool, endpoint) = self.names(self.target);
        let retried_from = match (self.first, self.target) {
            (Some(first), Some(last)) if first != last => match self.names(Some(first)) {
                (Some(p), Some(e)) => Some(format!("{p}/{e}")),
                _ => None,
            },
            (Some(first), None) => match self.names(Some(first)) {
                (Some(p), Some(e)) => Some(format!("{p}/{e}")),
                _ => None,
            },
            _ => None,
        };
        let json = Json {
            time: lb_records::time::rfc3339(self.opened),
            protocol: if self.udp.is_some() { "udp" } else { "tcp" },
            client_ip: self.client.ip().to_string(),
            client_port: self.client.port(),
            listen_port: self.listen_port,
            load_balancer: self
                .config
                .load_balancers
                .get(self.lb.0)
                .map(|l| l.name.as_str()),
            pool,
            endpoint,
            retried_from,
            bytes_in: self.bytes_in,
            bytes_out: self.bytes_out,
            datagrams_in: self.udp.map(|d| d.from_client),
            datagrams_out: self.udp.map(|d| d.to_client),
            last_datagram_ms: self.udp.map(|d| millis(d.last_after)),
            duration_ms: millis(self.lasted),
            close_reason: self.close.name(),
        };
        let _ = serde_json::to_writer(&mut *out, &json);
    }
}
