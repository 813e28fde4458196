//! TCP: the connection is established within the timeout (then closed).

use std::time::{Duration, Instant};

use super::{socket_addr, Check, Dialer};
use crate::failure::{Failure, Phase};
use crate::outcome::Attempt;
use crate::target::ProbeTarget;
use futures::future::BoxFuture;

pub(super) struct TcpMonitor(pub(super) Dialer);

impl Check for TcpMonitor {
    fn attempt<'a>(&'a self, target: &'a ProbeTarget, timeout: Duration) -> BoxFuture<'a, Attempt> {
        Box::pin(async move {
            let start = Instant::now();
            let addr = match socket_addr(&target.address, target.port).await {
                Ok(a) => a,
                Err(e) => return Attempt::fail(start.elapsed(), None, e),
            };
            match tokio::time::timeout(timeout, self.0.connect(target, addr)).await {
                Ok(Ok(_stream)) => Attempt::pass(start.elapsed(), None),
                Ok(Err(e)) => Attempt::fail(start.elapsed(), None, e),
                Err(_) => Attempt::fail(start.elapsed(), None, Failure::TimeoutIn(Phase::Connect)),
            }
        })
    }
}
