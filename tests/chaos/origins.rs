//! Origins inside the world's continent namespaces, with emulated inter-region latency: the
//! kernel here has no netem, so each origin delays every answer by the round-trip time between
//! the asker's region (known from its source address) and the origin's continent, plus an
//! adjustable extra per continent. Stoppable (connections refused) and restartable.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use test_support::latency;
pub use test_support::latency::{continent_index, RTT_MS};

/// Shared by every origin: where each source address sits, and extra delay per continent.
#[derive(Default)]
pub struct Latency {
    /// Source address -> region code.
    pub regions: RwLock<HashMap<Ipv4Addr, &'static str>>,
    pub extra_ms: [AtomicU64; 3],
}

impl Latency {
    pub fn delay(&self, from: IpAddr, continent: usize) -> Duration {
        let IpAddr::V4(v4) = from else {
            return Duration::ZERO;
        };
        let region = self.regions.read().ok().and_then(|m| m.get(&v4).copied());
        let base = region.map_or(0, |r| latency::rtt_ms(r, continent));
        Duration::from_millis(base + self.extra_ms[continent].load(Ordering::Relaxed))
    }
}

pub struct Origin {
    running: Arc<AtomicBool>,
}

impl Origin {
    pub fn stop(&self) {
        self.running.store(false, Ordering::SeqCst);
    }
    pub fn start(&self) {
        self.running.store(true, Ordering::SeqCst);
    }
    pub fn is_running(&self) -> bool {
        self.running.load(Ordering::SeqCst)
    }
}

/// Binds a listener inside namespace `netns` (sockets keep the namespace they were made in).
fn bind_in(netns: &str, addr: SocketAddr) -> std::io::Result<TcpListener> {
    super::world::in_netns(netns, move || {
        let l = TcpListener::bind(addr)?;
        l.set_nonblocking(true)?;
        Ok(l)
    })
}

fn serve(mut s: TcpStream, name: &str, continent: usize, latency: &Latency, running: &AtomicBool) {
    let Ok(peer) = s.peer_addr() else { return };
    s.set_read_timeout(Some(Duration::from_millis(200))).ok();
    let Ok(clone) = s.try_clone() else { return };
    let mut reader = BufReader::new(clone);
    loop {
        let mut head = String::new();
        loop {
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(0) => return,
                Ok(_) => {
                    head.push_str(&line);
                    if line == "\r\n" {
                        break;
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    if !running.load(Ordering::SeqCst) {
                        return;
                    }
                }
                Err(_) => return,
            }
        }
        if !running.load(Ordering::SeqCst) {
            return;
        }
        std::thread::sleep(latency.delay(peer.ip(), continent));
        let body = format!("{name}\n");
        let answer = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nContent-Type: text/plain\r\n\r\n{body}",
            body.len()
        );
        if s.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

/// Starts an origin named `name` on `addr` in `netns`, on `continent` (eu, us, ap).
pub fn start(
    netns: &str,
    addr: SocketAddr,
    name: &str,
    continent: &str,
    latency: Arc<Latency>,
) -> Origin {
    let running = Arc::new(AtomicBool::new(true));
    let (netns, name_s, run) = (netns.to_string(), name.to_string(), Arc::clone(&running));
    let continent = continent_index(continent);
    std::thread::spawn(move || {
        let mut listener: Option<TcpListener> = None;
        let mut complained = false;
        // The loop polls so that a stop closes the listening socket (connections refused)
        // and a start opens it again; it lives as long as the test process.
        loop {
            let up = run.load(Ordering::SeqCst);
            match (&listener, up) {
                (None, true) => match bind_in(&netns, addr) {
                    Ok(l) => {
                        listener = Some(l);
                        complained = false;
                    }
                    // Tried again on the next turn; said once, so a stuck origin is visible.
                    Err(e) => {
                        if !complained {
                            eprintln!("origin {name_s} cannot listen on {addr} yet: {e}");
                        }
                        complained = true;
                    }
                },
                (Some(_), false) => listener = None,
                _ => {}
            }
            match listener.as_ref().map(TcpListener::accept) {
                Some(Ok((s, _))) => {
                    let _ = s.set_nonblocking(false);
                    let (name, latency, run) =
                        (name_s.clone(), Arc::clone(&latency), Arc::clone(&run));
                    std::thread::spawn(move || serve(s, &name, continent, &latency, &run));
                }
                _ => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    });
    Origin { running }
}
