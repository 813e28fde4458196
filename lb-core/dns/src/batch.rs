//! The UDP fast path: one OS thread per SO_REUSEPORT socket, receiving up to `BATCH`
//! datagrams per `recvmmsg` and sending the answers with one `sendmmsg`, the way gdnsd does.
//! Under load one pair of system calls carries dozens of queries; idle, the thread sleeps in
//! the kernel. Buffers are allocated once per thread.

use std::io::{IoSlice, IoSliceMut};
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
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
/// `rrl`, answers over a client prefix's rate slip or are dropped. Each turn receives a
/// batch, answers it with the responder loaded for it, and sends the answers.
pub(crate) fn serve(
    socket: UdpSocket,
    serving: Arc<Serving<Responder>>,
    (rrl, dnstap): (Option<Arc<Rrl>>, Option<Dnstap>),
    stop: Arc<AtomicBool>,
) {
    let fd = socket.as_raw_fd();
    let local = socket.local_addr().ok();
    let mut batch = Batch::new();
    while !stop.load(Ordering::Relaxed) {
        if !batch.receive(fd) {
            continue;
        }
        // One load per batch: a reload takes effect from the next batch on.
        let responder = serving.load();
        batch.answer(&responder, rrl.as_deref(), dnstap.as_ref(), local);
        if batch.to.is_empty() {
            continue;
        }
        batch.send(fd, &socket);
    }
}

/// A thread's buffers, allocated once: a batch's queries and answers, where each came from
/// and where each answer goes, and the system calls' headers.
struct Batch {
    queries: Vec<[u8; MAX_QUERY]>,
    /// One per query; the first `to.len()` are the batch's answers.
    answers: Vec<Vec<u8>>,
    /// Each received datagram's length and sender.
    received: Vec<(usize, Option<SocketAddr>)>,
    /// Where each answer goes, for `sendmmsg`.
    to: Vec<Option<SockaddrStorage>>,
    /// The same, for the answers sent one by one.
    to_std_addr: Vec<SocketAddr>,
    recv_headers: MultiHeaders<SockaddrStorage>,
    send_headers: MultiHeaders<SockaddrStorage>,
}

impl Batch {
    /// Buffers for `BATCH` datagrams each way.
    fn new() -> Batch {
        Batch {
            queries: vec![[0u8; MAX_QUERY]; BATCH],
            answers: (0..BATCH).map(|_| Vec::with_capacity(1232)).collect(),
            received: Vec::with_capacity(BATCH),
            to: Vec::with_capacity(BATCH),
            to_std_addr: Vec::with_capacity(BATCH),
            recv_headers: MultiHeaders::<SockaddrStorage>::preallocate(BATCH, None),
            send_headers: MultiHeaders::<SockaddrStorage>::preallocate(BATCH, None),
        }
    }

    /// Receives up to `BATCH` datagrams with one `recvmmsg`, waiting for the first at most
    /// the socket's read timeout; `false` when none came: the timeout, an interrupt, or an
    /// error (logged, then 5 ms waited out so that a failing socket does not spin).
    fn receive(&mut self, fd: RawFd) -> bool {
        self.received.clear();
        let mut slices: Vec<[IoSliceMut<'_>; 1]> = self
            .queries
            .iter_mut()
            .map(|q| [IoSliceMut::new(&mut q[..])])
            .collect();
        match recvmmsg(
            fd,
            &mut self.recv_headers,
            slices.iter_mut(),
            MsgFlags::MSG_WAITFORONE,
            None,
        ) {
            Ok(results) => {
                for r in results {
                    self.received
                        .push((r.bytes, r.address.as_ref().and_then(to_std)));
                }
                true
            }
            Err(Errno::EAGAIN | Errno::EINTR) => false,
            Err(e) => {
                tracing::debug!(error = %e, "DNS recvmmsg failed");
                std::thread::sleep(Duration::from_millis(5));
                false
            }
        }
    }

    /// Answers the received queries (`answer_one`), noting in `to` where each answer goes: a
    /// datagram without a sender or from port 0, or one not answered, gets none.
    fn answer(
        &mut self,
        responder: &Responder,
        rrl: Option<&Rrl>,
        dnstap: Option<&Dnstap>,
        local: Option<SocketAddr>,
    ) {
        self.to.clear();
        self.to_std_addr.clear();
        for (i, (len, src)) in self.received.iter().enumerate() {
            let Some(src) = *src else { continue };
            if src.port() == 0 {
                continue;
            }
            let query = &self.queries[i][..(*len).min(MAX_QUERY)];
            let answer = &mut self.answers[self.to.len()];
            if answer_one(responder, rrl, dnstap, (src, local), query, answer) {
                self.to.push(Some(SockaddrStorage::from(src)));
                self.to_std_addr.push(src);
            }
        }
    }

    /// Sends the batch's answers with one `sendmmsg`, and what it did not take (a full
    /// socket buffer) one by one; a peer that is gone is not our problem.
    fn send(&mut self, fd: RawFd, socket: &UdpSocket) {
        let count = self.to.len();
        let sent = {
            let slices: Vec<[IoSlice<'_>; 1]> = self.answers[..count]
                .iter()
                .map(|a| [IoSlice::new(a)])
                .collect();
            let no_cmsgs: [ControlMessage<'_>; 0] = [];
            match sendmmsg(
                fd,
                &mut self.send_headers,
                slices.iter(),
                &self.to,
                no_cmsgs,
                MsgFlags::empty(),
            ) {
                Ok(results) => results.count(),
                Err(_) => 0,
            }
        };
        for (answer, dest) in self.answers[sent..count]
            .iter()
            .zip(&self.to_std_addr[sent..])
        {
            let _ = socket.send_to(answer, dest);
        }
    }
}

/// Answers one query from `src` (to `local`) into `answer` as the rate limiter lets it: in
/// full, BADCOOKIE or a slip (truncated) in its place, or not at all; and logs it to dnstap.
/// Whether there is an answer to send.
#[inline]
fn answer_one(
    responder: &Responder,
    rrl: Option<&Rrl>,
    dnstap: Option<&Dnstap>,
    (src, local): (SocketAddr, Option<SocketAddr>),
    query: &[u8],
    answer: &mut Vec<u8>,
) -> bool {
    let (limit, cookie) = limited(rrl, responder, query, src.ip());
    let received_at = dnstap.map(|_| SystemTime::now());
    let mut steered = Steered::default();
    let answered = match (limit, cookie) {
        (Limit::Send, _) => responder.answer_datagram_steered(query, src, answer, &mut steered),
        (Limit::Slip, Some(client)) => {
            responder.badcookie_datagram(query, src.ip(), client, answer)
        }
        (Limit::Slip, None) => responder.slip_datagram(query, answer),
        (Limit::Drop, _) => false,
    };
    if let (Some(tap), Some(at), Some(local)) = (dnstap, received_at, local) {
        let response = answered.then(|| &answer[..]);
        let config = responder.config();
        tap.log(false, (src, local), query, at, response, config, steered);
    }
    answered
}
