//! PoP to PoP: a PoP that holds no connection of a tunnel opens its streams through a PoP that
//! holds one (the *holder*). The relaying PoP dials the holder's tunnel listener over TLS, says
//! [`RELAY_MAGIC`] and proves it is a PoP of this mesh (HMAC-SHA256 under a key every PoP
//! derives from the cluster key, over the TLS session's exported value, as a connector's hello
//! does), then opens HTTP/2 streams on that one connection: `POST /relay` with the tunnel and
//! the target. The holder opens each on its own connections of the tunnel, never through
//! another relay: a stream takes at most one hop between PoPs.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hmac::{Hmac, Mac};
use rustls::pki_types::ServerName;
use sha2::Sha256;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::hello::{Answer, EXPORTER_LABEL};
use crate::holders::Holder;
use crate::pop::OpenError;
use crate::stream::TunnelStream;
use crate::token::TunnelId;
use crate::{TARGET_HEADER, TUNNEL_HEADER};
use lb_tls::pin::SpkiPin;

/// The first bytes of a relaying PoP's hello.
pub const RELAY_MAGIC: &[u8; 4] = b"MLP1";

/// The key PoPs prove to each other that they are of one mesh.
#[derive(Clone)]
pub struct RelayKey(pub [u8; 32]);

impl std::fmt::Debug for RelayKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RelayKey(..)")
    }
}

impl RelayKey {
    /// The relay key of a mesh whose cluster key is `cluster_key` (its text).
    pub fn derive(cluster_key: &[u8]) -> RelayKey {
        let mut mac = keyed(cluster_key);
        mac.update(b"meshlb tunnel relay key v1");
        RelayKey(mac.finalize().into_bytes().into())
    }

    pub(crate) fn proof(&self, exporter: &[u8]) -> [u8; 32] {
        let mut mac = keyed(&self.0);
        mac.update(b"meshlb tunnel relay hello v1");
        mac.update(exporter);
        mac.finalize().into_bytes().into()
    }

    /// Whether `proof` is this key's on the session, compared in constant time.
    pub(crate) fn verify(&self, proof: &[u8; 32], exporter: &[u8]) -> bool {
        let mut mac = keyed(&self.0);
        mac.update(b"meshlb tunnel relay hello v1");
        mac.update(exporter);
        mac.verify_slice(proof).is_ok()
    }
}

fn keyed(key: &[u8]) -> Hmac<Sha256> {
    <Hmac<Sha256> as Mac>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC takes a key of any length"))
}

struct Held {
    /// Which connection this is: its keepalive forgets this one, never a newer one.
    id: u64,
    pin: SpkiPin,
    send: h2::client::SendRequest<Bytes>,
    /// How long TCP, TLS and the hello took: the nearest holder answers first.
    handshake: Duration,
}

/// A PoP's (or a prober's) connections to the holders it relays through, one per holder,
/// made on first use and again once closed. A holder is verified by the pin gossip gives
/// for it ([`Holder::pin`]); the holder verifies this side by its proof of the relay key.
///
/// Each connection is pinged as the holder pings its connectors (`HubLimits::ping_interval`
/// and `ping_timeout`): one that dies without a reset (a holder powered off, a path cut) is
/// forgotten and its holder tried after the others, rather than costing every stream opened
/// on it the open timeout. A stream whose opening times out does the same at once.
pub struct Relays {
    key: RelayKey,
    timeout: Duration,
    pings: (Duration, Duration),
    held: Arc<Mutex<HashMap<SocketAddr, Held>>>,
    /// When a connect to a holder last failed: it is tried after the others for
    /// [`FAILED_FOR`].
    failed: Arc<Mutex<HashMap<SocketAddr, Instant>>>,
    next_id: AtomicU64,
}

/// How long a holder that could not be reached is tried after every other.
pub const FAILED_FOR: Duration = Duration::from_secs(5);

/// Where a holder stands in the order of trying: connected ones first, nearest (shortest
/// handshake) first, then those not tried yet, then those that failed lately.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rank {
    Connected(Duration),
    Untried,
    FailedLately,
}

impl Relays {
    /// `timeout` bounds a connect and a stream's opening each; connections are pinged every
    /// `pings.0` and dropped when a PONG takes longer than `pings.1`.
    pub fn new(key: RelayKey, timeout: Duration, pings: (Duration, Duration)) -> Relays {
        Relays {
            key,
            timeout,
            pings,
            held: Arc::new(Mutex::new(HashMap::new())),
            failed: Arc::new(Mutex::new(HashMap::new())),
            next_id: AtomicU64::new(0),
        }
    }

    /// Where `holder` stands in the order of trying.
    pub fn rank(&self, holder: &Holder) -> Rank {
        if let Some(handshake) = self.handshake_time(&holder.relay) {
            return Rank::Connected(handshake);
        }
        let failed = self
            .failed
            .lock()
            .ok()
            .and_then(|f| f.get(&holder.relay).copied());
        match failed {
            Some(at) if at.elapsed() < FAILED_FOR => Rank::FailedLately,
            _ => Rank::Untried,
        }
    }

    /// Connects to `holder` unless connected already, so its handshake time is known before a
    /// stream needs it.
    pub async fn warm(&self, holder: &Holder) {
        if self.send(holder).is_none() {
            let _ = self.connect(holder).await;
        }
    }

    /// How long the handshake with `holder` took, once connected.
    pub fn handshake_time(&self, holder: &SocketAddr) -> Option<Duration> {
        self.held.lock().ok()?.get(holder).map(|h| h.handshake)
    }

    /// A stream to `target` through `tunnel`'s connections at `holder`.
    pub async fn open(
        &self,
        holder: &Holder,
        tunnel: &TunnelId,
        target: SocketAddr,
    ) -> Result<TunnelStream, OpenError> {
        let send = match self.send(holder) {
            Some(send) => send,
            None => self.connect(holder).await?,
        };
        let holder = holder.relay;
        let headers = [
            (TUNNEL_HEADER, tunnel.to_string()),
            (TARGET_HEADER, target.to_string()),
        ];
        let open = crate::stream::open(send, "/relay", &headers);
        let opened = tokio::time::timeout(self.timeout, open).await;
        match opened {
            Ok(Ok(stream)) => Ok(stream),
            Ok(Err(Some(status))) => Err(status_error(status)),
            Ok(Err(None)) => {
                forget(&self.held, &holder, None);
                Err(OpenError::NoConnection)
            }
            Err(_) => {
                forget(&self.held, &holder, None);
                failed_now(&self.failed, holder);
                Err(OpenError::TimedOut)
            }
        }
    }

    fn send(&self, holder: &Holder) -> Option<h2::client::SendRequest<Bytes>> {
        self.held
            .lock()
            .ok()?
            .get(&holder.relay)
            .filter(|h| h.pin == holder.pin)
            .map(|h| h.send.clone())
    }

    async fn connect(&self, holder: &Holder) -> Result<h2::client::SendRequest<Bytes>, OpenError> {
        let started = Instant::now();
        let trust = lb_tls::ClientTrust {
            pin: Some(holder.pin),
            ..lb_tls::ClientTrust::default()
        };
        let tls = trust.config().map_err(|_| OpenError::NoConnection)?;
        let dial = async {
            let tcp = TcpStream::connect(holder.relay).await.ok()?;
            let _ = tcp.set_nodelay(true);
            // The pin is checked, not the name (lb_tls::pin).
            let name = ServerName::try_from("meshlb-pop").ok()?;
            let mut tls = TlsConnector::from(tls).connect(name, tcp).await.ok()?;
            let exporter = tls
                .get_ref()
                .1
                .export_keying_material([0u8; 32], EXPORTER_LABEL, None)
                .ok()?;
            tls.write_all(RELAY_MAGIC).await.ok()?;
            tls.write_all(&self.key.proof(&exporter)).await.ok()?;
            tls.flush().await.ok()?;
            if Answer::read(&mut tls).await.ok()? != Answer::Accepted {
                return None;
            }
            h2::client::handshake(tls).await.ok()
        };
        let Some((send, mut driver)) = tokio::time::timeout(self.timeout, dial)
            .await
            .ok()
            .flatten()
        else {
            failed_now(&self.failed, holder.relay);
            return Err(OpenError::NoConnection);
        };
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let pings = driver.ping_pong();
        let (held, failed, every) = (Arc::clone(&self.held), Arc::clone(&self.failed), self.pings);
        let relay = holder.relay;
        tokio::spawn(async move {
            tokio::select! {
                _ = driver => {}
                () = crate::pop::keepalive(pings, every.0, every.1) => {
                    tracing::warn!(holder = %relay, "relay connection dropped: no PONG within the ping timeout");
                    failed_now(&failed, relay);
                }
            }
            forget(&held, &relay, Some(id));
        });
        if let Ok(mut failed) = self.failed.lock() {
            failed.remove(&holder.relay);
        }
        if let Ok(mut held) = self.held.lock() {
            held.insert(
                holder.relay,
                Held {
                    id,
                    pin: holder.pin,
                    send: send.clone(),
                    handshake: started.elapsed(),
                },
            );
        }
        Ok(send)
    }
}

/// Forgets the connection to `holder` (only connection `id`, when given).
fn forget(held: &Mutex<HashMap<SocketAddr, Held>>, holder: &SocketAddr, id: Option<u64>) {
    if let Ok(mut held) = held.lock() {
        if id.is_none_or(|id| held.get(holder).is_some_and(|h| h.id == id)) {
            held.remove(holder);
        }
    }
}

/// Marks `holder` as failed now: tried after the others for [`FAILED_FOR`].
fn failed_now(failed: &Mutex<HashMap<SocketAddr, Instant>>, holder: SocketAddr) {
    if let Ok(mut failed) = failed.lock() {
        failed.insert(holder, Instant::now());
    }
}

/// The holder's answer to `POST /relay` as an [`OpenError`].
fn status_error(status: u16) -> OpenError {
    match status {
        502 => OpenError::Unreachable(502),
        403 => OpenError::NotRouted,
        504 => OpenError::TimedOut,
        _ => OpenError::NoConnection,
    }
}

/// What the holder answers a relay request for `error`.
pub(crate) fn status_of(error: &OpenError) -> u16 {
    match error {
        OpenError::NoConnection => 503,
        OpenError::NotRouted => 403,
        OpenError::Unreachable(_) => 502,
        OpenError::TimedOut => 504,
    }
}

/// Reads a relaying PoP's proof (after [`RELAY_MAGIC`]).
pub(crate) async fn read_proof<R: tokio::io::AsyncRead + Unpin>(
    r: &mut R,
) -> std::io::Result<[u8; 32]> {
    let mut proof = [0u8; 32];
    r.read_exact(&mut proof).await?;
    Ok(proof)
}
