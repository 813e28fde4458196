//! The layer-4 listeners of a node: for each (transport, `--l4` address, port) of the load
//! balancers in force, one SO_REUSEPORT socket per worker. Workers are OS threads with a
//! single-threaded runtime each, like the proxy's (`lb-core/proxy/src/client/listener.rs`):
//! the kernel spreads connections, and UDP clients by their address hash, over the workers'
//! sockets, and a connection or flow never leaves its thread. A reload binds the ports that
//! are new before anything changes (a port that cannot be bound refuses the reload, naming
//! it), then swaps the frontend in and stops the listeners of ports no longer listed; their
//! connections and flows go on, on the frontend they began with.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use futures::FutureExt;
use tokio::sync::{mpsc, watch, Semaphore};

use lb_core::config::Transport;
use lb_edge::Serving;

use crate::frontend::Layer4;

type Key = (Transport, SocketAddr);

/// A socket bound for a port, not yet served.
#[derive(Debug)]
enum Bound {
    Tcp(std::net::TcpListener),
    Udp(std::net::UdpSocket),
}

/// One socket per worker for `addr`.
fn bind_all(transport: Transport, addr: SocketAddr, workers: usize) -> io::Result<Vec<Bound>> {
    (0..workers.max(1)).map(|_| bind(transport, addr)).collect()
}

fn bind(transport: Transport, addr: SocketAddr) -> io::Result<Bound> {
    use socket2::{Domain, Protocol, Socket, Type};
    let context = |e: io::Error| {
        io::Error::new(
            e.kind(),
            format!("layer-4 listener on {addr}/{}: {e}", transport.name()),
        )
    };
    let (ty, proto) = match transport {
        Transport::Tcp => (Type::STREAM, Protocol::TCP),
        Transport::Udp => (Type::DGRAM, Protocol::UDP),
    };
    let socket = Socket::new(Domain::for_address(addr), ty, Some(proto)).map_err(context)?;
    if addr.is_ipv6() {
        socket.set_only_v6(true).map_err(context)?;
    }
    // Every worker binds the port (the kernel spreads connections and flows over them).
    socket.set_reuse_port(true).map_err(context)?;
    if transport == Transport::Tcp {
        socket.set_reuse_address(true).map_err(context)?;
    } else {
        // Bursts queue in the kernel rather than being dropped (capped by net.core.rmem_max).
        let _ = socket.set_recv_buffer_size(4 << 20);
    }
    socket.set_nonblocking(true).map_err(context)?;
    socket.bind(&addr.into()).map_err(context)?;
    Ok(match transport {
        Transport::Tcp => {
            socket.listen(4096).map_err(context)?;
            Bound::Tcp(socket.into())
        }
        Transport::Udp => Bound::Udp(socket.into()),
    })
}

/// What a reload will change: the next frontend and the sockets of its new ports.
#[derive(Debug)]
pub struct Plan {
    frontend: Layer4,
    bound: Vec<(Key, Vec<Bound>)>,
    keys: BTreeSet<Key>,
}

/// Work for a worker thread, made into a task on its runtime.
type Job = Box<dyn FnOnce() -> futures::future::BoxFuture<'static, ()> + Send>;

/// Tells the supervisor when a worker thread ends by a panic.
struct WorkerEnd {
    name: String,
    ended: mpsc::UnboundedSender<String>,
}

impl Drop for WorkerEnd {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = self.ended.send(format!("{} panicked", self.name));
        }
    }
}

/// Starts `n` worker threads; each ends when its sender is dropped, its connections with it.
fn workers(
    n: usize,
    ended: &mpsc::UnboundedSender<String>,
) -> io::Result<Vec<mpsc::UnboundedSender<Job>>> {
    let mut senders = Vec::new();
    for i in 0..n.max(1) {
        let (tx, mut rx) = mpsc::unbounded_channel::<Job>();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let end = WorkerEnd {
            name: format!("layer-4 worker {i}"),
            ended: ended.clone(),
        };
        std::thread::Builder::new()
            .name(format!("l4-{i}"))
            .spawn(move || {
                let _end = end;
                runtime.block_on(async move {
                    while let Some(job) = rx.recv().await {
                        tokio::spawn(job());
                    }
                });
            })?;
        senders.push(tx);
    }
    Ok(senders)
}

/// The running listeners.
pub struct Listeners {
    serving: Arc<Serving<Layer4>>,
    running: BTreeMap<Key, watch::Sender<bool>>,
    /// Connections open at once, over every TCP listener.
    slots: Arc<Semaphore>,
    workers: Vec<mpsc::UnboundedSender<Job>>,
    ended_tx: mpsc::UnboundedSender<String>,
    ended: Option<mpsc::UnboundedReceiver<String>>,
}

impl std::fmt::Debug for Listeners {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listeners")
            .field("running", &self.running.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Every socket `frontend` needs.
fn wanted(frontend: &Layer4) -> BTreeSet<Key> {
    frontend
        .ports()
        .flat_map(|(t, port)| {
            frontend
                .settings()
                .addresses
                .iter()
                .map(move |ip| (t, SocketAddr::new(*ip, port)))
        })
        .collect()
}

impl Listeners {
    /// Binds and serves every port of the first generation's layer-4 load balancers.
    pub async fn start(frontend: Layer4) -> io::Result<Listeners> {
        let slots = Arc::new(Semaphore::new(frontend.settings().max_connections.max(1)));
        let (ended_tx, ended) = mpsc::unbounded_channel();
        let n = frontend.settings().workers.max(1);
        let keys = wanted(&frontend);
        let mut bound = Vec::new();
        for &(t, addr) in &keys {
            bound.push(((t, addr), bind_all(t, addr, n)?));
        }
        let mut listeners = Listeners {
            serving: Arc::new(Serving::new(frontend)),
            running: BTreeMap::new(),
            slots,
            workers: workers(n, &ended_tx)?,
            ended_tx,
            ended: Some(ended),
        };
        for (key, b) in bound {
            listeners.serve(key, b)?;
        }
        Ok(listeners)
    }

    /// Where the frontend in force is (for status and tests).
    pub fn serving(&self) -> &Arc<Serving<Layer4>> {
        &self.serving
    }

    /// The addresses served now.
    pub fn addresses(&self) -> Vec<(Transport, SocketAddr)> {
        self.running.keys().copied().collect()
    }

    /// Resolves with the reason when a listener's task ends other than by a stop: a panic.
    /// Once (for supervision).
    pub fn take_ended(&mut self) -> Option<mpsc::UnboundedReceiver<String>> {
        self.ended.take()
    }

    /// Binds what `next` needs and this does not serve yet; nothing changes until `apply`.
    pub fn prepare(&self, next: Layer4) -> io::Result<Plan> {
        let keys = wanted(&next);
        let mut bound = Vec::new();
        for &key in keys.iter().filter(|k| !self.running.contains_key(k)) {
            bound.push((key, bind_all(key.0, key.1, self.workers.len())?));
        }
        Ok(Plan {
            frontend: next,
            bound,
            keys,
        })
    }

    /// Serves `plan`: its frontend in, its new ports served, ports it lacks stopped.
    pub fn apply(&mut self, plan: Plan) -> io::Result<()> {
        self.serving.replace(Arc::new(plan.frontend));
        for (key, b) in plan.bound {
            self.serve(key, b)?;
        }
        let gone: Vec<Key> = self
            .running
            .keys()
            .filter(|k| !plan.keys.contains(k))
            .copied()
            .collect();
        for key in gone {
            if let Some(stop) = self.running.remove(&key) {
                let _ = stop.send(true);
            }
        }
        Ok(())
    }

    /// Serves `key` with one socket per worker, each on its worker's runtime.
    fn serve(&mut self, key: Key, bound: Vec<Bound>) -> io::Result<()> {
        let (stop, stopped) = watch::channel(false);
        for (socket, worker) in bound.into_iter().zip(&self.workers) {
            let serving = Arc::clone(&self.serving);
            let ended = self.ended_tx.clone();
            let slots = Arc::clone(&self.slots);
            let stopped = stopped.clone();
            let name = format!("layer-4 listener on {}/{}", key.1, key.0.name());
            let job: Job = Box::new(move || {
                async move {
                    // Registered with this worker's reactor, here on its thread.
                    let task = match socket {
                        Bound::Tcp(l) => match tokio::net::TcpListener::from_std(l) {
                            Ok(l) => crate::tcp::accept_loop(l, serving, slots, stopped).boxed(),
                            Err(e) => {
                                let _ = ended.send(format!("{name}: {e}"));
                                return;
                            }
                        },
                        Bound::Udp(s) => match tokio::net::UdpSocket::from_std(s) {
                            Ok(s) => crate::udp::serve(s, serving, stopped).boxed(),
                            Err(e) => {
                                let _ = ended.send(format!("{name}: {e}"));
                                return;
                            }
                        },
                    };
                    // A listener ends only when stopped; a panic is told to the supervisor.
                    if std::panic::AssertUnwindSafe(task)
                        .catch_unwind()
                        .await
                        .is_err()
                    {
                        let _ = ended.send(format!("{name} panicked"));
                    }
                }
                .boxed()
            });
            worker
                .send(job)
                .map_err(|_| io::Error::other("a layer-4 worker has ended"))?;
        }
        self.running.insert(key, stop);
        Ok(())
    }
}

impl Drop for Listeners {
    fn drop(&mut self) {
        for stop in self.running.values() {
            let _ = stop.send(true);
        }
    }
}
