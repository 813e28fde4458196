//! DNS over TCP (RFC 7766): each connection carries queries framed by a two-byte length,
//! answered in order through the same path as UDP datagrams (`answer.rs`), without UDP's
//! size limit. Bounded as a hostile client needs: at most `max_connections` connections per
//! server (more are closed at accept and counted in `meshlb_dns_tcp_refused_total`), and a
//! connection that waits longer than `idle_timeout` for a query, for the rest of one, or for
//! the client to take an answer is closed (RFC 7766 section 6.2.3). Messages are at most
//! 65,535 bytes by their framing.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

use super::answer::Steered;
use super::dnstap::Dnstap;
use super::responder::Responder;
use lb_edge::Serving;

/// The TCP listeners' limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpSettings {
    /// Client connections open at once over all of a server's addresses.
    pub max_connections: usize,
    /// How long a connection may wait for the client (a query, its rest, an answer taken).
    pub idle_timeout: Duration,
}

impl Default for TcpSettings {
    fn default() -> Self {
        TcpSettings {
            max_connections: 1024,
            idle_timeout: Duration::from_secs(10),
        }
    }
}

/// Serves `listener` until `stop` turns true; connections still open then are dropped.
/// `end` is dropped with the loop (`lb_edge::end_signal`).
pub(crate) async fn accept_loop(
    listener: TcpListener,
    responder: Arc<Serving<Responder>>,
    settings: TcpSettings,
    slots: Arc<Semaphore>,
    mut stop: watch::Receiver<bool>,
    end: lb_edge::ThreadEnd,
    dnstap: Option<Dnstap>,
) {
    // Dropped when this loop ends, however it ends: the node's supervisor hears of it.
    let _end = end;
    let refused = metrics::counter!("meshlb_dns_tcp_refused_total");
    let mut connections = JoinSet::new();
    let mut backoff = lb_edge::AcceptBackoff::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    backoff.succeeded();
                    let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
                        refused.increment(1);
                        drop(stream);
                        continue;
                    };
                    let responder = Arc::clone(&responder);
                    let dnstap = dnstap.clone();
                    connections.spawn(async move {
                        let _slot = slot;
                        serve(stream, peer, &responder, settings.idle_timeout, dnstap).await;
                    });
                }
                Err(e) => {
                    tracing::debug!(error = %e, "DNS TCP accept failed");
                    tokio::time::sleep(backoff.failed()).await;
                }
            },
            // Finished connections are reaped as they end.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            _ = stop.changed() => return,
        }
    }
}

/// Answers one connection's queries in order until it closes, breaks a frame, sends what is
/// not a query, or keeps the server waiting for `idle`.
async fn serve(
    mut stream: TcpStream,
    peer: SocketAddr,
    responder: &Serving<Responder>,
    idle: Duration,
    dnstap: Option<Dnstap>,
) {
    let _ = stream.set_nodelay(true);
    let local = stream.local_addr().ok();
    let mut query = Vec::with_capacity(512);
    let mut answer = Vec::with_capacity(512);
    let mut framed = Vec::with_capacity(514);
    loop {
        let mut length = [0u8; 2];
        if !within(idle, stream.read_exact(&mut length)).await {
            return;
        }
        let length = usize::from(u16::from_be_bytes(length));
        if length == 0 {
            return;
        }
        query.resize(length, 0);
        if !within(idle, stream.read_exact(&mut query)).await {
            return;
        }
        let received_at = dnstap.as_ref().map(|_| SystemTime::now());
        let responder = responder.load();
        let mut steered = Steered::default();
        let answered = responder.answer_stream_steered(&query, peer, &mut answer, &mut steered);
        if let (Some(tap), Some(at), Some(local)) = (&dnstap, received_at, local) {
            let response = answered.then_some(&answer[..]);
            tap.log(
                true,
                (peer, local),
                &query,
                at,
                response,
                responder.config(),
                steered,
            );
        }
        if !answered {
            return;
        }
        let Ok(answer_length) = u16::try_from(answer.len()) else {
            return;
        };
        framed.clear();
        framed.extend_from_slice(&answer_length.to_be_bytes());
        framed.extend_from_slice(&answer);
        if !within(idle, stream.write_all(&framed)).await {
            return;
        }
    }
}

/// Whether `io` finished, without error, within `limit`.
async fn within<T>(
    limit: Duration,
    io: impl std::future::Future<Output = std::io::Result<T>>,
) -> bool {
    matches!(tokio::time::timeout(limit, io).await, Ok(Ok(_)))
}
