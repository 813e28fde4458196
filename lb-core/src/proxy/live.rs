//! Live load: outstanding requests per endpoint and pool, counted as requests start and
//! their responses finish streaming, read by `least_outstanding_requests` and
//! `least_connections` (open upstream exchanges, WebSockets included).

use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};

use crate::config::{Config, EndpointId, PoolId};
use crate::request::LoadCounts;
use crate::steering::Target;

#[derive(Debug)]
pub struct LiveLoad {
    /// `endpoints[pool][endpoint]`.
    endpoints: Vec<Vec<AtomicU32>>,
    pools: Vec<AtomicU32>,
}

impl LiveLoad {
    pub fn new(config: &Config) -> Self {
        LiveLoad {
            endpoints: config
                .pools
                .iter()
                .map(|p| p.endpoints.iter().map(|_| AtomicU32::new(0)).collect())
                .collect(),
            pools: config.pools.iter().map(|_| AtomicU32::new(0)).collect(),
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
        self.endpoints.get(t.pool.0)?.get(t.endpoint.0)
    }

    pub fn outstanding(&self, t: Target) -> u32 {
        self.counter(t).map_or(0, |c| c.load(Ordering::Relaxed))
    }
}

impl LoadCounts for LiveLoad {
    fn endpoint(&self, pool: PoolId, endpoint: EndpointId) -> (u32, u32) {
        let n = self.outstanding(Target { pool, endpoint });
        (n, n)
    }

    fn pool(&self, pool: PoolId) -> (u32, u32) {
        let n = self
            .pools
            .get(pool.0)
            .map_or(0, |c| c.load(Ordering::Relaxed));
        (n, n)
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

/// A response body that keeps its request counted until it has been streamed (or dropped).
pub struct Counted<B> {
    inner: B,
    _in_flight: Option<InFlight>,
}

impl<B> Counted<B> {
    pub fn new(inner: B, in_flight: Option<InFlight>) -> Self {
        Counted {
            inner,
            _in_flight: in_flight,
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
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
