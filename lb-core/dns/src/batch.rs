//! The UDP fast path: one OS thread per SO_REUSEPORT socket, receiving up to `BATCH`
//! datagrams per `recvmmsg` and sending the answers with one `sendmmsg`, the way gdnsd does.
//! Under load one pair of system calls carries dozens of queries; idle, the thread sleeps in
//! the kernel. Buffers are allocated once per thread.

use std::io::{IoSlice, IoSliceMut};
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use nix::errno::Errno;
use nix::sys::socket::{
    recvmmsg, sendmmsg, ControlMessage, MsgFlags, MultiHeaders, SockaddrStorage,
};

use super::answer::Steered;
use super::cookie::Presented;
use super::dnstap::Dnstap;
use super::responder::Responder;
use super::rrl::{Limit, Rrl};
use lb_edge::Serving;

/// Datagrams per system call.
const BATCH: usize = 32;
/// Queries larger than this are truncated by the kernel and answered FORMERR.
const MAX_QUERY: usize = 4096;
/// How often an idle thread looks at the stop flag.
pub(crate) const STOP_POLL: Duration = Duration::from_millis(200);

fn to_std(a: &SockaddrStorage) -> Option<SocketAddr> {
    if let Some(v4) = a.as_sockaddr_in() {
        return Some(SocketAddr::V4(SocketAddrV4::new(v4.ip(), v4.port())));
    }
    a.as_sockaddr_in6().map(|v6| {
        SocketAddr::V6(SocketAddrV6::new(
            v6.ip(),
            v6.port(),
            v6.flowinfo(),
            v6.scope_id(),
        ))
    })
}

/// What the rate limiter says of `query` from `ip`, and the client cookie it carries
/// without a valid server cookie (for BADCOOKIE in place of a slip). A query whose server
/// cookie checks out has proved its address and is not limited (`cookie.rs`).
fn limited(
    rrl: Option<&Rrl>,
    responder: &Responder,
    query: &[u8],
    ip: std::net::IpAddr,
) -> (Limit, Option<[u8; 8]>) {
    let Some(rrl) = rrl else {
        return (Limit::Send, None);
    };
    match responder.cookie_of(query, ip) {
        Some(Presented::Client { proven: true, .. }) => {
            metrics::counter!("meshlb_dns_rrl_total", "action" => "cookie_exempt").increment(1);
            (Limit::Send, None)
        }
        Some(Presented::Client { client, .. }) => (rrl.check_now(ip), Some(client)),
        _ => (rrl.check_now(ip), None),
    }
}

/// Serves `socket` (blocking, with a read timeout of `STOP_POLL`) until `stop` is set; with
/// `rrl`, answers over a client prefix's rate slip or are dropped.
pub(crate) fn serve(
    socket: UdpSocket,
    serving: Arc<Serving<Responder>>,
    (rrl, dnstap): (Option<Arc<Rrl>>, Option<Dnstap>),
    stop: Arc<AtomicBool>,
) {
    let fd = socket.as_raw_fd();
    let local = socket.local_addr().ok();
    let mut queries = vec![[0u8; MAX_QUERY]; BATCH];
    let mut answers: Vec<Vec<u8>> = (0..BATCH).map(|_| Vec::with_capacity(1232)).collect();
    let mut received: Vec<(usize, Option<SocketAddr>)> = Vec::with_capacity(BATCH);
    let mut to: Vec<Option<SockaddrStorage>> = Vec::with_capacity(BATCH);
    let mut to_std_addr: Vec<SocketAddr> = Vec::with_capacity(BATCH);
    let mut recv_headers = MultiHeaders::<SockaddrStorage>::preallocate(BATCH, None);
    let mut send_headers = MultiHeaders::<SockaddrStorage>::preallocate(BATCH, None);
    while !stop.load(Ordering::Relaxed) {
        received.clear();
        {
            let mut slices: Vec<[IoSliceMut<'_>; 1]> = queries
                .iter_mut()
                .map(|q| [IoSliceMut::new(&mut q[..])])
                .collect();
            match recvmmsg(
                fd,
                &mut recv_headers,
                slices.iter_mut(),
                MsgFlags::MSG_WAITFORONE,
                None,
            ) {
                Ok(results) => {
                    for r in results {
                        received.push((r.bytes, r.address.as_ref().and_then(to_std)));
                    }
                }
                Err(Errno::EAGAIN | Errno::EINTR) => continue,
                Err(e) => {
                    tracing::debug!(error = %e, "DNS recvmmsg failed");
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                }
            }
        }
        to.clear();
        to_std_addr.clear();
        // One load per batch: a reload takes effect from the next batch on.
        let responder = serving.load();
        for (i, (len, src)) in received.iter().enumerate() {
            let Some(src) = *src else { continue };
            if src.port() == 0 {
                continue;
            }
            let slot = to.len();
            let query = &queries[i][..(*len).min(MAX_QUERY)];
            let (limit, cookie) = limited(rrl.as_deref(), &responder, query, src.ip());
            let received_at = dnstap.as_ref().map(|_| SystemTime::now());
            let mut steered = Steered::default();
            let answered = match (limit, cookie) {
                (Limit::Send, _) => {
                    responder.answer_datagram_steered(query, src, &mut answers[slot], &mut steered)
                }
                (Limit::Slip, Some(client)) => {
                    responder.badcookie_datagram(query, src.ip(), client, &mut answers[slot])
                }
                (Limit::Slip, None) => responder.slip_datagram(query, &mut answers[slot]),
                (Limit::Drop, _) => false,
            };
            if let (Some(tap), Some(at), Some(local)) = (&dnstap, received_at, local) {
                let response = answered.then(|| &answers[slot][..]);
                let config = responder.config();
                tap.log(false, (src, local), query, at, response, config, steered);
            }
            if answered {
                to.push(Some(SockaddrStorage::from(src)));
                to_std_addr.push(src);
            }
        }
        if to.is_empty() {
            continue;
        }
        let sent = {
            let slices: Vec<[IoSlice<'_>; 1]> = answers[..to.len()]
                .iter()
                .map(|a| [IoSlice::new(a)])
                .collect();
            let no_cmsgs: [ControlMessage<'_>; 0] = [];
            match sendmmsg(
                fd,
                &mut send_headers,
                slices.iter(),
                &to,
                no_cmsgs,
                MsgFlags::empty(),
            ) {
                Ok(results) => results.count(),
                Err(_) => 0,
            }
        };
        // What sendmmsg did not take (a full socket buffer), one by one; a peer that is gone
        // is not our problem.
        for (answer, dest) in answers[sent..to.len()].iter().zip(&to_std_addr[sent..]) {
            let _ = socket.send_to(answer, dest);
        }
    }
}
