//! The listeners: UDP on several SO_REUSEPORT sockets per address, each served by its own
//! thread with batched system calls (`batch.rs`; no task per query); TCP by a task per
//! address with bounded connections (`tcp.rs`). Both answer through `Responder::answer`.
//! Malformed messages get FORMERR when a header can be read and are dropped otherwise;
//! nothing from the network can panic here.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use hickory_proto::op::{Header, Message, MessageType, ResponseCode};
use hickory_proto::serialize::binary::{BinDecodable, BinDecoder, BinEncoder};
use hickory_proto::ProtoErrorKind;
use hickory_server::authority::MessageRequest;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

use hickory_proto::rr::RecordType;

use super::fast;
use super::metrics::{qtype_index, rcode_index};
use super::respond::{Reply, Responder, EDNS_PAYLOAD};
use super::rrl::{Rrl, RrlSettings};
use super::tcp::TcpSettings;
use lb_edge::Serving;

/// Where a query came over: UDP answers fit the client's EDNS size (else 512 bytes) and are
/// truncated beyond it; TCP answers may take a whole message (RFC 7766 section 8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transport {
    Udp,
    Tcp,
}

impl Responder {
    /// Answers one datagram into `out` (cleared first). `false`: send nothing (a response, or
    /// bytes too broken to carry a header).
    pub fn answer_datagram(&self, bytes: &[u8], src: SocketAddr, out: &mut Vec<u8>) -> bool {
        self.answer(bytes, src, out, Transport::Udp)
    }

    /// Answers one query read from a TCP connection into `out` (cleared first, no length
    /// prefix). `false`: send nothing, and close (a response, or bytes with no header).
    pub fn answer_stream(&self, bytes: &[u8], src: SocketAddr, out: &mut Vec<u8>) -> bool {
        self.answer(bytes, src, out, Transport::Tcp)
    }

    /// `answer_datagram` without the fast path (`tests_fast.rs` compares the two).
    #[cfg(test)]
    pub(crate) fn answer_datagram_full(
        &self,
        bytes: &[u8],
        src: SocketAddr,
        out: &mut Vec<u8>,
    ) -> bool {
        out.clear();
        self.answer_full(bytes, src, out, Transport::Udp, None)
    }

    fn answer(&self, bytes: &[u8], src: SocketAddr, out: &mut Vec<u8>, via: Transport) -> bool {
        // One query in `TIMED_ONE_IN` is timed (`metrics.rs`).
        let start = super::metrics::timed().then(Instant::now);
        out.clear();
        if let Some(query) = fast::parse(bytes) {
            if let Some(answered) = self.answer_fast(&query, bytes, src, out, via, start) {
                return answered;
            }
        }
        self.answer_full(bytes, src, out, via, start)
    }

    /// The fast shape (`fast.rs`) asking a load-balanced name for A or AAAA; `None` for any
    /// other query, which then takes the full path.
    fn answer_fast(
        &self,
        query: &fast::FastQuery<'_>,
        bytes: &[u8],
        src: SocketAddr,
        out: &mut Vec<u8>,
        via: Transport,
        start: Option<Instant>,
    ) -> Option<bool> {
        if !matches!(query.qtype, RecordType::A | RecordType::AAAA) {
            return None;
        }
        let (lb, zone) = self.fast_names.get(query.lower_name())?;
        let subnet = query.edns.and_then(|e| e.subnet);
        let max = match via {
            Transport::Udp => query.udp_max(),
            Transport::Tcp => usize::from(u16::MAX),
        };
        if self.answer_prepared(query, lb, subnet, src, max, out) {
            self.metrics.record(
                Some(lb),
                qtype_index(query.qtype),
                rcode_index(ResponseCode::NoError),
                start.map(|s| s.elapsed().as_secs_f64()),
            );
            return Some(true);
        }
        let reply = self.steered_reply(lb, zone, query.qtype, subnet, src.ip());
        if !fast::encode(query, &reply, self.fast_names.owner(lb), max, out) {
            // NODATA, or more than fits: the same reply through hickory's encoder.
            let Ok(req) = MessageRequest::read(&mut BinDecoder::new(bytes)) else {
                return Some(false);
            };
            if !emit(&req, &reply, max, out) {
                return Some(false);
            }
        }
        self.metrics.record(
            reply.lb,
            reply.qtype,
            rcode_index(reply.rcode),
            start.map(|s| s.elapsed().as_secs_f64()),
        );
        Some(true)
    }

    /// Any query, through hickory's parser and encoder.
    fn answer_full(
        &self,
        bytes: &[u8],
        src: SocketAddr,
        out: &mut Vec<u8>,
        via: Transport,
        start: Option<Instant>,
    ) -> bool {
        let req = match MessageRequest::read(&mut BinDecoder::new(bytes)) {
            Ok(req) => req,
            Err(e) => {
                if let ProtoErrorKind::FormError { header, .. } = e.kind() {
                    if header.message_type() == MessageType::Query {
                        return error_only(header, ResponseCode::FormErr, out);
                    }
                }
                return false;
            }
        };
        if req.message_type() != MessageType::Query {
            return false;
        }
        let reply = self.reply(&req, src.ip());
        let max = match via {
            Transport::Udp => req
                .edns()
                .map_or(512, |e| e.max_payload().clamp(512, EDNS_PAYLOAD)),
            Transport::Tcp => u16::MAX,
        };
        let rcode = reply.rcode;
        if !emit(&req, &reply, usize::from(max), out) {
            return false;
        }
        self.metrics.record(
            reply.lb,
            reply.qtype,
            rcode_index(rcode),
            start.map(|s| s.elapsed().as_secs_f64()),
        );
        true
    }
}

/// `reply` to `req` through hickory's encoder into `out`, at most `max` bytes (what fits, with
/// TC, beyond). `false`: nothing could be encoded.
fn emit(req: &MessageRequest, reply: &Reply<'_>, max: usize, out: &mut Vec<u8>) -> bool {
    out.clear();
    let max = u16::try_from(max).unwrap_or(u16::MAX);
    {
        let mut encoder = BinEncoder::new(out);
        encoder.set_max_size(max);
        if Responder::build(req, reply)
            .destructive_emit(&mut encoder)
            .is_ok()
        {
            return true;
        }
    }
    // hickory's encoder already keeps what fits and sets TC; this is the case where not even
    // that worked: the question alone with TC, so the resolver retries over TCP (RFC 1035
    // section 4.2.1).
    out.clear();
    let mut encoder = BinEncoder::new(out);
    let empty = Reply::truncated(reply);
    Responder::build(req, &empty)
        .destructive_emit(&mut encoder)
        .is_ok()
}

impl Responder {
    /// The empty truncated answer (TC=1) to a query over the rate limit (`rrl.rs`); `false`
    /// when it is not a query that parses.
    pub fn slip_datagram(&self, bytes: &[u8], out: &mut Vec<u8>) -> bool {
        out.clear();
        let Ok(req) = MessageRequest::read(&mut BinDecoder::new(bytes)) else {
            return false;
        };
        if req.message_type() != MessageType::Query {
            return false;
        }
        let reply = Reply::slipped();
        let mut encoder = BinEncoder::new(out);
        encoder.set_max_size(512);
        Responder::build(&req, &reply)
            .destructive_emit(&mut encoder)
            .is_ok()
    }
}

fn error_only(header: &Header, rcode: ResponseCode, out: &mut Vec<u8>) -> bool {
    let message = Message::error_msg(header.id(), header.op_code(), rcode);
    match message.to_vec() {
        Ok(bytes) => {
            *out = bytes;
            true
        }
        Err(_) => false,
    }
}

/// Running listeners; dropped or `shutdown`, they stop.
pub struct DnsServer {
    udp: Vec<std::thread::JoinHandle<()>>,
    /// Told when a UDP thread ends (`take_ended`).
    ended: Option<lb_edge::Ended>,
    stop: Arc<AtomicBool>,
    /// The TCP accept loops, and what tells them to stop.
    tcp: Vec<tokio::task::JoinHandle<()>>,
    stop_tcp: watch::Sender<bool>,
    /// The bound addresses (UDP and TCP share each), in the order given.
    pub addrs: Vec<SocketAddr>,
}

impl std::fmt::Debug for DnsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DnsServer")
            .field("addrs", &self.addrs)
            .finish()
    }
}

fn udp_socket(addr: SocketAddr) -> io::Result<std::net::UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_reuse_port(true)?;
    // Bursts queue in the kernel rather than being dropped (capped by net.core.rmem_max).
    let _ = socket.set_recv_buffer_size(4 << 20);
    socket.set_read_timeout(Some(super::batch::STOP_POLL))?;
    socket.bind(&addr.into())?;
    Ok(socket.into())
}

impl DnsServer {
    /// Serves `addrs` (UDP and TCP each) with `udp_sockets` SO_REUSEPORT sockets per address
    /// (the kernel spreads datagrams over them by flow hash). Port 0 picks one port per
    /// address, shared by UDP and TCP. Each query is answered by the responder `serving`
    /// holds when it arrives, so a reload replaces it there without a restart.
    pub async fn start(
        responder: Arc<Serving<Responder>>,
        addrs: &[SocketAddr],
        udp_sockets: usize,
        rrl: RrlSettings,
        tcp_settings: TcpSettings,
    ) -> io::Result<DnsServer> {
        // One limiter for every UDP socket: a client's flows spread over them.
        let rrl = Rrl::new(rrl).map(Arc::new);
        let (signal, ended) = lb_edge::end_signal();
        let mut udp = Vec::new();
        let stop = Arc::new(AtomicBool::new(false));
        let (stop_tcp, tcp_stopped) = watch::channel(false);
        let slots = Arc::new(Semaphore::new(tcp_settings.max_connections.max(1)));
        let mut tcp = Vec::new();
        let mut bound = Vec::new();
        for &addr in addrs {
            // TCP first: with port 0 it picks the port, then UDP binds the same number.
            let listener = TcpListener::bind(addr).await.map_err(|e| {
                io::Error::new(e.kind(), format!("DNS TCP listener on {addr}: {e}"))
            })?;
            let addr = listener.local_addr()?;
            // Its end (a panic) is told like a UDP thread's.
            let end = signal.guard(format!("dns-tcp-{addr}"));
            tcp.push(tokio::spawn(super::tcp::accept_loop(
                listener,
                Arc::clone(&responder),
                tcp_settings,
                Arc::clone(&slots),
                tcp_stopped.clone(),
                end,
            )));
            for _ in 0..udp_sockets.max(1) {
                let socket = udp_socket(addr).map_err(|e| {
                    io::Error::new(e.kind(), format!("DNS UDP socket on {addr}: {e}"))
                })?;
                let (responder, stop, rrl) =
                    (Arc::clone(&responder), Arc::clone(&stop), rrl.clone());
                let end = signal.guard(format!("dns-udp-{addr}"));
                udp.push(
                    std::thread::Builder::new()
                        .name(format!("dns-udp-{addr}"))
                        .spawn(move || {
                            let _end = end;
                            super::batch::serve(socket, responder, rrl, stop)
                        })?,
                );
            }
            bound.push(addr);
        }
        Ok(DnsServer {
            udp,
            ended: Some(ended),
            stop,
            tcp,
            stop_tcp,
            addrs: bound,
        })
    }

    /// Where the end of the first UDP thread to end is told (once; for supervision).
    pub fn take_ended(&mut self) -> Option<lb_edge::Ended> {
        self.ended.take()
    }

    pub async fn shutdown(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.stop_tcp.send(true);
        for t in std::mem::take(&mut self.tcp) {
            let _ = t.await;
        }
        for t in std::mem::take(&mut self.udp) {
            let _ = tokio::task::spawn_blocking(move || t.join()).await;
        }
    }
}

impl Drop for DnsServer {
    fn drop(&mut self) {
        // The UDP threads see this within `STOP_POLL` and exit; the TCP loops at once.
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.stop_tcp.send(true);
    }
}
