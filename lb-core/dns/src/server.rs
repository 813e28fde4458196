//! The listeners: UDP on several SO_REUSEPORT sockets per address, each served by its own
//! thread with batched system calls (`batch.rs`; no task per query); TCP by a task per
//! address with bounded connections (`tcp.rs`). Both answer through `Responder::answer`.
//! Malformed messages get FORMERR when a header can be read and are dropped otherwise;
//! nothing from the network can panic here.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

use super::dnstap::Dnstap;
use super::responder::Responder;
use super::rrl::{Rrl, RrlSettings};
use super::tcp::TcpSettings;
use lb_edge::Serving;

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
        dnstap: Option<Dnstap>,
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
                dnstap.clone(),
            )));
            for _ in 0..udp_sockets.max(1) {
                let socket = udp_socket(addr).map_err(|e| {
                    io::Error::new(e.kind(), format!("DNS UDP socket on {addr}: {e}"))
                })?;
                let (responder, stop, rrl, dnstap) = (
                    Arc::clone(&responder),
                    Arc::clone(&stop),
                    rrl.clone(),
                    dnstap.clone(),
                );
                let end = signal.guard(format!("dns-udp-{addr}"));
                udp.push(
                    std::thread::Builder::new()
                        .name(format!("dns-udp-{addr}"))
                        .spawn(move || {
                            let _end = end;
                            super::batch::serve(socket, responder, (rrl, dnstap), stop)
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
