//! Connections to origins, one pool per proxy worker: HTTP/1.1 keep-alive over plain TCP or
//! TLS (the load balancer's `origin_tls`), each open connection counted under its origin's
//! address for least_connections.
//!
//! Written on hyper's connection API rather than hyper-util's general-purpose client: a
//! worker's requests never leave its thread, so the pool is a plain list per origin and a
//! request goes straight to its connection's task (bench/proxy.sh).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::{Request, Response};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::body::ProxyBody;
use super::live::ByAuthority;

/// Idle connections kept per origin; more are closed when released.
const MAX_IDLE_PER_ORIGIN: usize = 256;
/// Idle connections tried before opening a new one when the origin keeps closing them.
const MAX_STALE_TRIES: usize = 4;

/// Where and how to connect.
#[derive(Clone, Copy)]
pub struct Origin<'a> {
    /// `ip:port` or `host:port`.
    pub authority: &'a str,
    /// TLS settings and the name to send as SNI and verify, when the origin speaks HTTPS.
    pub tls: Option<(&'a Arc<rustls::ClientConfig>, &'a str)>,
}

/// TLS settings of a connection: their identity (the config's address) and the server name.
type TlsKey = Option<(usize, Box<str>)>;

fn same_tls(key: &TlsKey, origin: &Origin<'_>) -> bool {
    match (key, origin.tls) {
        (None, None) => true,
        (Some((id, name)), Some((config, want))) => {
            *id == Arc::as_ptr(config) as usize && **name == *want
        }
        _ => false,
    }
}

/// Where a connection's idle list is: `(slot, variant)` in `Pools::idle`.
type Place = (usize, usize);

/// Idle connections, found without allocating on the request path: a slot per origin
/// address, and in it a list per TLS settings (plain first, usually the only one).
#[derive(Default)]
struct Pools {
    slots: HashMap<String, usize>,
    idle: Vec<Vec<(TlsKey, Vec<Idle>)>>,
}

impl Pools {
    fn find(&self, origin: &Origin<'_>) -> Option<Place> {
        let slot = *self.slots.get(origin.authority)?;
        let variant = self.idle[slot]
            .iter()
            .position(|(tls, _)| same_tls(tls, origin))?;
        Some((slot, variant))
    }

    /// Finds or makes the place for `origin`'s connections (allocates only the first time).
    fn place(&mut self, origin: &Origin<'_>) -> Place {
        if let Some(place) = self.find(origin) {
            return place;
        }
        let slot = match self.slots.get(origin.authority) {
            Some(&slot) => slot,
            None => {
                self.idle.push(Vec::new());
                let slot = self.idle.len() - 1;
                self.slots.insert(origin.authority.to_string(), slot);
                slot
            }
        };
        let tls = origin
            .tls
            .map(|(c, name)| (Arc::as_ptr(c) as usize, Box::from(name)));
        self.idle[slot].push((tls, Vec::new()));
        (slot, self.idle[slot].len() - 1)
    }

    fn list(&mut self, (slot, variant): Place) -> Option<&mut Vec<Idle>> {
        Some(&mut self.idle.get_mut(slot)?.get_mut(variant)?.1)
    }
}

/// How reaching the origin failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamError {
    /// Nothing reached the origin: refused, unreachable, or the connect timed out.
    Connect { timed_out: bool },
    /// The TLS handshake failed (Cloudflare's 525).
    TlsHandshake,
    /// The origin's certificate is not valid for the name (Cloudflare's 526).
    TlsCertificate,
    /// The connection broke after the request was sent, before the response head.
    Exchange,
}

/// A connection in use; give it back with `release` once its response is read, or drop it
/// to close the connection.
pub struct Lease {
    place: Place,
    sender: SendRequest<ProxyBody>,
}

struct Idle {
    sender: SendRequest<ProxyBody>,
    since: Instant,
}

/// One worker's connections to origins.
pub struct Upstream {
    pools: Mutex<Pools>,
    counters: ByAuthority,
    connect_timeout: Duration,
    idle_timeout: Duration,
}

/// Counts a connection as open while its task lives.
struct OpenConnection(Option<Arc<AtomicU32>>);

impl OpenConnection {
    fn new(counter: Option<Arc<AtomicU32>>) -> Self {
        if let Some(c) = &counter {
            c.fetch_add(1, Ordering::Relaxed);
        }
        OpenConnection(counter)
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        if let Some(c) = &self.0 {
            c.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

fn is_certificate_error(e: &std::io::Error) -> bool {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .is_some_and(|tls| matches!(tls, rustls::Error::InvalidCertificate(_)))
}

impl Upstream {
    pub fn new(counters: ByAuthority, connect_timeout: Duration, idle_timeout: Duration) -> Self {
        Upstream {
            pools: Mutex::new(Pools::default()),
            counters,
            connect_timeout,
            idle_timeout,
        }
    }

    /// Sends `req` (origin-form URI, Host set) on an idle connection to `origin` or a new one.
    pub async fn send(
        &self,
        origin: Origin<'_>,
        mut req: Request<ProxyBody>,
    ) -> Result<(Response<Incoming>, Lease), UpstreamError> {
        for _ in 0..MAX_STALE_TRIES {
            let Some((mut sender, place)) = self.checkout(&origin) else {
                break;
            };
            if sender.ready().await.is_err() {
                continue;
            }
            match sender.try_send_request(req).await {
                Ok(resp) => return Ok((resp, Lease { place, sender })),
                // Closed before the request went out (the origin ended an idle connection):
                // hyper hands the request back and it goes to the next connection.
                Err(mut e) => match e.take_message() {
                    Some(unsent) => req = unsent,
                    None => return Err(UpstreamError::Exchange),
                },
            }
        }
        let mut sender = self.connect(origin).await?;
        let place = match self.pools.lock() {
            Ok(mut pools) => pools.place(&origin),
            Err(_) => return Err(UpstreamError::Exchange),
        };
        match sender.send_request(req).await {
            Ok(resp) => Ok((resp, Lease { place, sender })),
            Err(_) => Err(UpstreamError::Exchange),
        }
    }

    /// Returns a connection whose response has been read to the end.
    pub fn release(&self, lease: Lease) {
        if lease.sender.is_closed() {
            return;
        }
        let Ok(mut pools) = self.pools.lock() else {
            return;
        };
        if let Some(list) = pools.list(lease.place) {
            if list.len() < MAX_IDLE_PER_ORIGIN {
                list.push(Idle {
                    sender: lease.sender,
                    since: Instant::now(),
                });
            }
        }
    }

    /// Returns a connection once the response streaming on it has ended.
    pub fn release_when_done(self: &Arc<Self>, mut lease: Lease) {
        let me = Arc::clone(self);
        tokio::spawn(async move {
            if lease.sender.ready().await.is_ok() {
                me.release(lease);
            }
        });
    }

    /// The most recently used live idle connection (LIFO keeps few connections hot and lets
    /// the rest time out).
    fn checkout(&self, origin: &Origin<'_>) -> Option<(SendRequest<ProxyBody>, Place)> {
        let mut pools = self.pools.lock().ok()?;
        let place = pools.find(origin)?;
        let list = pools.list(place)?;
        while let Some(c) = list.pop() {
            if !c.sender.is_closed() && c.since.elapsed() < self.idle_timeout {
                return Some((c.sender, place));
            }
        }
        None
    }

    async fn connect(&self, origin: Origin<'_>) -> Result<SendRequest<ProxyBody>, UpstreamError> {
        let refused = UpstreamError::Connect { timed_out: false };
        let timed_out = UpstreamError::Connect { timed_out: true };
        let tcp =
            match tokio::time::timeout(self.connect_timeout, tcp_connect(origin.authority)).await {
                Ok(Ok(s)) => s,
                Ok(Err(_)) => return Err(refused),
                Err(_) => return Err(timed_out),
            };
        let _ = tcp.set_nodelay(true);
        let open = OpenConnection::new(self.counters.get(origin.authority).cloned());
        match origin.tls {
            None => {
                let (sender, conn) = http1::handshake(TokioIo::new(tcp))
                    .await
                    .map_err(|_| refused)?;
                tokio::spawn(async move {
                    let _open = open;
                    let _ = conn.with_upgrades().await;
                });
                Ok(sender)
            }
            Some((config, name)) => {
                let server_name = ServerName::try_from(name.to_string())
                    .map_err(|_| UpstreamError::TlsHandshake)?;
                let handshake = TlsConnector::from(Arc::clone(config)).connect(server_name, tcp);
                let tls = match tokio::time::timeout(self.connect_timeout, handshake).await {
                    Ok(Ok(s)) => s,
                    Ok(Err(e)) if is_certificate_error(&e) => {
                        return Err(UpstreamError::TlsCertificate)
                    }
                    Ok(Err(_)) | Err(_) => return Err(UpstreamError::TlsHandshake),
                };
                let (sender, conn) = http1::handshake(TokioIo::new(tls))
                    .await
                    .map_err(|_| UpstreamError::TlsHandshake)?;
                tokio::spawn(async move {
                    let _open = open;
                    let _ = conn.with_upgrades().await;
                });
                Ok(sender)
            }
        }
    }
}

async fn tcp_connect(authority: &str) -> std::io::Result<TcpStream> {
    if let Ok(addr) = authority.parse::<SocketAddr>() {
        return TcpStream::connect(addr).await;
    }
    let mut last = std::io::Error::new(
        std::io::ErrorKind::NotFound,
        format!("{authority}: no address"),
    );
    for addr in tokio::net::lookup_host(authority).await? {
        match TcpStream::connect(addr).await {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}

#[cfg(test)]
#[path = "upstream_tests.rs"]
mod tests;
