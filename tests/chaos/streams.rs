//! A client streaming requests (or layer-4 connections) through an aggregator from the client
//! site while a trial breaks something: how many were sent and how many failed.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::mesh::Mesh;

/// A stream running on its own thread.
pub struct Stream {
    progress: Arc<AtomicUsize>,
    thread: JoinHandle<(usize, usize)>,
}

impl Stream {
    /// HTTP requests to aggregator `agg`'s proxy for `during`.
    pub fn requests(m: &Mesh, agg: usize, during: Duration) -> Stream {
        Stream::start(m, SocketAddr::new(m.agg[agg].into(), 8080), during, false)
    }

    /// Connections to aggregator `agg`'s layer-4 listener for `during`, each carrying one
    /// request and half-closed after it (through a layer-4 load balancer the origin itself
    /// sees the end and closes; it keeps connections alive otherwise).
    pub fn connections(m: &Mesh, agg: usize, during: Duration) -> Stream {
        Stream::start(m, SocketAddr::new(m.agg[agg].into(), 7000), during, true)
    }

    fn start(m: &Mesh, to: SocketAddr, during: Duration, half_close: bool) -> Stream {
        let netns = m.world.netns("client").to_string();
        let progress = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&progress);
        let thread = std::thread::spawn(move || {
            stream_connections(&netns, to, during, &counted, half_close)
        });
        Stream { progress, thread }
    }

    /// Whether at least `n` requests were sent.
    pub fn sent_at_least(&self, n: usize) -> bool {
        self.progress.load(Ordering::Relaxed) >= n
    }

    /// Waits for the end of the stream: (sent, failed).
    pub fn join(self) -> (usize, usize) {
        self.thread.join().expect("client")
    }
}

/// Sends GET requests one after another for `during` from inside `netns` (with `half_close`,
/// shutting its side down after each request); (sent, failed).
fn stream_connections(
    netns: &str,
    proxy: SocketAddr,
    during: Duration,
    progress: &AtomicUsize,
    half_close: bool,
) -> (usize, usize) {
    use std::io::{Read, Write};
    let f = std::fs::File::open(format!("/run/netns/{netns}")).expect("netns");
    nix::sched::setns(&f, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
    let (mut sent, mut failed) = (0, 0);
    let start = Instant::now();
    while start.elapsed() < during {
        sent += 1;
        progress.store(sent, Ordering::Relaxed);
        let ok = (|| -> std::io::Result<bool> {
            let mut s = std::net::TcpStream::connect_timeout(&proxy, Duration::from_secs(2))?;
            s.set_read_timeout(Some(Duration::from_secs(3)))?;
            write!(
                s,
                "GET / HTTP/1.1\r\nHost: www.chaos.test\r\nConnection: close\r\n\r\n"
            )?;
            if half_close {
                s.shutdown(std::net::Shutdown::Write)?;
            }
            let mut text = String::new();
            s.read_to_string(&mut text)?;
            Ok(text.starts_with("HTTP/1.1 200"))
        })();
        if !matches!(ok, Ok(true)) {
            failed += 1;
        }
    }
    (sent, failed)
}
