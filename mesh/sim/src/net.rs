//! The simulated network: every node's sealed datagrams (`mesh::transport`) travel through it
//! as they would over a WAN. A datagram of `n` bytes is `ceil((n + 8) / (mtu - 20))` IP
//! fragments; it arrives only if every fragment does (each lost on its own, at the path's loss
//! rate, more in a loss burst), after half the round-trip time between the regions of its ends
//! (with jitter), unless a partition or a fragment-filtering path cuts it, the sender's egress
//! budget is spent, or the receiver's inbox is full. Time is tokio's: on the paused clock of a
//! current-thread runtime it is simulated time.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use mesh::transport::{DatagramNet, DatagramSocket};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::regions;

/// Round-trip times between nodes.
#[derive(Debug, Clone, Copy)]
pub enum Rtt {
    /// The 13-region matrix (`regions.rs`).
    Matrix,
    /// The same between every pair.
    Uniform(Duration),
}

/// Gilbert–Elliott bursts: a path enters a bad state with `enter` per datagram, leaves it with
/// `leave`, and loses each fragment with `loss` while in it.
#[derive(Debug, Clone, Copy)]
pub struct Bursts {
    pub enter: f64,
    pub leave: f64,
    pub loss: f64,
}

/// The network's behaviour.
#[derive(Debug, Clone)]
pub struct NetSettings {
    pub rtt: Rtt,
    /// Each one-way delay varies uniformly by this fraction either way.
    pub jitter: f64,
    /// The probability that one IP fragment is lost.
    pub loss: f64,
    pub bursts: Option<Bursts>,
    /// The path MTU (IP packet size), 1500 on most of the internet.
    pub mtu: usize,
    /// Paths that drop IP fragments (firewalls that do): a datagram of more than one is lost.
    pub drops_fragments: bool,
    /// Datagrams a node's inbox holds before more are dropped (a socket receive buffer).
    pub inbox: usize,
    /// Bytes a node may send per second before more are dropped (`None`: no limit).
    pub egress_bytes_per_s: Option<u64>,
    pub seed: u64,
}

impl Default for NetSettings {
    fn default() -> Self {
        NetSettings {
            rtt: Rtt::Matrix,
            jitter: 0.1,
            loss: 0.0,
            bursts: None,
            mtu: 1500,
            drops_fragments: false,
            inbox: 4096,
            egress_bytes_per_s: None,
            seed: 1,
        }
    }
}

/// What happened to the datagrams sent.
#[derive(Debug, Default)]
pub struct NetCounters {
    pub sent: AtomicU64,
    pub delivered: AtomicU64,
    pub lost: AtomicU64,
    pub partitioned: AtomicU64,
    pub fragments_filtered: AtomicU64,
    pub egress_dropped: AtomicU64,
    pub inbox_dropped: AtomicU64,
    pub unreachable: AtomicU64,
}

type Datagram = (Vec<u8>, SocketAddr);

struct Port {
    region: usize,
    inbox: mpsc::Sender<Datagram>,
    /// Egress budget: (bytes left, when it was last refilled).
    budget: Mutex<(f64, Instant)>,
}

struct Inner {
    settings: NetSettings,
    ports: RwLock<HashMap<SocketAddr, Arc<Port>>>,
    /// Where each address sits, set before the node binds.
    regions: RwLock<HashMap<SocketAddr, usize>>,
    /// Regions cut off from every other region.
    isolated: RwLock<[bool; 13]>,
    rng: Mutex<SmallRng>,
    /// Paths in a loss burst, by (from, to).
    bursting: Mutex<HashMap<(SocketAddr, SocketAddr), bool>>,
    counters: NetCounters,
}

/// The network, shared by every node of a simulation.
#[derive(Clone)]
pub struct SimNet(Arc<Inner>);

impl SimNet {
    pub fn new(settings: NetSettings) -> SimNet {
        let seed = settings.seed;
        SimNet(Arc::new(Inner {
            settings,
            ports: RwLock::default(),
            regions: RwLock::default(),
            isolated: RwLock::new([false; 13]),
            rng: Mutex::new(SmallRng::seed_from_u64(seed)),
            bursting: Mutex::default(),
            counters: NetCounters::default(),
        }))
    }

    /// Places `addr` in region `region` (an index into `regions::CODES`).
    pub fn place(&self, addr: SocketAddr, region: usize) {
        write(&self.0.regions).insert(addr, region % 13);
    }

    /// Cuts region `region` off from every other (`false`: joins it again).
    pub fn isolate(&self, region: usize, cut: bool) {
        write(&self.0.isolated)[region % 13] = cut;
    }

    pub fn counters(&self) -> &NetCounters {
        &self.0.counters
    }

    /// The IP fragments a UDP datagram of `len` bytes takes on this network's MTU.
    pub fn fragments(&self, len: usize) -> usize {
        SimNet::fragments_of(self.0.settings.mtu, len)
    }
}

fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}
fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(std::sync::PoisonError::into_inner)
}
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Why a datagram did not arrive, or after how long it does.
enum Fate {
    Arrives(Duration),
    Lost(fn(&NetCounters) -> &AtomicU64),
}

impl Inner {
    fn fate(
        &self,
        from: &Port,
        from_addr: SocketAddr,
        to: &Port,
        to_addr: SocketAddr,
        len: usize,
    ) -> Fate {
        let s = &self.settings;
        {
            let isolated = read(&self.isolated);
            if from.region != to.region && (isolated[from.region] || isolated[to.region]) {
                return Fate::Lost(|c| &c.partitioned);
            }
        }
        let fragments = SimNet::fragments_of(s.mtu, len);
        if s.drops_fragments && fragments > 1 {
            return Fate::Lost(|c| &c.fragments_filtered);
        }
        if let Some(rate) = s.egress_bytes_per_s {
            let mut b = lock(&from.budget);
            let now = Instant::now();
            let refill = now.duration_since(b.1).as_secs_f64() * rate as f64;
            b.0 = (b.0 + refill).min(rate as f64);
            b.1 = now;
            if b.0 < len as f64 {
                return Fate::Lost(|c| &c.egress_dropped);
            }
            b.0 -= len as f64;
        }
        let mut rng = lock(&self.rng);
        let mut loss = s.loss;
        if let Some(bursts) = s.bursts {
            let mut paths = lock(&self.bursting);
            let bad = paths.entry((from_addr, to_addr)).or_insert(false);
            *bad = if *bad {
                !rng.random_bool(bursts.leave.clamp(0.0, 1.0))
            } else {
                rng.random_bool(bursts.enter.clamp(0.0, 1.0))
            };
            if *bad {
                loss = bursts.loss;
            }
        }
        if loss > 0.0 && (0..fragments).any(|_| rng.random_bool(loss.clamp(0.0, 1.0))) {
            return Fate::Lost(|c| &c.lost);
        }
        let rtt_ms = match s.rtt {
            Rtt::Matrix => regions::rtt_ms(from.region, to.region),
            Rtt::Uniform(d) => d.as_secs_f64() * 1000.0,
        };
        let jitter = if s.jitter > 0.0 {
            rng.random_range(-s.jitter..=s.jitter)
        } else {
            0.0
        };
        Fate::Arrives(Duration::from_secs_f64(
            (rtt_ms / 2.0 * (1.0 + jitter)).max(0.0) / 1000.0,
        ))
    }
}

impl SimNet {
    fn fragments_of(mtu: usize, len: usize) -> usize {
        let per = (mtu.saturating_sub(20) / 8 * 8).max(8);
        (len + 8).div_ceil(per)
    }
}

#[async_trait]
impl DatagramNet for SimNet {
    async fn bind(&self, addr: SocketAddr) -> anyhow::Result<Box<dyn DatagramSocket>> {
        let region = read(&self.0.regions).get(&addr).copied().unwrap_or(0);
        let (tx, rx) = mpsc::channel(self.0.settings.inbox.max(1));
        let port = Arc::new(Port {
            region,
            inbox: tx,
            budget: Mutex::new((
                self.0.settings.egress_bytes_per_s.unwrap_or(0) as f64,
                Instant::now(),
            )),
        });
        let mut ports = write(&self.0.ports);
        if ports.contains_key(&addr) {
            anyhow::bail!("{addr} is bound already");
        }
        ports.insert(addr, Arc::clone(&port));
        Ok(Box::new(SimSocket {
            addr,
            port,
            net: self.clone(),
            rx: tokio::sync::Mutex::new(rx),
        }))
    }
}

/// One node's end of the network; unbinds when dropped (a stopped node).
struct SimSocket {
    addr: SocketAddr,
    port: Arc<Port>,
    net: SimNet,
    rx: tokio::sync::Mutex<mpsc::Receiver<Datagram>>,
}

impl Drop for SimSocket {
    fn drop(&mut self) {
        let mut ports = write(&self.net.0.ports);
        if ports
            .get(&self.addr)
            .is_some_and(|p| Arc::ptr_eq(p, &self.port))
        {
            ports.remove(&self.addr);
        }
    }
}

#[async_trait]
impl DatagramSocket for SimSocket {
    fn local_addr(&self) -> anyhow::Result<SocketAddr> {
        Ok(self.addr)
    }

    async fn send_to(&self, datagram: &[u8], to: SocketAddr) -> std::io::Result<usize> {
        let inner = &self.net.0;
        inner.counters.sent.fetch_add(1, Ordering::Relaxed);
        let Some(dest) = read(&inner.ports).get(&to).cloned() else {
            inner.counters.unreachable.fetch_add(1, Ordering::Relaxed);
            return Ok(datagram.len());
        };
        match inner.fate(&self.port, self.addr, &dest, to, datagram.len()) {
            Fate::Lost(counter) => {
                counter(&inner.counters).fetch_add(1, Ordering::Relaxed);
            }
            Fate::Arrives(after) => {
                let (bytes, from, net) = (datagram.to_vec(), self.addr, self.net.clone());
                tokio::spawn(async move {
                    tokio::time::sleep(after).await;
                    let c = &net.0.counters;
                    match dest.inbox.try_send((bytes, from)) {
                        Ok(()) => c.delivered.fetch_add(1, Ordering::Relaxed),
                        Err(_) => c.inbox_dropped.fetch_add(1, Ordering::Relaxed),
                    };
                });
            }
        }
        Ok(datagram.len())
    }

    async fn recv_from(&self, buf: &mut [u8]) -> std::io::Result<(usize, SocketAddr)> {
        let next = self.rx.lock().await.recv().await;
        let Some((bytes, from)) = next else {
            return Err(std::io::Error::other("the simulated network is gone"));
        };
        let n = bytes.len().min(buf.len());
        buf[..n].copy_from_slice(&bytes[..n]);
        Ok((n, from))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(i: u8) -> SocketAddr {
        SocketAddr::from(([127, 9, 0, i], 7946))
    }

    #[test]
    fn a_datagram_takes_as_many_fragments_as_the_mtu_needs() {
        let net = SimNet::new(NetSettings::default());
        assert_eq!(net.fragments(1_400), 1);
        assert_eq!(net.fragments(1_472), 1);
        assert_eq!(net.fragments(1_473), 2);
        assert_eq!(net.fragments(57_000), 39);
    }

    #[tokio::test(start_paused = true)]
    async fn a_datagram_arrives_after_half_the_round_trip() {
        let net = SimNet::new(NetSettings {
            rtt: Rtt::Uniform(Duration::from_millis(100)),
            jitter: 0.0,
            ..NetSettings::default()
        });
        let a = net.bind(addr(1)).await.unwrap();
        let b = net.bind(addr(2)).await.unwrap();
        let start = Instant::now();
        a.send_to(b"hello", addr(2)).await.unwrap();
        let mut buf = [0u8; 16];
        let (n, from) = b.recv_from(&mut buf).await.unwrap();
        assert_eq!((&buf[..n], from), (&b"hello"[..], addr(1)));
        assert_eq!(start.elapsed(), Duration::from_millis(50));
    }

    #[tokio::test(start_paused = true)]
    async fn a_path_that_filters_fragments_carries_only_whole_datagrams() {
        let net = SimNet::new(NetSettings {
            drops_fragments: true,
            ..NetSettings::default()
        });
        let a = net.bind(addr(1)).await.unwrap();
        let b = net.bind(addr(2)).await.unwrap();
        a.send_to(&[0u8; 3_000], addr(2)).await.unwrap();
        a.send_to(&[1u8; 1_000], addr(2)).await.unwrap();
        let mut buf = [0u8; 4_096];
        let (n, _) = b.recv_from(&mut buf).await.unwrap();
        assert_eq!(n, 1_000);
        assert_eq!(net.counters().fragments_filtered.load(Ordering::Relaxed), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn an_isolated_region_neither_sends_nor_receives_beyond_itself() {
        let net = SimNet::new(NetSettings::default());
        net.place(addr(1), 2);
        net.place(addr(2), 6);
        net.place(addr(3), 2);
        let a = net.bind(addr(1)).await.unwrap();
        let _b = net.bind(addr(2)).await.unwrap();
        let c = net.bind(addr(3)).await.unwrap();
        net.isolate(2, true);
        a.send_to(b"out", addr(2)).await.unwrap();
        a.send_to(b"in", addr(3)).await.unwrap();
        let mut buf = [0u8; 16];
        let (n, _) = c.recv_from(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"in");
        assert_eq!(net.counters().partitioned.load(Ordering::Relaxed), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn loss_is_per_fragment_so_large_datagrams_are_lost_more() {
        let net = SimNet::new(NetSettings {
            loss: 0.05,
            ..NetSettings::default()
        });
        let a = net.bind(addr(1)).await.unwrap();
        let _b = net.bind(addr(2)).await.unwrap();
        for _ in 0..1_000 {
            a.send_to(&[0u8; 1_000], addr(2)).await.unwrap();
        }
        let small = net.counters().lost.load(Ordering::Relaxed);
        for _ in 0..1_000 {
            a.send_to(&[0u8; 14_000], addr(2)).await.unwrap();
        }
        let large = net.counters().lost.load(Ordering::Relaxed) - small;
        // 1 fragment: 5 % lost; 10 fragments: 1 - 0.95^10 = 40 %.
        assert!((20..=90).contains(&small), "{small}");
        assert!((300..=500).contains(&large), "{large}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_inbox_drops_what_does_not_fit() {
        let net = SimNet::new(NetSettings {
            inbox: 2,
            ..NetSettings::default()
        });
        let a = net.bind(addr(1)).await.unwrap();
        let _b = net.bind(addr(2)).await.unwrap();
        for _ in 0..5 {
            a.send_to(b"x", addr(2)).await.unwrap();
        }
        // Until all five have landed or been dropped (at most 10 simulated seconds).
        let c = net.counters();
        let settled =
            || c.delivered.load(Ordering::Relaxed) + c.inbox_dropped.load(Ordering::Relaxed) == 5;
        let start = tokio::time::Instant::now();
        while !settled() && start.elapsed() < Duration::from_secs(10) {
            tokio::task::yield_now().await;
            tokio::time::advance(Duration::from_millis(1)).await;
        }
        assert!(settled(), "the five datagrams never settled");
        assert_eq!(c.inbox_dropped.load(Ordering::Relaxed), 3);
    }
}
