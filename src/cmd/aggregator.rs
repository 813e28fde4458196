//! `meshlb aggregator`: join the mesh, tally the probers' votes, serve the admin API.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use aggregator::reload::Adopter;
use aggregator::service;
use aggregator::shared::{InForce, Shared};
use aggregator::tally::TallySettings;
use anyhow::{anyhow, Context};
use lb_core::config::Config;
use lb_core::{Region, RegionsTable};
use lb_edge::{Generation, Serving};
use mesh::{node::config_hash, NodeIdentity};

use super::mesh_args::{stopped, MeshArgs};
use super::reload;

mod reloader;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The configuration file (re-read on SIGHUP, on `POST /-/reload`, and with
    /// --watch-config when it changes).
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// Also reload when the file's content changes (a Kubernetes ConfigMap update included).
    #[arg(long)]
    watch_config: bool,
    /// How often --watch-config reads the file.
    #[arg(long, value_name = "MS", default_value_t = 2000)]
    watch_interval_ms: u64,
    /// The region this aggregator serves (its PoP).
    #[arg(long)]
    region: Region,
    /// The PoP's datacenter, if any.
    #[arg(long, default_value = "pop")]
    dc: String,
    /// Admin API address (HTTP).
    #[arg(long, value_name = "ADDR")]
    admin: SocketAddr,
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
    /// How long an API request's body may take to arrive.
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    admin_body_timeout_ms: u64,
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
    control: super::control_args::ControlArgs,
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
    #[command(flatten)]
    mesh: MeshArgs,
}

/// A duration flag in milliseconds, at least 1 ms.
fn ms(v: u64) -> Duration {
    Duration::from_millis(v.max(1))
}

/// The URL the primary announces for fetches of its document.
fn advertise_url(args: &Args, settings: &mesh::MeshSettings) -> String {
    if let Some(u) = &args.config_advertise_url {
        return u.trim_end_matches('/').to_string();
    }
    let mut addr = args.admin;
    if addr.ip().is_unspecified() {
        addr.set_ip(settings.advertise.unwrap_or(settings.listen).ip());
    }
    format!("http://{addr}")
}

fn read_token(file: Option<&PathBuf>, env: &str) -> anyhow::Result<Option<String>> {
    Ok(match file {
        Some(f) => Some(
            std::fs::read_to_string(f)
                .with_context(|| format!("cannot read {}", f.display()))?
                .trim()
                .to_string(),
        ),
        None => std::env::var(env).ok(),
    })
}

pub fn run(args: &Args, regions: &RegionsTable) -> anyhow::Result<ExitCode> {
    let role = if args.config_primary {
        aggregator::control::Role::Primary
    } else if args.control.config_from_mesh {
        aggregator::control::Role::Follower
    } else {
        aggregator::control::Role::Standalone
    };
    let (store, document) = super::control_args::open(&args.config, role)?;
    let text = document.text.to_string();
    let config = Config::parse(&args.config.display().to_string(), &text, regions)
        .map_err(|e| anyhow!("{e}"))?;
    let settings = args.mesh.settings()?;
    let token = read_token(args.admin_token_file.as_ref(), "MESHLB_ADMIN_TOKEN")?;
    let read_token = read_token(
        args.admin_read_token_file.as_ref(),
        "MESHLB_ADMIN_READ_TOKEN",
    )?;
    let plane = args.control.plane(
        role,
        document,
        super::control_args::control_key(&args.mesh)?,
    );
    if !args.advertise_proxy.is_empty()
        && args.proxy.is_empty()
        && args.proxy_tls.is_empty()
        && args.l4.is_empty()
    {
        return Err(anyhow!(
            "--advertise-proxy names where clients reach this aggregator's proxy: give --proxy, --proxy-tls or --l4 too"
        ));
    }
    if args.l4.is_empty() && config.load_balancers.iter().any(|lb| lb.layer4.is_some()) {
        eprintln!(
            "warning: the config has layer-4 load balancers and this aggregator serves none of them (no --l4)"
        );
    }
    if !args.dns.is_empty()
        && args.advertise_proxy.is_empty()
        && config.load_balancers.iter().any(|lb| lb.proxied)
    {
        tracing::warn!(
            "proxied load balancers are answered over DNS with the PoPs' addresses, and this aggregator advertises none (--advertise-proxy): until a live, ready aggregator does, their names get NODATA"
        );
        eprintln!(
            "warning: no --advertise-proxy: proxied load balancers' names get NODATA until some aggregator of the mesh advertises its proxy"
        );
    }
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async {
        let hash = config_hash(&text);
        let loaded_at = lb_core::clock::unix_secs();
        let identity = NodeIdentity {
            node_id: args
                .mesh
                .node_id("aggregator", args.region.code(), &args.dc),
            role: mesh::Role::Aggregator,
            region: args.region.code().to_string(),
            datacenter: args.dc.clone(),
            config_hash: hash.clone(),
            config_loaded_at: loaded_at,
        };
        let node = mesh::start(&identity, &settings).await?;
        if !args.advertise_proxy.is_empty() {
            let addrs = mesh::keys::encode_addrs(&args.advertise_proxy);
            node.handle
                .with_chitchat(|c| c.self_node_state().set(mesh::keys::PROXY_ADDRS, &addrs))
                .await;
        }
        let tally = TallySettings {
            region: args.region,
            warmup_timeout: Duration::from_secs(args.warmup_timeout),
            ..TallySettings::default()
        };
        let metrics = super::metrics_http::install(&[
            ("node_role", "aggregator"),
            ("node_region", args.region.code()),
        ]);
        aggregator::metrics::record_regions(regions);
        let config = Arc::new(config);
        let generation = Arc::new(Generation::unknown(1, Arc::clone(&config)));
        let notifier =
            aggregator::notify::Notifier::start(Arc::clone(&config), identity.node_id.clone())
                .map_err(|e| anyhow!("{}: {e}", args.config.display()))?;
        let in_force = InForce::new(
            Arc::clone(&generation),
            hash,
            loaded_at,
            aggregator::drains::from_config(&config, None, loaded_at),
            notifier,
        );
        let shared = Shared::new(in_force, Arc::new(regions.clone()), tally, metrics);
        let _ = shared.control.set(Arc::clone(&plane));
        let announce_url = advertise_url(args, &settings);
        let announcement = |plane: &aggregator::control::ControlPlane| {
            (plane.role == aggregator::control::Role::Primary).then(|| {
                let d = plane.document.load();
                aggregator::control::Announcement {
                    generation: d.generation,
                    sha256: d.sha256.clone(),
                    size: d.text.len() as u64,
                    url: announce_url.clone(),
                }
                .to_string()
            })
        };
        super::control_args::publish(&node.handle, &plane, announcement(&plane)).await;
        if let Some(dir) = &args.state_dir {
            let state = aggregator::drain_state::DrainState::in_dir(dir)?;
            let loaded = state.load(&config)?;
            for note in &loaded.ignored {
                tracing::warn!("{note}");
            }
            if let Ok(mut tables) = shared.drains.tables.lock() {
                tables.decisions = loaded.decisions;
            }
            let _ = shared.drains.state_file.set(state);
        }
        let listener = aggregator::admin::bind(args.admin).await?;
        if aggregator::admin::guard::exposed_without_token(args.admin, token.as_deref()) {
            tracing::warn!(admin = %args.admin, "the admin API listens beyond loopback without a token: anyone who reaches it reads every state and vote (changes are refused without a token); set --admin-token-file");
            eprintln!("WARNING: the admin API on {} is reachable from other hosts without a token: its reads are open to them (changes are refused); set --admin-token-file", args.admin);
        }
        eprintln!(
            "meshlb aggregator {} gossiping on {}, admin API on http://{}",
            identity.node_id, settings.listen, args.admin
        );
        let (dns_server, dns) = if args.dns.is_empty() {
            (None, None)
        } else {
            let frontend = reloader::DnsFrontend::start(
                &generation,
                Arc::new(regions.clone()),
                args.mesh.affinity_key()?,
                lb_edge::PopInfo::new(regions, args.region, Some(&args.dc)),
                Arc::clone(&shared.pops),
                args.dns_prepared_places,
            )
            .map_err(|e| anyhow!("{}: {e}", args.config.display()))?;
            let sockets = args.dns_sockets.unwrap_or_else(|| {
                std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get)
            });
            let server =
                lb_dns::DnsServer::start(
                    Arc::clone(&frontend.serving),
                    &args.dns,
                    sockets,
                    lb_dns::RrlSettings {
                        responses_per_second: args.dns_rrl_rate,
                        slip: args.dns_rrl_slip,
                        ipv4_prefix: args.dns_rrl_ipv4_prefix.min(32),
                        ipv6_prefix: args.dns_rrl_ipv6_prefix.min(128),
                        table_size: args.dns_rrl_table.max(1),
                    },
                    lb_dns::TcpSettings {
                        max_connections: args.dns_tcp_max_connections.max(1),
                        idle_timeout: Duration::from_millis(args.dns_tcp_idle_timeout_ms.max(1)),
                    },
                )
                .await?;
            eprintln!("authoritative DNS on {:?} (UDP and TCP)", server.addrs);
            (Some(server), Some(frontend))
        };
        let mut proxies = Vec::new();
        let mut proxy_serving = None;
        if !args.proxy.is_empty() || !args.proxy_tls.is_empty() {
            let defaults = lb_proxy::ProxySettings::default();
            let serving = Arc::new(Serving::new(
                lb_proxy::Proxy::new(
                    Arc::clone(&generation),
                    Arc::new(regions.clone()),
                    args.mesh.affinity_key()?,
                    lb_edge::PopInfo::new(regions, args.region, Some(&args.dc)),
                    lb_proxy::ProxySettings {
                        workers: args.proxy_workers.unwrap_or(defaults.workers).max(1),
                        max_header_sessions: args.proxy_max_header_sessions.max(1),
                        header_read_timeout: ms(args.proxy_header_timeout_ms),
                        body_read_timeout: ms(args.proxy_body_read_timeout_ms),
                        body_timeout: ms(args.proxy_body_timeout_ms),
                        send_timeout: ms(args.proxy_send_timeout_ms),
                        h2_idle_timeout: ms(args.proxy_h2_idle_timeout_ms),
                        h2_keep_alive_interval: Duration::from_millis(args.proxy_h2_keepalive_ms),
                        max_connections_per_worker: args.proxy_max_connections_per_worker.max(1),
                        ..defaults
                    },
                )
                .map_err(|e| anyhow!("{}: {e}", args.config.display()))?,
            ));
            for &addr in &args.proxy {
                proxies.push(lb_proxy::listen(Arc::clone(&serving), addr, None)?);
            }
            if !args.proxy_tls.is_empty() {
                if args.tls_cert.len() != args.tls_key.len() || args.tls_cert.is_empty() {
                    return Err(anyhow!(
                        "--proxy-tls needs --tls-cert and --tls-key given in pairs"
                    ));
                }
                let pairs: Vec<(PathBuf, PathBuf)> = args
                    .tls_cert
                    .iter()
                    .cloned()
                    .zip(args.tls_key.iter().cloned())
                    .collect();
                let tls = lb_proxy::Certificates::load(&pairs)
                    .and_then(lb_proxy::Certificates::server_config)
                    .map_err(|e| anyhow!("TLS: {e}"))?;
                for &addr in &args.proxy_tls {
                    proxies.push(lb_proxy::listen(
                        Arc::clone(&serving),
                        addr,
                        Some(Arc::clone(&tls)),
                    )?);
                }
            }
            for p in &proxies {
                eprintln!("HTTP proxy on {}", p.addr);
            }
            proxy_serving = Some(serving);
        }
        let mut l4 = None;
        if !args.l4.is_empty() {
            let frontend = lb_l4::Layer4::new(
                Arc::clone(&generation),
                Arc::new(regions.clone()),
                args.mesh.affinity_key()?,
                lb_edge::PopInfo::new(regions, args.region, Some(&args.dc)),
                lb_l4::L4Settings {
                    addresses: args.l4.clone(),
                    workers: args.l4_workers.unwrap_or_else(|| {
                        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
                    }),
                    connect_timeout: ms(args.l4_connect_timeout_ms),
                    idle_timeout: ms(args.l4_idle_timeout_ms),
                    max_connections: args.l4_max_connections.max(1),
                    udp_idle_timeout: ms(args.l4_udp_idle_timeout_ms),
                    udp_max_flows: args.l4_udp_max_flows.max(1),
                },
            )
            .map_err(|e| anyhow!("{}: {e}", args.config.display()))?;
            let listeners = lb_l4::Listeners::start(frontend).await?;
            for (t, addr) in listeners.addresses() {
                eprintln!("layer-4 {} on {addr}", t.name());
            }
            l4 = Some(listeners);
        }
        let (requests, mut requested) = tokio::sync::mpsc::channel(4);
        let _ = shared.reload_requests.set(requests);
        let (writes, mut written) = tokio::sync::mpsc::channel(16);
        if role == aggregator::control::Role::Primary {
            let _ = plane.writes.set(writes);
        }
        let admin = tokio::spawn(aggregator::admin::serve(
            listener,
            Arc::clone(&shared),
            aggregator::admin::Tokens {
                write: token.map(Into::into),
                read: read_token.map(Into::into),
            },
            aggregator::admin::guard::Limits {
                head_timeout: Duration::from_millis(args.admin_head_timeout_ms.max(1)),
                max_connections: args.admin_max_connections,
            },
            aggregator::admin::BodyLimits {
                max_bytes: args.control.config_max_bytes.max(1),
                timeout: Duration::from_millis(args.admin_body_timeout_ms.max(1)),
            },
        ));
        let (follower, mut fetched) =
            args.control
                .spawn_follower(&identity.node_id, &settings, &node.handle, &plane);
        let (adopter, adoptions) = Adopter::channel();
        let poll = (settings.gossip_interval / 2).max(Duration::from_millis(20));
        let tally_loop = tokio::spawn(service::run(
            Arc::clone(&shared),
            node.handle.chitchat(),
            Some(Arc::clone(&node.stats)),
            poll,
            adoptions,
        ));
        let mut reloads = reloader::Reloader {
            path: args.config.clone(),
            regions: regions.clone(),
            node_id: identity.node_id.clone(),
            shared: Arc::clone(&shared),
            adopter,
            dns,
            proxy: proxy_serving,
            l4,
        };
        let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
            .context("SIGHUP handler")?;
        let mut watch = args.watch_config.then(|| {
            reload::ConfigWatch::new(
                &args.config,
                Duration::from_millis(args.watch_interval_ms.max(10)),
                &text,
            )
        });
        reload::started();
        let mut vital = super::supervise::Vital::new();
        vital.future("gossip task", {
            let ended = node.handle.termination_watcher();
            async move { super::supervise::Ending::describe(ended.await) }
        });
        vital.task("admin API", admin);
        vital.task("tally loop", tally_loop);
        vital.task("config follower", follower);
        let mut dns_server = dns_server;
        if let Some(server) = dns_server.as_mut() {
            vital.threads("DNS server", server.take_ended());
        }
        for p in &mut proxies {
            vital.threads("proxy", p.take_ended());
        }
        if let Some(mut ended) = reloads.l4.as_mut().and_then(|l| l.take_ended()) {
            vital.future("layer-4 listener", async move {
                ended
                    .recv()
                    .await
                    .unwrap_or_else(|| "stopped".to_string())
            });
        }
        let stop = stopped();
        tokio::pin!(stop);
        loop {
            tokio::select! {
                () = &mut stop => break,
                (name, why) = vital.ended() => return Err(super::supervise::exit_error(name, &why)),
                trigger = reload::next(&mut hup, watch.as_mut()) => {
                    let _ = file_reload(&mut reloads, &store, &plane, trigger.name()).await;
                    super::control_args::publish(&node.handle, &plane, announcement(&plane)).await;
                }
                Some(request) = requested.recv() => {
                    let outcome = file_reload(&mut reloads, &store, &plane, "POST /-/reload").await;
                    super::control_args::publish(&node.handle, &plane, announcement(&plane)).await;
                    let _ = request.reply.send(outcome);
                }
                Some(write) = written.recv() => {
                    let result = primary_write(&mut reloads, &store, &plane, &write.why, write.base, &write.text).await;
                    super::control_args::publish(&node.handle, &plane, announcement(&plane)).await;
                    let _ = write.reply.send(result);
                }
                Some(f) = fetched.recv() => {
                    follow(&mut reloads, &store, &plane, f).await;
                    super::control_args::publish(&node.handle, &plane, None).await;
                }
            }
        }
        drop(proxies);
        if let Some(dns) = dns_server {
            dns.shutdown().await;
        }
        drop(vital); // aborts the admin API and the tally loop
        let _ = node.handle.shutdown().await;
        Ok(ExitCode::SUCCESS)
    })
}

/// A reload of the file (SIGHUP, --watch-config, `POST /-/reload`): on the primary, a changed
/// file is the next generation; a follower's file is the mesh's and is not reloaded by hand.
async fn file_reload(
    reloads: &mut reloader::Reloader,
    store: &aggregator::control::ConfigStore,
    plane: &aggregator::control::ControlPlane,
    why: &str,
) -> aggregator::reload::Outcome {
    use aggregator::control::{Role, Versioned};
    let own =
        std::fs::read_to_string(store.path()).is_ok_and(|t| *t == *plane.document.load().text);
    if plane.role == Role::Follower && !own {
        let in_force = reloads.shared.in_force.load();
        eprintln!("config reload ({why}) refused: this node runs the mesh's config (--config-from-mesh); change it through the primary");
        return aggregator::reload::Outcome {
            reloaded: false,
            generation: in_force.generation.id(),
            config_hash: in_force.config_hash.clone(),
            unchanged: false,
            errors: vec!["this node runs the mesh's config (--config-from-mesh): change it through the config primary's API".into()],
        };
    }
    let outcome = reloads.reload(why).await;
    if outcome.reloaded {
        if let Ok(text) = std::fs::read_to_string(store.path()) {
            let next = Versioned::new(plane.generation() + 1, &text);
            let next = Versioned {
                generation: if plane.role == Role::Primary {
                    next.generation
                } else {
                    0
                },
                ..next
            };
            if plane.role == Role::Primary {
                if let Err(e) = store.record(next.generation, &next.sha256) {
                    tracing::error!(error = %e, "recording the config generation");
                }
            }
            plane.applied(next);
        }
    }
    outcome
}

/// An API write on the primary: the next generation, persisted, then served.
async fn primary_write(
    reloads: &mut reloader::Reloader,
    store: &aggregator::control::ConfigStore,
    plane: &aggregator::control::ControlPlane,
    why: &str,
    base: u64,
    text: &str,
) -> Result<aggregator::control::writes::Written, aggregator::control::writes::Refusal> {
    use aggregator::control::writes::{FieldError, Refusal, Written};
    use aggregator::control::Versioned;
    let current = plane.generation();
    if base != current {
        return Err(aggregator::api::stale(base, current));
    }
    let next = Versioned::new(current + 1, text);
    if next.sha256 == plane.document.load().sha256 {
        return Ok(Written {
            generation: current,
            changed: false,
        });
    }
    let outcome = reloads
        .reload_text(why, text, || {
            store.commit(&next, true).map_err(|e| e.to_string())
        })
        .await;
    if outcome.reloaded || outcome.unchanged {
        plane.applied(next.clone());
        eprintln!("config generation {} ({why})", next.generation);
        Ok(Written {
            generation: next.generation,
            changed: true,
        })
    } else {
        Err(Refusal {
            errors: outcome
                .errors
                .iter()
                .map(|e| FieldError {
                    path: String::new(),
                    reason: e.clone(),
                })
                .collect(),
            ..Refusal::new(
                http::StatusCode::UNPROCESSABLE_ENTITY,
                aggregator::api::envelope::code::INVALID,
                "the primary could not build the generation: nothing was changed",
            )
        })
    }
}

/// A generation fetched from the primary: validated, persisted, served — or refused here.
async fn follow(
    reloads: &mut reloader::Reloader,
    store: &aggregator::control::ConfigStore,
    plane: &aggregator::control::ControlPlane,
    fetched: aggregator::control::follower::Fetched,
) {
    let doc = fetched.document;
    if doc.generation > plane.generation() {
        let why = format!("generation {} from {}", doc.generation, fetched.primary);
        let outcome = reloads
            .reload_text(&why, &doc.text, || {
                store.commit(&doc, false).map_err(|e| e.to_string())
            })
            .await;
        if outcome.reloaded || outcome.unchanged {
            plane.applied(doc);
        } else {
            plane.refuse(aggregator::control::Refused {
                generation: doc.generation,
                sha256: doc.sha256.clone(),
                errors: outcome.errors,
            });
        }
    }
    let _ = fetched.done.send(());
}
