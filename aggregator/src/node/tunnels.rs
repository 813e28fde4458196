//! The PoP's side of tunnels (`--tunnel-listen`): the `tunnel::Hub` that accepts connectors,
//! its grants from the config in force (each tunnel's secret and the routes through it), and
//! the private dialer the proxy reaches private endpoints with (`lb_edge::private_dial`).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use lb_core::config::private::{NetworkIndex, PrivateNetworks};
use lb_core::config::Config;
use lb_edge::{Dial, PrivateDialError, PrivateDialer, PrivateStream};
use tunnel::{Grant, Hub, HubLimits, OpenError, TunnelId, TunnelSecret};

use super::StartError;

/// `--tunnel-listen` and its company.
#[derive(Debug, Clone)]
pub struct TunnelSettings {
    pub listen: SocketAddr,
    /// The certificate connectors verify (by its CA or its key's pin) and its key.
    pub cert: PathBuf,
    pub key: PathBuf,
    pub limits: HubLimits,
}

/// The running hub.
pub(super) struct Tunnels {
    hub: Arc<Hub>,
}

impl Tunnels {
    /// Binds the listener and starts accepting connectors for the tunnels `config` grants.
    pub(super) async fn start(s: &TunnelSettings, config: &Config) -> Result<Tunnels, StartError> {
        let fail = StartError::frontend("tunnels");
        let files = lb_tls::server::ServerFiles {
            cert: s.cert.clone(),
            key: s.key.clone(),
            client_ca: None,
        };
        let tls = lb_tls::server::ReloadableServer::load(files, &[b"h2"])
            .map_err(|e| fail(format!("--tunnel-cert/--tunnel-key: {e}")))?;
        let listener = tokio::net::TcpListener::bind(s.listen)
            .await
            .map_err(|e| StartError::frontend("tunnels")(format!("{}: {e}", s.listen)))?;
        let addr = listener
            .local_addr()
            .map_err(|e| StartError::frontend("tunnels")(e.to_string()))?;
        let hub = Hub::new(grants(config), s.limits.clone());
        let acceptor = tokio_rustls::TlsAcceptor::from(tls.config());
        tokio::spawn(Arc::clone(&hub).serve(listener, acceptor));
        eprintln!("tunnels on {addr}");
        Ok(Tunnels { hub })
    }

    /// A reload's config: tunnels no longer granted, or whose secret changed, are dropped.
    pub(super) fn apply(&self, config: &Config) {
        self.hub.set_grants(grants(config));
    }

    /// The dialer the proxy reaches private endpoints with.
    pub(super) fn dialer(&self) -> PrivateDialer {
        PrivateDialer(Arc::new(HubDialer(Arc::clone(&self.hub))))
    }
}

/// Each configured tunnel's secret and routes, by id.
pub(super) fn grants(config: &Config) -> HashMap<TunnelId, Grant> {
    let private = &config.private;
    private
        .tunnels
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            let id: TunnelId = t.id.parse().ok()?;
            let secret: [u8; 32] = t.secret.get(..32)?.try_into().ok()?;
            let routes = private
                .routes_of(lb_core::config::private::TunnelIndex(i))
                .collect();
            Some((
                id,
                Grant {
                    secret: TunnelSecret(secret),
                    routes,
                },
            ))
        })
        .collect()
}

/// Opens a stream through the tunnel whose route holds the address, on this PoP's own
/// connections of it.
struct HubDialer(Arc<Hub>);

impl Dial for HubDialer {
    fn dial<'a>(
        &'a self,
        networks: &'a PrivateNetworks,
        network: NetworkIndex,
        to: SocketAddr,
    ) -> lb_edge::private_dial::PrivateDial<'a> {
        Box::pin(async move {
            let route = networks
                .route(network, to.ip())
                .ok_or(PrivateDialError::NoTunnel)?;
            let id: TunnelId = networks
                .tunnel(route.tunnel)
                .id
                .parse()
                .map_err(|_| PrivateDialError::NoTunnel)?;
            match self.0.open_tcp(&id, to).await {
                Ok(stream) => Ok(Box::new(stream) as Box<dyn PrivateStream>),
                Err(OpenError::NoConnection | OpenError::NotRouted) => {
                    Err(PrivateDialError::NoTunnel)
                }
                Err(OpenError::Unreachable(_)) => Err(PrivateDialError::Unreachable),
                Err(OpenError::TimedOut) => Err(PrivateDialError::TimedOut),
            }
        })
    }
}
