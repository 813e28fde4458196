//! The flags of `meshlb aggregator` and the [`Settings`] they make: the admin listener and
//! its API, DNS, the proxy, layer 4 and the records ([`records`]), with the flags every node
//! shares (`meshlb_node::flags`) flattened in.

mod records;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use lb_core::{Region, RegionsTable};
use meshlb_node::control::ConfigRole;
use meshlb_node::flags::{
    node_settings, AdminTlsArgs, ConfigFileArgs, ControlArgs, MeshArgs, Place, StoreArgs,
};

use crate::node::{AdminSettings, DnsSettings, ProxyListeners, Settings};
pub use records::{AccessLogFormat, RecordArgs};

/// Why an aggregator's flags make no settings.
#[derive(Debug, thiserror::Error)]
pub enum FlagError {
    #[error(transparent)]
    Node(#[from] meshlb_node::flags::FlagError),
    #[error("{0}")]
    Needs(&'static str),
    #[error("{flag}: {error}")]
    Records {
        flag: &'static str,
        error: lb_records::StartError,
    },
}

/// `meshlb aggregator`'s flags.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    file: ConfigFileArgs,
    /// The region this aggregator serves (its PoP).
    #[arg(long)]
    region: Region,
    /// The PoP's datacenter, if any.
    #[arg(long, default_value = "pop")]
    dc: String,
    /// Admin API address (HTTP, or HTTPS with --admin-tls-cert).
    #[arg(long, value_name = "ADDR")]
    admin: SocketAddr,
    #[command(flatten)]
    admin_tls: AdminTlsArgs,
    /// With --admin-tls-cert, serve the admin API over plain HTTP on this address as well
    /// (a loopback address for a local scraper, say).
    #[arg(long, value_name = "ADDR", requires = "admin_tls_cert")]
    admin_plain_listen: Option<SocketAddr>,
    /// File holding the admin API bearer token (else MESHLB_ADMIN_TOKEN). Without one, reads
    /// are open and every state-changing call (/drain, /-/reload) is refused.
    #[arg(long, value_name = "FILE")]
    admin_token_file: Option<PathBuf>,
    /// File holding a bearer token that only reads the admin API and the control-plane API
    /// (else MESHLB_ADMIN_READ_TOKEN).
    #[arg(long, value_name = "FILE")]
    admin_read_token_file: Option<PathBuf>,
    /// How long a request head may take to arrive at the admin API.
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    admin_head_timeout_ms: u64,
    /// How long a write of an admin answer may wait for the client to read it; a client that
    /// stops reading is cut then.
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    admin_send_timeout_ms: u64,
    /// How long an API request's body may take to arrive.
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    admin_body_timeout_ms: u64,
    /// Monitor previews (`POST .../preview`) of this aggregator running at once; more are
    /// refused 429 until one expires.
    #[arg(long, value_name = "N", default_value_t = 16)]
    api_preview_max: usize,
    /// Endpoints one monitor preview may probe; a larger preview is refused 400.
    #[arg(long, value_name = "N", default_value_t = 256)]
    api_preview_max_origins: usize,
    /// How long a monitor preview and its outcomes last.
    #[arg(long, value_name = "SECS", default_value_t = 600)]
    api_preview_ttl_secs: u64,
    /// This aggregator is the mesh's config primary: it takes the API's writes, makes each a
    /// new generation of --config (the one before kept as <file>.previous) and serves it to
    /// the nodes started with --config-from-mesh.
    #[arg(long, conflicts_with = "config_from_mesh")]
    config_primary: bool,
    /// The admin API URL the primary announces for fetches [default: http://<--admin>, with
    /// the gossip address's IP when --admin listens on every address].
    #[arg(long, value_name = "URL")]
    config_advertise_url: Option<String>,
    #[command(flatten)]
    control: ControlArgs,
    #[command(flatten)]
    store: StoreArgs,
    /// Connections the admin listener keeps open at once; more are closed at accept.
    #[arg(long, value_name = "N", default_value_t = 256)]
    admin_max_connections: usize,
    /// Serve authoritative DNS on this address, UDP and TCP (repeat for IPv4 and IPv6).
    #[arg(long = "dns", value_name = "ADDR")]
    dns: Vec<SocketAddr>,
    /// UDP sockets per DNS address (SO_REUSEPORT); default: one per CPU.
    #[arg(long, value_name = "N")]
    dns_sockets: Option<usize>,
    /// DNS response-rate limiting: UDP answers per second per client prefix (0: off).
    #[arg(long, value_name = "N", default_value_t = 0)]
    dns_rrl_rate: u32,
    /// Of the UDP answers over the rate, every N-th goes out truncated (TC=1, so resolvers
    /// retry over TCP), the others are dropped (0: drop all).
    #[arg(long, value_name = "N", default_value_t = 2)]
    dns_rrl_slip: u32,
    /// The IPv4 client prefix length one rate applies to.
    #[arg(long, value_name = "BITS", default_value_t = 24)]
    dns_rrl_ipv4_prefix: u8,
    /// The IPv6 client prefix length one rate applies to.
    #[arg(long, value_name = "BITS", default_value_t = 56)]
    dns_rrl_ipv6_prefix: u8,
    /// Client prefixes the rate limiter tracks at once (the least recently seen go first).
    #[arg(long, value_name = "N", default_value_t = 65_536)]
    dns_rrl_table: usize,
    /// DNS TCP connections open at once (over every --dns address); more are closed at accept.
    #[arg(long, value_name = "N", default_value_t = 1024)]
    dns_tcp_max_connections: usize,
    /// How long a DNS TCP connection may wait for the client: for a query, the rest of one,
    /// or to take an answer.
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    dns_tcp_idle_timeout_ms: u64,
    /// Client locations whose geo, proximity or dynamic-latency answers are kept prepared per
    /// health snapshot; queries from further places are steered one by one (0: none).
    #[arg(long, value_name = "N", default_value_t = lb_dns::DEFAULT_PREPARED_PLACES)]
    dns_prepared_places: usize,
    /// The name server identifier answered to queries that ask for it (NSID, RFC 5001; `dig
    /// +nsid`), so that an operator behind anycast can tell which node answered [default: the
    /// node's gossip id; empty: none].
    #[arg(long, value_name = "ID")]
    dns_nsid: Option<String>,
    /// Answer DNS cookies (RFC 7873) with server cookies in RFC 9018's format, their secret
    /// derived from the cluster key so every aggregator accepts the others'; a query with a
    /// valid server cookie is exempt from response-rate limiting.
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    dns_cookies: bool,
    /// Serve the HTTP reverse proxy (HTTP/1.1 and HTTP/2) on this address (repeatable).
    #[arg(long = "proxy", value_name = "ADDR")]
    proxy: Vec<SocketAddr>,
    /// An address clients reach this aggregator's proxy at (repeatable, IPv4 and IPv6):
    /// gossiped with its region, DNS answers proxied load balancers' names with the nearest
    /// live, ready PoPs' addresses. Needs --proxy or --proxy-tls.
    #[arg(long = "advertise-proxy", value_name = "IP")]
    advertise_proxy: Vec<std::net::IpAddr>,
    /// Serve the proxy with TLS on this address (repeatable; needs --tls-cert/--tls-key).
    #[arg(long = "proxy-tls", value_name = "ADDR")]
    proxy_tls: Vec<SocketAddr>,
    /// Proxy worker threads, each with its own listening socket and origin connections
    /// [default: one per CPU].
    #[arg(long = "proxy-workers", value_name = "N")]
    proxy_workers: Option<usize>,
    /// Header-affinity sessions the proxy keeps (about 100 bytes each); beyond, the least
    /// recently used make room.
    #[arg(long = "proxy-max-header-sessions", value_name = "N", default_value_t = 1 << 18)]
    proxy_max_header_sessions: usize,
    /// A client must send a request's head within this (and between keep-alive requests).
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    proxy_header_timeout_ms: u64,
    /// The longest wait for a request body's next bytes.
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    proxy_body_read_timeout_ms: u64,
    /// The longest a whole request body may take.
    #[arg(long, value_name = "MS", default_value_t = 300_000)]
    proxy_body_timeout_ms: u64,
    /// The longest a write may wait for the client to read it.
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    proxy_send_timeout_ms: u64,
    /// An HTTP/2 connection with no request in flight for this long is closed (GOAWAY).
    #[arg(long, value_name = "MS", default_value_t = 60_000)]
    proxy_h2_idle_timeout_ms: u64,
    /// HTTP/2 PING interval; a client that does not answer within it is cut (0: no PINGs).
    #[arg(long, value_name = "MS", default_value_t = 20_000)]
    proxy_h2_keepalive_ms: u64,
    /// Client connections each proxy worker serves at once; more are closed at accept.
    #[arg(long, value_name = "N", default_value_t = 16_384)]
    proxy_max_connections_per_worker: usize,
    /// Serve layer-4 (TCP and UDP) load balancers' ports on this address (repeatable, e.g.
    /// 0.0.0.0 and ::); the ports come from the config and follow its reloads.
    #[arg(long = "l4", value_name = "IP")]
    l4: Vec<std::net::IpAddr>,
    /// Layer-4 worker threads, each with its own socket per port [default: one per CPU].
    #[arg(long = "l4-workers", value_name = "N")]
    l4_workers: Option<usize>,
    /// Connecting to a layer-4 endpoint; a connect that takes longer is retried elsewhere.
    #[arg(long, value_name = "MS", default_value_t = 5_000)]
    l4_connect_timeout_ms: u64,
    /// A layer-4 TCP connection with no byte either way for this long is closed.
    #[arg(long, value_name = "MS", default_value_t = 600_000)]
    l4_idle_timeout_ms: u64,
    /// Layer-4 TCP connections open at once on this node; more are closed at accept.
    #[arg(long, value_name = "N", default_value_t = 65_536)]
    l4_max_connections: usize,
    /// A layer-4 UDP flow with no datagram either way for this long ends.
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    l4_udp_idle_timeout_ms: u64,
    /// UDP flows per layer-4 listening socket; a new flow beyond pushes out the least
    /// recently active.
    #[arg(long, value_name = "N", default_value_t = 65_536)]
    l4_udp_max_flows: usize,
    /// A PEM certificate chain for TLS; SNI picks the one valid for the name (the first is
    /// the default). Repeat with --tls-key in the same order.
    #[arg(long = "tls-cert", value_name = "FILE")]
    tls_cert: Vec<PathBuf>,
    /// The PEM private key of the --tls-cert at the same position.
    #[arg(long = "tls-key", value_name = "FILE")]
    tls_key: Vec<PathBuf>,
    /// Keep state across restarts in this directory: the drain decisions (`drains.json`).
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// `GET /readyz` says ready after this many seconds even while some endpoints still have
    /// no verdict (before, it waits for every monitored endpoint's first verdict).
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    warmup_timeout: u64,
    /// An edge of the mesh: a PoP that holds the probers' and the core aggregators' state but
    /// no other edge's, and whose own keys (readiness, proxy addresses, drains) stay local;
    /// for meshes of thousands of PoPs (docs/operations.md#meshes-of-thousands). Needs
    /// bounded gossip; a config primary or store is always core.
    #[arg(long, conflicts_with_all = ["config_primary", "config_store"])]
    mesh_edge: bool,
    /// Accept tunnel connectors (`meshlb tunnel run`) on this TCP address, over TLS with
    /// --tunnel-cert and --tunnel-key, and reach private endpoints through them
    /// (docs/design.md#private-endpoints).
    #[arg(long, value_name = "ADDR", requires_all = ["tunnel_cert", "tunnel_key"])]
    tunnel_listen: Option<SocketAddr>,
    /// The tunnel address other PoPs relay through, gossiped [default: --tunnel-listen; set
    /// it when that is a wildcard address].
    #[arg(long, value_name = "ADDR", requires = "tunnel_listen")]
    tunnel_advertise: Option<SocketAddr>,
    /// The PEM certificate chain connectors verify (by its CA or its key's pin).
    #[arg(long, value_name = "FILE", requires = "tunnel_listen")]
    tunnel_cert: Option<PathBuf>,
    /// The PEM private key of --tunnel-cert.
    #[arg(long, value_name = "FILE", requires = "tunnel_listen")]
    tunnel_key: Option<PathBuf>,
    /// Connectors connected at once; one more is refused at accept (and counted).
    #[arg(long, value_name = "N", default_value_t = 1024)]
    tunnel_max_connectors: usize,
    /// A connector must finish TLS and its hello within this.
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    tunnel_hello_timeout_ms: u64,
    /// Connections one tunnel may hold on this PoP (replicas x their connections).
    #[arg(long, value_name = "N", default_value_t = 16)]
    tunnel_max_connections_per_tunnel: usize,
    #[command(flatten)]
    records: RecordArgs,
    #[command(flatten)]
    mesh: MeshArgs,
}

/// A duration flag in milliseconds, at least 1 ms.
fn ms(v: u64) -> Duration {
    Duration::from_millis(v.max(1))
}

impl Args {
    /// The node's settings from the flags.
    pub fn settings(&self, regions: &RegionsTable) -> Result<Settings, FlagError> {
        let role = if self.config_primary {
            ConfigRole::Primary
        } else if self.store.config_store.is_some() {
            ConfigRole::Store
        } else if self.control.config_from_mesh {
            ConfigRole::Follower
        } else {
            ConfigRole::Standalone
        };
        let credentials = self.admin_tls.credentials(
            (self.admin_token_file.as_ref(), "MESHLB_ADMIN_TOKEN"),
            Some((
                self.admin_read_token_file.as_ref(),
                "MESHLB_ADMIN_READ_TOKEN",
            )),
        )?;
        let place = Place {
            role: "aggregator",
            region: self.region,
            dc: &self.dc,
            config_role: role,
        };
        let mut node = node_settings(&self.file, place, &self.control, &self.mesh, regions)?;
        node.control.store = self.store.settings();
        if self.mesh_edge {
            node.mesh.tier = mesh::Tier::Edge;
        }
        let serves = (
            !self.proxy.is_empty() || !self.proxy_tls.is_empty(),
            !self.l4.is_empty(),
            !self.dns.is_empty(),
        );
        if let Some(why) = self.records.unused(serves.0, serves.1, serves.2) {
            return Err(FlagError::Needs(why));
        }
        let dnstap = self.records.dnstap(&node.node_id)?;
        let nsid = self.dns_nsid.as_deref().unwrap_or(&node.node_id);
        let nsid = (!nsid.is_empty()).then(|| std::sync::Arc::from(nsid.as_bytes()));
        Ok(Settings {
            node,
            affinity_key: self.mesh.affinity_key()?,
            relay_key: tunnel::RelayKey::derive(self.mesh.key_texts()?.0.as_bytes()),
            config_advertise_url: self.config_advertise_url.clone(),
            admin: AdminSettings {
                addr: self.admin,
                credentials,
                plain: self.admin_plain_listen,
                limits: meshlb_node::guard::Limits {
                    head_timeout: ms(self.admin_head_timeout_ms),
                    send_timeout: ms(self.admin_send_timeout_ms),
                    max_connections: self.admin_max_connections,
                },
                body: crate::admin::BodyLimits {
                    max_bytes: self.control.config_max_bytes.max(1),
                    timeout: ms(self.admin_body_timeout_ms),
                },
                previews: crate::previews::PreviewLimits {
                    max_active: self.api_preview_max,
                    max_origins: self.api_preview_max_origins,
                    ttl: Duration::from_secs(self.api_preview_ttl_secs.max(1)),
                },
            },
            dns: self.dns_settings(dnstap, nsid, self.dns_cookies()?),
            proxy: self.proxy_settings()?,
            advertise_proxy: self.advertise_proxy.clone(),
            l4: self.l4_settings()?,
            tunnels: self.tunnel_settings(),
            state_dir: self.state_dir.clone(),
            warmup_timeout: Duration::from_secs(self.warmup_timeout),
            install_metrics: true,
        })
    }

    fn tunnel_settings(&self) -> Option<crate::node::TunnelSettings> {
        let (listen, cert, key) = (
            self.tunnel_listen?,
            self.tunnel_cert.clone()?,
            self.tunnel_key.clone()?,
        );
        Some(crate::node::TunnelSettings {
            listen,
            advertise: self.tunnel_advertise,
            cert,
            key,
            limits: tunnel::HubLimits {
                max_connectors: self.tunnel_max_connectors.max(1),
                hello_timeout: ms(self.tunnel_hello_timeout_ms),
                max_connections_per_tunnel: self.tunnel_max_connections_per_tunnel.max(1),
                ..tunnel::HubLimits::default()
            },
        })
    }

    fn dns_settings(
        &self,
        dnstap: Option<lb_dns::Dnstap>,
        nsid: Option<std::sync::Arc<[u8]>>,
        cookies: Option<lb_dns::Cookies>,
    ) -> Option<DnsSettings> {
        (!self.dns.is_empty()).then(|| DnsSettings {
            dnstap,
            nsid,
            cookies,
            addrs: self.dns.clone(),
            sockets: self.dns_sockets.unwrap_or_else(|| {
                std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get)
            }),
            rrl: lb_dns::RrlSettings {
                responses_per_second: self.dns_rrl_rate,
                slip: self.dns_rrl_slip,
                ipv4_prefix: self.dns_rrl_ipv4_prefix.min(32),
                ipv6_prefix: self.dns_rrl_ipv6_prefix.min(128),
                table_size: self.dns_rrl_table.max(1),
            },
            tcp: lb_dns::TcpSettings {
                max_connections: self.dns_tcp_max_connections.max(1),
                idle_timeout: ms(self.dns_tcp_idle_timeout_ms),
            },
            prepared_places: self.dns_prepared_places,
        })
    }

    /// The server cookies' secrets: from the cluster key, and from the previous one while it
    /// rotates (`docs/operations.md#running-a-mesh`).
    fn dns_cookies(&self) -> Result<Option<lb_dns::Cookies>, FlagError> {
        if !self.dns_cookies {
            return Ok(None);
        }
        let (current, previous) = self.mesh.key_texts()?;
        Ok(Some(lb_dns::Cookies {
            current: lb_dns::CookieSecret::derive(current.as_bytes()),
            previous: previous.map(|p| lb_dns::CookieSecret::derive(p.as_bytes())),
        }))
    }

    fn proxy_settings(&self) -> Result<Option<ProxyListeners>, FlagError> {
        if self.proxy.is_empty() && self.proxy_tls.is_empty() {
            return Ok(None);
        }
        if !self.proxy_tls.is_empty() && self.tls_cert.len() != self.tls_key.len() {
            return Err(FlagError::Needs(
                "--proxy-tls needs --tls-cert and --tls-key given in pairs",
            ));
        }
        let defaults = lb_proxy::ProxySettings::default();
        Ok(Some(ProxyListeners {
            plain: self.proxy.clone(),
            tls: self.proxy_tls.clone(),
            certificates: self
                .tls_cert
                .iter()
                .cloned()
                .zip(self.tls_key.iter().cloned())
                .collect(),
            settings: lb_proxy::ProxySettings {
                workers: self.proxy_workers.unwrap_or(defaults.workers).max(1),
                max_header_sessions: self.proxy_max_header_sessions.max(1),
                header_read_timeout: ms(self.proxy_header_timeout_ms),
                body_read_timeout: ms(self.proxy_body_read_timeout_ms),
                body_timeout: ms(self.proxy_body_timeout_ms),
                send_timeout: ms(self.proxy_send_timeout_ms),
                h2_idle_timeout: ms(self.proxy_h2_idle_timeout_ms),
                h2_keep_alive_interval: Duration::from_millis(self.proxy_h2_keepalive_ms),
                max_connections_per_worker: self.proxy_max_connections_per_worker.max(1),
                access_log: self.records.access_log()?,
                ..defaults
            },
        }))
    }

    fn l4_settings(&self) -> Result<Option<lb_l4::L4Settings>, FlagError> {
        if self.l4.is_empty() {
            return Ok(None);
        }
        Ok(Some(lb_l4::L4Settings {
            addresses: self.l4.clone(),
            workers: self.l4_workers.unwrap_or_else(|| {
                std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
            }),
            connect_timeout: ms(self.l4_connect_timeout_ms),
            idle_timeout: ms(self.l4_idle_timeout_ms),
            max_connections: self.l4_max_connections.max(1),
            udp_idle_timeout: ms(self.l4_udp_idle_timeout_ms),
            udp_max_flows: self.l4_udp_max_flows.max(1),
            log: self.records.l4_log()?,
            // The node's tunnel dialer, given when the frontends start.
            private: None,
        }))
    }
}
