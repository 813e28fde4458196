//! `meshlb demo`'s origins: small HTTP servers on loopback addresses, each with a behaviour —
//! steady, flapping health, or slow — that can be stopped and started while the demo runs.
//! Each answers a probe after the round-trip time between the probing region and its
//! continent (`latency.rs`), so the regions measure different RTTs, as they would across the
//! world; the fallback `static` sits far from every region.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

/// How an origin behaves while it runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Behaviour {
    Steady,
    /// `/healthz` answers 200 for `up`, then 503 for `down`, over and over.
    Flapping {
        up: Duration,
        down: Duration,
    },
    /// Every answer waits this long first.
    Slow(Duration),
}

/// Whether a flapping origin's health check passes `elapsed` after it started.
pub fn flap_is_up(up: Duration, down: Duration, elapsed: Duration) -> bool {
    let period = (up + down).as_millis().max(1);
    elapsed.as_millis() % period < up.as_millis()
}

struct Origin {
    addr: SocketAddr,
    pool: String,
    behaviour: Behaviour,
    task: Option<JoinHandle<()>>,
}

/// Every origin of the demo, by endpoint name.
pub struct Origins {
    origins: BTreeMap<String, Origin>,
}

/// What a probe from far away waits at the fallback `static`, from every region.
const FAR_MS: u64 = 300;

/// The emulated round-trip time of a request to an origin of `pool`: a probe's, by the region
/// its User-Agent names; none for anything else (clients through the proxy).
fn network_delay(pool: &str, req: &Request<hyper::body::Incoming>) -> Duration {
    let region = req
        .headers()
        .get(hyper::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .and_then(crate::latency::region_of_user_agent);
    let Some(region) = region else {
        return Duration::ZERO;
    };
    let ms = match pool {
        "eu" | "us" | "ap" => crate::latency::rtt_ms(region, crate::latency::continent_index(pool)),
        _ => FAR_MS,
    };
    Duration::from_millis(ms)
}

async fn answer(
    name: Arc<str>,
    pool: Arc<str>,
    behaviour: Behaviour,
    started: Instant,
    req: Request<hyper::body::Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let delay = network_delay(&pool, &req)
        + match behaviour {
            Behaviour::Slow(d) => d,
            _ => Duration::ZERO,
        };
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let healthy = match behaviour {
        Behaviour::Flapping { up, down } => flap_is_up(up, down, started.elapsed()),
        _ => true,
    };
    let (status, body) = if req.uri().path() == "/healthz" {
        if healthy {
            (StatusCode::OK, "ok\n".to_string())
        } else {
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "flapping: down\n".to_string(),
            )
        }
    } else {
        (StatusCode::OK, format!("hello from {name} (pool {pool})\n"))
    };
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(
        "x-served-by",
        hyper::header::HeaderValue::from_str(&name)
            .unwrap_or(hyper::header::HeaderValue::from_static("origin")),
    );
    Ok(r)
}

async fn serve(listener: TcpListener, name: String, pool: String, behaviour: Behaviour) {
    let (name, pool): (Arc<str>, Arc<str>) = (name.into(), pool.into());
    let started = Instant::now();
    // Connections live in this set: stopping the origin (aborting this task) drops them all.
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let (name, pool) = (Arc::clone(&name), Arc::clone(&pool));
                connections.spawn(async move {
                    let service = service_fn(move |req| {
                        answer(Arc::clone(&name), Arc::clone(&pool), behaviour, started, req)
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

impl Origins {
    /// The demo's origins from its config: every endpoint, with behaviours by name.
    pub fn new(
        config: &lb_core::config::Config,
        behaviours: &BTreeMap<&str, Behaviour>,
    ) -> Origins {
        let mut origins = BTreeMap::new();
        for p in &config.pools {
            for e in &p.endpoints {
                if let lb_core::config::Address::Ip(ip) = e.address {
                    origins.insert(
                        e.name.clone(),
                        Origin {
                            addr: SocketAddr::new(ip, e.port),
                            pool: p.name.clone(),
                            behaviour: behaviours
                                .get(e.name.as_str())
                                .copied()
                                .unwrap_or(Behaviour::Steady),
                            task: None,
                        },
                    );
                }
            }
        }
        Origins { origins }
    }

    pub fn names(&self) -> Vec<String> {
        self.origins.keys().cloned().collect()
    }

    pub fn is_running(&self, name: &str) -> bool {
        self.origins.get(name).is_some_and(|o| o.task.is_some())
    }

    /// Starts one origin (again); an error names what could not be bound.
    pub async fn start(&mut self, name: &str) -> Result<(), String> {
        let o = self
            .origins
            .get_mut(name)
            .ok_or_else(|| format!("no origin is named {name}"))?;
        if o.task.is_some() {
            return Ok(());
        }
        let listener = TcpListener::bind(o.addr)
            .await
            .map_err(|e| format!("origin {name} on {}: {e}", o.addr))?;
        o.task = Some(tokio::spawn(serve(
            listener,
            name.to_string(),
            o.pool.clone(),
            o.behaviour,
        )));
        Ok(())
    }

    /// Stops one origin: its port refuses connections until it is started again. Returns
    /// once the listener and every connection are closed.
    pub async fn stop(&mut self, name: &str) -> Result<(), String> {
        let o = self
            .origins
            .get_mut(name)
            .ok_or_else(|| format!("no origin is named {name}"))?;
        if let Some(t) = o.task.take() {
            t.abort();
            let _ = t.await;
        }
        Ok(())
    }

    pub async fn start_all(&mut self) -> Result<(), String> {
        for name in self.names() {
            self.start(&name).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flapping_cycles_up_then_down() {
        let (up, down) = (Duration::from_secs(40), Duration::from_secs(20));
        let at = |s: u64| flap_is_up(up, down, Duration::from_secs(s));
        assert!(at(0) && at(39));
        assert!(!at(40) && !at(59));
        assert!(at(60) && at(99));
        assert!(!at(100));
    }
}
