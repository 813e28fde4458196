//! The layer-4 listeners of a node: one socket per (transport, `--l4` address, port) of the
//! load balancers in force. A reload binds the ports that are new before anything changes (a
//! port that cannot be bound refuses the reload, naming it), then swaps the frontend in and
//! stops the listeners of ports no longer listed; their connections and flows go on, on
//! the frontend they began with.

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
    bound: Vec<(Key, Bound)>,
    keys: BTreeSet<Key>,
}

/// The running listeners.
pub struct Listeners {
    serving: Arc<Serving<Layer4>>,
    running: BTreeMap<Key, watch::Sender<bool>>,
    /// Connections open at once, over every TCP listener.
    slots: Arc<Semaphore>,
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
        let keys = wanted(&frontend);
        let mut bound = Vec::new();
        for &(t, addr) in &keys {
            bound.push(((t, addr), bind(t, addr)?));
        }
        let mut listeners = Listeners {
            serving: Arc::new(Serving::new(frontend)),
            running: BTreeMap::new(),
            slots,
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
            bound.push((key, bind(key.0, key.1)?));
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

    fn serve(&mut self, key: Key, bound: Bound) -> io::Result<()> {
        let (stop, stopped) = watch::channel(false);
        let serving = Arc::clone(&self.serving);
        let ended = self.ended_tx.clone();
        let name = format!("layer-4 listener on {}/{}", key.1, key.0.name());
        let task = match bound {
            Bound::Tcp(l) => {
                let l = tokio::net::TcpListener::from_std(l)?;
                let slots = Arc::clone(&self.slots);
                crate::tcp::accept_loop(l, serving, slots, stopped).boxed()
            }
            Bound::Udp(s) => {
                let s = tokio::net::UdpSocket::from_std(s)?;
                crate::udp::serve(s, serving, stopped).boxed()
            }
        };
        tokio::spawn(async move {
            // A listener ends only when stopped; a panic is told to the node's supervisor.
            if std::panic::AssertUnwindSafe(task)
                .catch_unwind()
                .await
                .is_err()
            {
                let _ = ended.send(format!("{name} panicked"));
            }
        });
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
