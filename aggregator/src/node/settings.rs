//! What an aggregator node is started with: its flags as typed values (`meshlb aggregator`
//! maps its command line onto these). None of it changes on reload: the config does.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use lb_core::affinity::AffinityKey;
use lb_core::config::Config;
use meshlb_node::guard;
use meshlb_node::NodeSettings;

use super::StartError;
use crate::api::BodyLimits;
use meshlb_node::credentials::AdminCredentials;

/// Everything an aggregator node needs to start.
pub struct Settings {
    /// What every node is started with: config file, regions, place, mesh, control plane,
    /// reloads.
    pub node: NodeSettings,
    /// The session-affinity cookie key (derived from the cluster key).
    pub affinity_key: AffinityKey,
    /// The key PoPs prove to each other to relay streams to private endpoints (derived from
    /// the cluster key, `tunnel::relay`).
    pub relay_key: tunnel::RelayKey,
    /// The admin API URL the primary announces [default: http://<admin address> (https://
    /// with TLS on), with the gossip address's IP when the admin listens on every address].
    pub config_advertise_url: Option<String>,
    pub admin: AdminSettings,
    pub dns: Option<DnsSettings>,
    pub proxy: Option<ProxyListeners>,
    /// Where clients reach this aggregator's proxy (`--advertise-proxy`), gossiped.
    pub advertise_proxy: Vec<IpAddr>,
    pub l4: Option<lb_l4::L4Settings>,
    /// Accept tunnel connectors (`--tunnel-listen`) and reach private endpoints through them.
    /// Without, private endpoints are reached through the PoPs that hold their tunnels.
    pub tunnels: Option<super::TunnelSettings>,
    /// Keep the drain decisions across restarts in this directory (`--state-dir`).
    pub state_dir: Option<PathBuf>,
    /// `GET /readyz` says ready after this even while endpoints lack a verdict.
    pub warmup_timeout: Duration,
    /// Install the process's Prometheus recorder (the first node of a process does; a second
    /// one in-process records into it).
    pub install_metrics: bool,
}

/// The admin listener.
pub struct AdminSettings {
    pub addr: SocketAddr,
    /// Its tokens and TLS (`--admin-tls-cert`, `--admin-client-ca`), re-read on reload.
    pub credentials: Arc<AdminCredentials>,
    /// With TLS on, a plain-HTTP listener besides, when asked (`--admin-plain-listen`).
    pub plain: Option<SocketAddr>,
    pub limits: guard::Limits,
    pub body: BodyLimits,
    /// The API's monitor previews.
    pub previews: crate::previews::PreviewLimits,
}

/// The authoritative DNS server.
pub struct DnsSettings {
    pub addrs: Vec<SocketAddr>,
    /// UDP sockets per address (SO_REUSEPORT).
    pub sockets: usize,
    pub rrl: lb_dns::RrlSettings,
    pub tcp: lb_dns::TcpSettings,
    /// Client locations whose located answers are kept prepared (`--dns-prepared-places`).
    pub prepared_places: usize,
    /// The name server identifier answered to NSID queries (RFC 5001, `--dns-nsid`).
    pub nsid: Option<Arc<[u8]>>,
    /// Server cookies (RFC 7873, RFC 9018), their secrets derived from the cluster key (and
    /// the previous one while it rotates); `None`: off (`--dns-cookies false`).
    pub cookies: Option<lb_dns::Cookies>,
    /// Where dnstap messages go (`--dnstap`, `--dnstap-socket`).
    pub dnstap: Option<lb_dns::Dnstap>,
}

/// The HTTP reverse proxy's listeners.
pub struct ProxyListeners {
    pub plain: Vec<SocketAddr>,
    pub tls: Vec<SocketAddr>,
    /// Certificate chain and key files for `tls`, in pairs (SNI picks; the first is the
    /// default).
    pub certificates: Vec<(PathBuf, PathBuf)>,
    pub settings: lb_proxy::ProxySettings,
}

impl Settings {
    /// The URL the primary announces for fetches of its document, given the admin
    /// listener's bound address.
    pub(super) fn announce_url(&self, admin: SocketAddr) -> String {
        let scheme = if self.admin.credentials.tls().is_some() {
            "https"
        } else {
            "http"
        };
        if let Some(u) = &self.config_advertise_url {
            return u.trim_end_matches('/').to_string();
        }
        let mut addr = admin;
        if addr.ip().is_unspecified() {
            addr.set_ip(
                self.node
                    .mesh
                    .advertise
                    .unwrap_or(self.node.mesh.listen)
                    .ip(),
            );
        }
        format!("{scheme}://{addr}")
    }

    /// Refuses settings that cannot work, and warns of config this node will not serve.
    pub(super) fn warn_of_unserved(&self, config: &Config) -> Result<(), StartError> {
        let proxies = self.proxy.is_some();
        if !self.advertise_proxy.is_empty() && !proxies && self.l4.is_none() {
            return Err(StartError::Settings(
                "--advertise-proxy names where clients reach this aggregator's proxy: give --proxy, --proxy-tls or --l4 too".into(),
            ));
        }
        if self.l4.is_none() && config.load_balancers.iter().any(|lb| lb.layer4.is_some()) {
            eprintln!(
                "warning: the config has layer-4 load balancers and this aggregator serves none of them (no --l4)"
            );
        }
        if self.dns.is_some()
            && self.advertise_proxy.is_empty()
            && config.load_balancers.iter().any(|lb| lb.proxied)
        {
            tracing::warn!(
                "proxied load balancers are answered over DNS with the PoPs' addresses, and this aggregator advertises none (--advertise-proxy): until a live, ready aggregator does, their names get NODATA"
            );
            eprintln!(
                "warning: no --advertise-proxy: proxied load balancers' names get NODATA until some aggregator of the mesh advertises its proxy"
            );
        }
        Ok(())
    }
}
