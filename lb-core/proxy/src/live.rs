//! Live load: outstanding requests per endpoint and pool, counted as requests start and
//! their responses finish streaming (WebSockets while open), read by
//! `least_outstanding_requests`; open connections to each origin (kept by `origin/pool.rs`), read
//! by `least_connections`.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};

use lb_core::config::{Address, Config, Endpoint, EndpointId, PoolId, Renumbering};
use lb_core::request::LoadCounts;
use lb_core::steering::Target;

/// `host:port` of an endpoint (port 0 is 80, or 443 when the proxy speaks TLS to origins).
pub fn origin_authority(e: &Endpoint, tls: bool) -> String {
    let port = match (e.port, tls) {
        (0, false) => 80,
        (0, true) => 443,
        (p, _) => p,
    };
    match &e.address {
        Address::Ip(ip) => std::net::SocketAddr::new(*ip, port).to_string(),
        Address::Hostname(h) => format!("{h}:{port}"),
    }
}

/// The live counts of one config generation. Each counter is shared with the generation
/// before it for every endpoint that is the same origin (`Renumbering`), so requests that
/// began on the old config are still counted, and end, on the counter the new one reads.
#[derive(Debug)]
pub struct LiveLoad {
    /// Requests in flight, `endpoints[pool][endpoint]`.
    endpoints: Vec<Vec<Arc<AtomicU32>>>,
    pools: Vec<Arc<AtomicU32>>,
    /// Open connections, `[pool][endpoint]`; endpoints at the same address share a counter.
    connections: Vec<Vec<Arc<AtomicU32>>>,
    /// Connection counters of origins an earlier config had and this one has not, while they
    /// still count open connections (pooled ones idle out): an origin that comes back in a
    /// later config finds its connections counted.
    retired: HashMap<String, Arc<AtomicU32>>,
}

impl LiveLoad {
    pub fn new(config: &Config) -> Self {
        Self::carried(config, None)
    }

    /// The counters of `config`, taking over those of `before` (the previous generation's
    /// config and counts) wherever the origin is the same: requests by endpoint, pools by
    /// name, connections by `host:port` (also of origins `before` had retired).
    pub fn carried(config: &Config, before: Option<(&Config, &LiveLoad)>) -> Self {
        let mut by_authority: HashMap<String, Arc<AtomicU32>> = HashMap::new();
        let mut endpoints: Vec<Vec<Arc<AtomicU32>>> = config
            .pools
            .iter()
            .map(|p| p.endpoints.iter().map(|_| Arc::default()).collect())
            .collect();
        let mut pools: Vec<Arc<AtomicU32>> = config.pools.iter().map(|_| Arc::default()).collect();
        if let Some((old, load)) = before {
            let map = Renumbering::between(old, config);
            for ((op, oe), (np, ne)) in map.kept() {
                if let Some(c) = load.endpoints.get(op.0).and_then(|p| p.get(oe.0)) {
                    endpoints[np.0][ne.0] = Arc::clone(c);
                }
            }
            for (pi, c) in load.pools.iter().enumerate() {
                if let Some(np) = map.pool(PoolId(pi)) {
                    pools[np.0] = Arc::clone(c);
                }
            }
            for (authority, c) in &load.retired {
                by_authority.insert(authority.clone(), Arc::clone(c));
            }
            for (p, counters) in old.pools.iter().zip(&load.connections) {
                for (e, c) in p.endpoints.iter().zip(counters) {
                    for tls in [false, true] {
                        by_authority
                            .entry(origin_authority(e, tls))
                            .or_insert_with(|| Arc::clone(c));
                    }
                }
            }
        }
        let connections = config
            .pools
            .iter()
            .map(|p| {
                p.endpoints
                    .iter()
                    .map(|e| {
                        // Port 0 means 80 or 443 by the load balancer; both names count here.
                        let c =
                            Arc::clone(by_authority.entry(origin_authority(e, false)).or_default());
                        by_authority
                            .entry(origin_authority(e, true))
                            .or_insert_with(|| Arc::clone(&c));
                        c
                    })
                    .collect()
            })
            .collect();
        let in_use: std::collections::HashSet<String> = config
            .pools
            .iter()
            .flat_map(|p| p.endpoints.iter())
            .flat_map(|e| [origin_authority(e, false), origin_authority(e, true)])
            .collect();
        let retired = by_authority
            .into_iter()
            .filter(|(authority, c)| !in_use.contains(authority) && c.load(Ordering::Relaxed) > 0)
            .collect();
        LiveLoad {
            endpoints,
            pools,
            connections,
            retired,
        }
    }

    /// Counts one request in flight until the guard drops.
    pub fn start(self: &Arc<Self>, target: Target) -> InFlight {
        if let Some(c) = self.counter(target) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(c) = self.pools.get(target.pool.0) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        InFlight {
            load: Arc::clone(self),
            target,
        }
    }

    fn counter(&self, t: Target) -> Option<&AtomicU32> {
        self.endpoints
            .get(t.pool.0)?
            .get(t.endpoint.0)
            .map(|c| &**c)
    }

    /// The open-connection counter of an endpoint's origin, which its connections keep
    /// (`origin/pool.rs`).
    pub fn connection_counter(&self, t: Target) -> Option<&Arc<AtomicU32>> {
        self.connections.get(t.pool.0)?.get(t.endpoint.0)
    }

    fn open_connections(&self, t: Target) -> u32 {
        self.connection_counter(t)
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }

    pub fn outstanding(&self, t: Target) -> u32 {
        self.counter(t).map_or(0, |c| c.load(Ordering::Relaxed))
    }
}

impl LoadCounts for LiveLoad {
    fn endpoint(&self, pool: PoolId, endpoint: EndpointId) -> (u32, u32) {
        let t = Target { pool, endpoint };
        (self.outstanding(t), self.open_connections(t))
    }

    fn pool(&self, pool: PoolId) -> (u32, u32) {
        let outstanding = self
            .pools
            .get(pool.0)
            .map_or(0, |c| c.load(Ordering::Relaxed));
        let connections = self
            .connections
            .get(pool.0)
            .map_or(0, |p| p.iter().map(|c| c.load(Ordering::Relaxed)).sum());
        (outstanding, connections)
    }
}

/// One request in flight.
#[derive(Debug)]
pub struct InFlight {
    load: Arc<LiveLoad>,
    target: Target,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(c) = self.load.counter(self.target) {
            c.fetch_sub(1, Ordering::Relaxed);
        }
        if let Some(c) = self.load.pools.get(self.target.pool.0) {
            c.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// A response body that keeps its request counted until it has been streamed (or dropped),
/// and finishes its access record then, with the bytes sent.
pub struct Counted<B> {
    inner: B,
    _in_flight: Option<InFlight>,
    log: Option<Box<(crate::access::Pending, crate::access::AccessLog)>>,
    sent: u64,
}

impl<B> Counted<B> {
    pub fn new(inner: B, in_flight: Option<InFlight>) -> Self {
        Counted {
            inner,
            _in_flight: in_flight,
            log: None,
            sent: 0,
        }
    }

    /// Finishes `record` when the body has been sent or dropped.
    pub(crate) fn log_at_end(
        &mut self,
        record: crate::access::Pending,
        log: crate::access::AccessLog,
    ) {
        self.log = Some(Box::new((record, log)));
    }
}

impl<B> Drop for Counted<B> {
    fn drop(&mut self) {
        if let Some(pending) = self.log.take() {
            let (record, log) = *pending;
            let status = record.status;
            crate::access::finish(record, &log, status, Some(self.sent));
        }
    }
}

impl<B: Body<Data = Bytes> + Unpin> Body for Counted<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled {
            if let Some(data) = frame.data_ref() {
                self.sent += data.len() as u64;
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lb_core::RegionsTable;

    fn config(origins: &str) -> Config {
        let text = format!(
            "[[pools]]\nname = \"p\"\norigins = [{origins}]\n[[load_balancers]]\nname = \"www.example.test\"\nproxied = true\ndefault_pools = [\"p\"]\n"
        );
        Config::parse("t.toml", &text, &RegionsTable::embedded().expect("regions")).expect("config")
    }

    #[test]
    fn an_origin_removed_and_added_again_keeps_its_open_connections_counted() {
        let both = config(
            r#"{ name = "a", address = "127.0.0.1", port = 81 }, { name = "b", address = "127.0.0.2", port = 82 }"#,
        );
        let only_a = config(r#"{ name = "a", address = "127.0.0.1", port = 81 }"#);
        let first = LiveLoad::new(&both);
        let b = Target {
            pool: PoolId(0),
            endpoint: EndpointId(1),
        };
        // Two pooled connections to b stay open across the reloads.
        let held = Arc::clone(first.connection_counter(b).expect("b"));
        held.fetch_add(2, Ordering::Relaxed);
        let second = LiveLoad::carried(&only_a, Some((&both, &first)));
        let third = LiveLoad::carried(&both, Some((&only_a, &second)));
        assert_eq!(
            third.endpoint(PoolId(0), EndpointId(1)).1,
            2,
            "b's connections"
        );
        // Once they are closed, a retired counter is forgotten.
        held.fetch_sub(2, Ordering::Relaxed);
        let fourth = LiveLoad::carried(&only_a, Some((&both, &third)));
        assert!(fourth.retired.is_empty());
    }
}
