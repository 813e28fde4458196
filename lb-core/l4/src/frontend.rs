//! One generation's layer-4 frontend: which load balancer each ingress port belongs to, the
//! steering decision for a new connection or flow, where its endpoint is, the live counts and
//! the metrics. Replaced whole on a reload (`lb_edge::Serving`); connections that began on
//! the old one finish on it.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use lb_core::affinity::AffinityKey;
use lb_core::clock::unix_secs;
use lb_core::config::private::NetworkIndex;
use lb_core::config::{Address, Config, LbId, LoadBalancer, Transport};
use lb_core::geolocation::{GeolocationError, Geolocator};
use lb_core::regions_table::RegionsTable;
use lb_core::request::{Mode, RequestContext};
use lb_core::steering::{Decision, Engine, Target};
use lb_edge::{decide_live, Generation, PopInfo, PrivateDialer};

use crate::live::Live;
use crate::metrics::L4Metrics;

/// The node's layer-4 limits (flags, not config: a reload keeps them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct L4Settings {
    /// Addresses the load balancers' ports are bound on (`--l4`).
    pub addresses: Vec<IpAddr>,
    /// Worker threads, each with its own socket per port (`--l4-workers`).
    pub workers: usize,
    /// Connecting to an endpoint (`--l4-connect-timeout-ms`).
    pub connect_timeout: Duration,
    /// A TCP connection with no byte either way for this long is closed
    /// (`--l4-idle-timeout-ms`).
    pub idle_timeout: Duration,
    /// TCP connections open at once on this node (`--l4-max-connections`).
    pub max_connections: usize,
    /// A UDP flow with no datagram either way for this long ends (`--l4-udp-idle-timeout-ms`).
    pub udp_idle_timeout: Duration,
    /// UDP flows per listening socket (`--l4-udp-max-flows`); a new flow beyond it pushes out
    /// the least recently active one.
    pub udp_max_flows: usize,
    /// The layer-4 log (`--l4-log`).
    pub log: Option<crate::record::L4Log>,
    /// How TCP connections reach private endpoints (through tunnels); `None`: a private
    /// endpoint is never connected to, and the connection steers to another.
    pub private: Option<PrivateDialer>,
}

impl Default for L4Settings {
    fn default() -> Self {
        L4Settings {
            addresses: Vec::new(),
            workers: 1,
            connect_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(600),
            max_connections: 65_536,
            udp_idle_timeout: Duration::from_secs(30),
            udp_max_flows: 65_536,
            log: None,
            private: None,
        }
    }
}

/// Where an endpoint is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndpointReach {
    /// Over the public side, at this address.
    Public(SocketAddr),
    /// Through the tunnel routing this address of a private network.
    Private(NetworkIndex, SocketAddr),
}

/// The layer-4 frontend of one configuration generation.
#[derive(Debug)]
pub struct Layer4 {
    generation: Arc<Generation>,
    config: Arc<Config>,
    regions: Arc<RegionsTable>,
    key: AffinityKey,
    pop: PopInfo,
    geo: Geolocator,
    pub(crate) live: Arc<Live>,
    pub(crate) metrics: Arc<L4Metrics>,
    pub(crate) settings: L4Settings,
    ports: HashMap<(Transport, u16), LbId>,
}

impl Layer4 {
    pub fn new(
        generation: Arc<Generation>,
        regions: Arc<RegionsTable>,
        key: AffinityKey,
        pop: PopInfo,
        settings: L4Settings,
    ) -> Result<Layer4, GeolocationError> {
        let live = Arc::new(Live::new(generation.config()));
        Self::build(generation, regions, key, pop, settings, live)
    }

    /// The frontend of the next generation, with this one's live counts carried over.
    pub fn reloaded(&self, generation: Arc<Generation>) -> Result<Layer4, GeolocationError> {
        let live = Arc::new(Live::carried(generation.config(), &self.config, &self.live));
        Self::build(
            generation,
            Arc::clone(&self.regions),
            self.key.clone(),
            self.pop.clone(),
            self.settings.clone(),
            live,
        )
    }

    fn build(
        generation: Arc<Generation>,
        regions: Arc<RegionsTable>,
        key: AffinityKey,
        pop: PopInfo,
        settings: L4Settings,
        live: Arc<Live>,
    ) -> Result<Layer4, GeolocationError> {
        let config = Arc::clone(generation.config());
        let geo = Geolocator::new(&config.geolocation)?;
        let ports = config
            .load_balancers
            .iter()
            .enumerate()
            .filter_map(|(i, lb)| lb.layer4.as_ref().map(|l| (i, l)))
            .flat_map(|(i, l)| {
                l.ports
                    .iter()
                    .map(move |p| ((l.transport, p.listen), LbId(i)))
            })
            .collect();
        Ok(Layer4 {
            metrics: Arc::new(L4Metrics::new(&config)),
            generation,
            config,
            regions,
            key,
            pop,
            geo,
            live,
            settings,
            ports,
        })
    }

    pub fn config(&self) -> &Arc<Config> {
        &self.config
    }

    pub fn settings(&self) -> &L4Settings {
        &self.settings
    }

    /// Every (transport, port) this generation listens on.
    pub fn ports(&self) -> impl Iterator<Item = (Transport, u16)> + '_ {
        self.ports.keys().copied()
    }

    /// The load balancer listening on `port` for `transport`.
    pub fn route(&self, transport: Transport, port: u16) -> Option<(LbId, &LoadBalancer)> {
        let id = *self.ports.get(&(transport, port))?;
        self.config.load_balancers.get(id.0).map(|lb| (id, lb))
    }

    /// The steering decision for a new connection or flow from `client`.
    pub fn decide(&self, lb: &LoadBalancer, client: SocketAddr) -> Decision {
        let mut ctx = RequestContext::new(Mode::Proxy, self.pop.pop(), unix_secs());
        ctx.client_ip = Some(client.ip());
        if !self.geo.is_empty() {
            ctx.client_location = self.geo.locate(client.ip()).map(|(l, _)| l);
        }
        ctx.load = Some(&*self.live);
        let engine = Engine::new(&self.config, &self.regions, &self.key);
        decide_live(&engine, lb, &self.generation, &ctx)
    }

    /// Where a connection or flow that came in on `listen` goes at `target`: the endpoint's
    /// address (a hostname is resolved, the first address taken), at the mapped port, and
    /// the network of a private endpoint (reached only through its tunnel).
    pub async fn endpoint_reach(
        &self,
        lb: &LoadBalancer,
        target: Target,
        listen: u16,
    ) -> Option<EndpointReach> {
        let e = self
            .config
            .pools
            .get(target.pool.0)?
            .endpoints
            .get(target.endpoint.0)?;
        let port = lb.layer4.as_ref()?.origin_port(listen, e.port);
        if let (Some(network), Address::Ip(ip)) = (e.network, &e.address) {
            return Some(EndpointReach::Private(network, SocketAddr::new(*ip, port)));
        }
        let addr = match &e.address {
            Address::Ip(ip) => Some(SocketAddr::new(*ip, port)),
            // Bounded by the connect timeout: a UDP socket's loop waits for it.
            Address::Hostname(h) => tokio::time::timeout(
                self.settings.connect_timeout,
                tokio::net::lookup_host((h.as_str(), port)),
            )
            .await
            .ok()?
            .ok()?
            .next(),
        };
        addr.map(EndpointReach::Public)
    }

    /// A public endpoint's address, for UDP flows: datagrams do not cross tunnels, so a
    /// private endpoint has none (and is never sent one on the public side).
    pub async fn endpoint_addr(
        &self,
        lb: &LoadBalancer,
        target: Target,
        listen: u16,
    ) -> Option<SocketAddr> {
        match self.endpoint_reach(lb, target, listen).await? {
            EndpointReach::Public(addr) => Some(addr),
            EndpointReach::Private(..) => None,
        }
    }

    /// The private networks of this generation's config (a private endpoint's route).
    pub(crate) fn private_networks(&self) -> &lb_core::config::private::PrivateNetworks {
        &self.config.private
    }

    /// Open connections or flows at `target` now (tests, status).
    pub fn open_at(&self, target: Target) -> u32 {
        self.live.count(target)
    }
}
