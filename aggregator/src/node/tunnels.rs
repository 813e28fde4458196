//! The PoP's side of tunnels (`--tunnel-listen`): the `tunnel::Hub` that accepts connectors,
//! its grants from the config in force (each tunnel's secret, the routes through it and the
//! endpoints in them), its place in gossip (`tunnel::holders`), and the private dialer the
//! proxy reaches private endpoints with (`lb_edge::private_dial`), on every aggregator: its
//! own connections first, then the holders'.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use lb_core::config::private::NetworkIndex;
use lb_core::config::Config;
use lb_edge::PrivateDialer;
use lb_tls::pin::SpkiPin;
use tunnel::{Grant, HolderList, Hub, HubLimits, RelayKey, TunnelDialer};
use tunnel::{TunnelId, TunnelSecret};

use super::StartError;

/// `--tunnel-listen` and its company.
#[derive(Debug, Clone)]
pub struct TunnelSettings {
    pub listen: SocketAddr,
    /// The address other PoPs relay through, gossiped (`--tunnel-advertise`) [default:
    /// `listen`].
    pub advertise: Option<SocketAddr>,
    /// The certificate connectors verify (by its CA or its key's pin) and its key.
    pub cert: PathBuf,
    pub key: PathBuf,
    pub limits: HubLimits,
}

/// The running hub.
pub(super) struct Tunnels {
    hub: Arc<Hub>,
    /// Its tunnel address, as gossiped.
    advertised: SocketAddr,
    /// The accept loop and the gossip publisher, until the node's vital tasks take them.
    tasks: Vec<(&'static str, tokio::task::JoinHandle<()>)>,
}

type Gossip = Arc<tokio::sync::Mutex<chitchat::Chitchat>>;

impl Tunnels {
    /// Binds the listener, starts accepting connectors for the tunnels `config` grants and
    /// relaying PoPs proving `relay_key`, and publishes in gossip where other PoPs relay
    /// through this one and, on every change, the tunnels it holds.
    pub(super) async fn start(
        s: &TunnelSettings,
        config: &Config,
        relay_key: &RelayKey,
        gossip: Gossip,
    ) -> Result<Tunnels, StartError> {
        let fail = |why: String| StartError::frontend("tunnels")(why);
        let files = lb_tls::server::ServerFiles {
            cert: s.cert.clone(),
            key: s.key.clone(),
            client_ca: None,
        };
        let tls = lb_tls::server::ReloadableServer::load(files, &[b"h2"])
            .map_err(|e| fail(format!("--tunnel-cert/--tunnel-key: {e}")))?;
        let pin = lb_tls::pem::certificates(&s.cert)
            .ok()
            .and_then(|certs| certs.first().and_then(SpkiPin::of_certificate))
            .ok_or_else(|| fail(format!("{}: no certificate", s.cert.display())))?;
        let listener = tokio::net::TcpListener::bind(s.listen)
            .await
            .map_err(|e| fail(format!("{}: {e}", s.listen)))?;
        let addr = listener.local_addr().map_err(|e| fail(e.to_string()))?;
        let advertised = s.advertise.unwrap_or(addr);
        let hub = Hub::new(grants(config), s.limits.clone());
        hub.relay_for(relay_key.clone());
        let acceptor = tokio_rustls::TlsAcceptor::from(tls.config());
        let accepting = tokio::spawn(Arc::clone(&hub).serve(listener, acceptor));
        let relay = tunnel::holders::relay_value(advertised, &pin);
        gossip
            .lock()
            .await
            .self_node_state()
            .set(mesh::keys::TUNNEL_RELAY, relay);
        let publishing = tokio::spawn(publish_held(hub.held_changes(), gossip));
        eprintln!("tunnels on {addr}");
        Ok(Tunnels {
            hub,
            advertised,
            tasks: vec![
                ("tunnel listener", accepting),
                ("tunnel holdings publisher", publishing),
            ],
        })
    }

    /// The hub's long-lived tasks, for the node to watch (`meshlb_node::supervise`): the
    /// node exits naming one that ended rather than holding tunnels no one can reach.
    pub(super) fn take_tasks(&mut self) -> Vec<(&'static str, tokio::task::JoinHandle<()>)> {
        std::mem::take(&mut self.tasks)
    }

    pub(super) fn hub(&self) -> Arc<Hub> {
        Arc::clone(&self.hub)
    }

    /// A reload's config: tunnels no longer granted, or whose secret changed, are dropped.
    pub(super) fn apply(&self, config: &Config) {
        self.hub.set_grants(grants(config));
    }
}

/// Keeps the `tunnels` key at the tunnels held here; ends with the hub.
async fn publish_held(mut held: tokio::sync::watch::Receiver<Vec<TunnelId>>, gossip: Gossip) {
    loop {
        let value = tunnel::holders::held_value(&held.borrow_and_update());
        gossip
            .lock()
            .await
            .self_node_state()
            .set(mesh::keys::TUNNELS_HELD, value);
        if held.changed().await.is_err() {
            return;
        }
    }
}

/// The dialer the proxy reaches private endpoints with: this PoP's own tunnel connections
/// when `tunnels` holds some, else those of the PoPs gossip names as holders.
pub(super) fn dialer(
    tunnels: Option<&Tunnels>,
    relay_key: &RelayKey,
    holders: Arc<HolderList>,
) -> PrivateDialer {
    let through = TunnelDialer::new(
        tunnels.map(|t| Arc::clone(&t.hub)),
        relay_key.clone(),
        holders,
        HubLimits::default().open_timeout,
    );
    let through = match tunnels {
        Some(t) => through.with_self(t.advertised),
        None => through,
    };
    PrivateDialer(Arc::new(through))
}

/// Each configured tunnel's secret, routes and the private endpoints in them, by id.
pub(super) fn grants(config: &Config) -> HashMap<TunnelId, Grant> {
    let private = &config.private;
    private
        .tunnels
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            let id: TunnelId = t.id.parse().ok()?;
            let secret: [u8; 32] = t.secret.get(..32)?.try_into().ok()?;
            let index = lb_core::config::private::TunnelIndex(i);
            let routes = private.routes_of(index).collect();
            let targets = private_endpoints(config)
                .filter(|(network, ip)| {
                    private.route(*network, *ip).map(|r| r.tunnel) == Some(index)
                })
                .map(|(_, ip)| ip)
                .collect();
            Some((
                id,
                Grant {
                    secret: TunnelSecret(secret),
                    routes,
                    targets,
                },
            ))
        })
        .collect()
}

/// Every private endpoint's network and address.
fn private_endpoints(config: &Config) -> impl Iterator<Item = (NetworkIndex, IpAddr)> + '_ {
    config
        .pools
        .iter()
        .flat_map(|p| &p.endpoints)
        .filter_map(|e| {
            let ip = match &e.address {
                lb_core::config::Address::Ip(ip) => *ip,
                lb_core::config::Address::Hostname(_) => return None,
            };
            Some((e.network?, ip))
        })
}
