//! The monitors, one file per type, behind one small trait.

mod dial;
mod http;
mod icmp;
mod ldap;
mod smtp;
mod tcp;
mod tls;
mod udp_icmp;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use lb_core::config::{Address, Monitor, MonitorKind};

pub use dial::Dialer;
pub use icmp::IcmpClients;

use crate::failure::{Failure, SetupError};
use crate::outcome::{Attempt, ProbeResult};
use crate::target::ProbeTarget;

/// One monitor type's check. `attempt` must finish by `timeout`; the caller enforces it too.
pub trait Check: Send + Sync {
    fn attempt<'a>(&'a self, target: &'a ProbeTarget, timeout: Duration) -> BoxFuture<'a, Attempt>;
}

/// Builds the check for a target's monitor. Checks hold what is costly to build (TLS configs,
/// ICMP sockets) and are shared by every target of the monitor; those of stream types
/// connect through `dial`.
pub fn check_for(
    monitor: &Monitor,
    icmp: &IcmpClients,
    dial: &Dialer,
) -> Result<Arc<dyn Check>, SetupError> {
    let zone = monitor.zone_tls.as_ref();
    let dial = dial.clone();
    Ok(match &monitor.kind {
        MonitorKind::Http(h) => Arc::new(http::HttpMonitor::new(h, false, zone, dial)?),
        MonitorKind::Https(h) => Arc::new(http::HttpMonitor::new(h, true, zone, dial)?),
        MonitorKind::Tcp { .. } => Arc::new(tcp::TcpMonitor(dial)),
        MonitorKind::IcmpPing => Arc::new(icmp::IcmpMonitor::new(icmp.clone())),
        MonitorKind::UdpIcmp { .. } => Arc::new(udp_icmp::UdpIcmpMonitor::new(icmp.clone())),
        MonitorKind::Smtp { .. } => Arc::new(smtp::SmtpMonitor(dial)),
        MonitorKind::Ldap(l) => Arc::new(ldap::LdapMonitor::new(l)?),
    })
}

/// Runs a probe: one attempt, and on failure up to `retries` more at once.
pub async fn probe(check: &dyn Check, target: &ProbeTarget) -> ProbeResult {
    if target.private.is_some() && !crosses_tunnels(&target.monitor.kind) {
        let attempt = Attempt::fail(Duration::ZERO, None, Failure::NoTunnel);
        return ProbeResult { attempt, tries: 1 };
    }
    let m = &target.monitor;
    let mut tries = 0;
    loop {
        tries += 1;
        let started = Instant::now();
        let attempt = match tokio::time::timeout(m.timeout, check.attempt(target, m.timeout)).await
        {
            Ok(a) => a,
            Err(_) => Attempt::fail(started.elapsed(), None, Failure::Timeout),
        };
        if attempt.passed || tries > u32::from(m.retries) {
            return ProbeResult { attempt, tries };
        }
    }
}

/// Whether a monitor of `kind` reaches a private endpoint: streams cross a tunnel, ICMP and
/// UDP datagrams do not, and LDAP's client (ldap3) dials its own sockets.
pub fn crosses_tunnels(kind: &MonitorKind) -> bool {
    matches!(
        kind,
        MonitorKind::Http(_)
            | MonitorKind::Https(_)
            | MonitorKind::Tcp { .. }
            | MonitorKind::Smtp { .. }
    )
}

/// Resolves the target to a socket address (hostnames through the system resolver).
pub(crate) async fn socket_addr(address: &Address, port: u16) -> Result<SocketAddr, Failure> {
    let dns = |h: &str, detail: String| Failure::Dns {
        host: h.to_string(),
        detail,
    };
    match address {
        Address::Ip(ip) => Ok(SocketAddr::new(*ip, port)),
        Address::Hostname(h) => tokio::net::lookup_host((h.as_str(), port))
            .await
            .map_err(|e| dns(h, e.to_string()))?
            .next()
            .ok_or_else(|| dns(h, "no address".into())),
    }
}
