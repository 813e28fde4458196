//! Starting an aggregator node: the config, the mesh, the shared state, the listeners, then
//! the tasks, in that order; anything that fails stops the start with the reason.

use std::sync::Arc;

use lb_core::config::Config;
use lb_edge::Generation;
use mesh::node::config_hash;
use mesh::{MeshNode, NodeIdentity};
use meshlb_node::control::etcd::StoreLink;
use meshlb_node::control::follower::Fetched;
use meshlb_node::control::ConfigProtocol;
use meshlb_node::handle::NodeHandle;
use meshlb_node::reload::Triggers;
use meshlb_node::supervise::{Ending, Vital};

use super::config_task::ConfigTask;
use super::frontends::{Frontends, Started};
use super::{RunningNode, Settings, StartError};
use crate::adopt::Adopter;
use crate::shared::{InForce, Outputs, Setup, Shared};
use crate::tally::TallySettings;

/// Starts an aggregator node with `settings`, on the current tokio runtime: the config, the
/// mesh, the shared state, the admin listeners, the frontends, then the vital tasks.
pub async fn start(settings: Settings) -> Result<RunningNode, StartError> {
    let loaded = Loaded::open(&settings)?;
    let identity = loaded.identity(&settings);
    let node = join_mesh(&settings, &identity).await?;
    let metrics = install_metrics(&settings);
    let config = Arc::new(loaded.config);
    let generation = Arc::new(Generation::unknown(1, Arc::clone(&config)));
    let notifier = crate::notify::Notifier::start(Arc::clone(&config), identity.node_id.clone())
        .map_err(|e| StartError::frontend("notifications")(format!("{}: {e}", loaded.file)))?;
    let in_force = InForce::new(
        Arc::clone(&generation),
        loaded.hash,
        loaded.loaded_at,
        crate::drains::from_config(&config, None, loaded.loaded_at),
        notifier,
    );
    let (reloads, stop, ends) = NodeHandle::channels();
    let admin = AdminListeners::bind(&settings).await?;
    let store_link = store_link(&settings)?;
    let protocol = loaded
        .protocol
        .announcing(settings.announce_url(admin.addr))
        .with_credentials(Arc::clone(&settings.admin.credentials));
    let protocol = match &store_link {
        Some(link) => protocol.with_store(Arc::clone(link)),
        None => protocol,
    };
    let shared = Shared::new(
        in_force,
        setup(&settings, &identity),
        Outputs { metrics },
        Arc::clone(&protocol.plane),
        reloads.clone(),
        crate::previews::Previews::new(Some(node.handle.chitchat()), settings.admin.previews),
    );
    protocol.publish(&node.handle).await;
    restore_drains(&settings, &config, &shared)?;
    warn_if_exposed(&settings);
    announce(&settings, &identity, admin.addr);
    let (adopter, adoptions) = Adopter::channel();
    let Started {
        mut frontends,
        dns_server,
        proxies,
    } = Frontends::start(
        &settings,
        &generation,
        &shared,
        adopter,
        node.handle.chitchat(),
    )
    .await?;
    let mut vital = Vital::new();
    if let Some(tunnels) = frontends.tunnels.as_mut() {
        for (name, task) in tunnels.take_tasks() {
            vital.task(name, task);
        }
    }
    vital.future("gossip task", {
        let ended = node.handle.termination_watcher();
        async move { Ending::describe(ended.await) }
    });
    let admin_addr = admin.serve(&mut vital, &shared, &settings);
    run_tally_loop(&mut vital, &settings, &shared, &node, adoptions);
    let fetched = run_config_sources(
        &mut vital, &settings, &identity, &node, &protocol, store_link,
    );
    let dns = dns_server
        .as_ref()
        .map(|d| d.addrs.clone())
        .unwrap_or_default();
    let proxy = proxies.iter().map(|p| p.addr).collect();
    let task = ConfigTask {
        protocol,
        frontends,
        dns_server,
        proxies,
        mesh: node,
        vital,
        requested: ends.requested,
        writes: loaded.writes,
        fetched,
        triggers: Triggers::new(settings.node.reloads, &settings.node.config, &loaded.text),
    };
    let task = tokio::spawn(task.run(ends.stop));
    Ok(RunningNode {
        admin: admin_addr,
        gossip: settings.node.mesh.listen,
        dns,
        proxy,
        shared,
        handle: NodeHandle::new(reloads, stop, task),
    })
}

/// The config the node starts with, parsed, and the protocol that opened it.
struct Loaded {
    file: String,
    protocol: ConfigProtocol,
    writes: Option<tokio::sync::mpsc::Receiver<meshlb_node::control::writes::WriteRequest>>,
    text: String,
    config: Config,
    hash: String,
    loaded_at: u64,
}

impl Loaded {
    fn open(settings: &Settings) -> Result<Loaded, StartError> {
        let file = settings.node.config.display().to_string();
        let (protocol, writes) =
            ConfigProtocol::open(&settings.node.config, &settings.node.control)?;
        let text = protocol.text();
        let config =
            Config::parse(&file, &text, &settings.node.regions).map_err(StartError::Config)?;
        settings.warn_of_unserved(&config)?;
        Ok(Loaded {
            hash: config_hash(&text),
            loaded_at: lb_core::clock::unix_secs(),
            file,
            protocol,
            writes,
            text,
            config,
        })
    }

    /// What the node says of itself in gossip.
    fn identity(&self, settings: &Settings) -> NodeIdentity {
        NodeIdentity {
            node_id: settings.node.node_id.clone(),
            role: mesh::Role::Aggregator,
            region: settings.node.region.code().to_string(),
            datacenter: settings.node.dc.clone(),
            config_hash: self.hash.clone(),
            config_loaded_at: self.loaded_at,
        }
    }
}

/// Joins the mesh, advertising the proxy's addresses when it has some.
async fn join_mesh(settings: &Settings, identity: &NodeIdentity) -> Result<MeshNode, StartError> {
    let node = mesh::start(identity, &settings.node.mesh).await?;
    if !settings.advertise_proxy.is_empty() {
        let addrs = mesh::keys::encode_addrs(&settings.advertise_proxy);
        node.handle
            .with_chitchat(|c| c.self_node_state().set(mesh::keys::PROXY_ADDRS, &addrs))
            .await;
    }
    Ok(node)
}

/// The process's Prometheus recorder, when the settings ask for it and none is installed yet.
fn install_metrics(settings: &Settings) -> Option<metrics_exporter_prometheus::PrometheusHandle> {
    let metrics = settings
        .install_metrics
        .then(|| {
            meshlb_node::metrics::install(&[
                ("node_role", "aggregator"),
                ("node_region", settings.node.region.code()),
            ])
        })
        .flatten();
    if metrics.is_some() {
        describe_metrics();
    }
    crate::metrics::record_regions(&settings.node.regions);
    metrics
}

/// The link to the config store (etcd), when the node keeps its config there.
fn store_link(settings: &Settings) -> Result<Option<Arc<StoreLink>>, StartError> {
    let Some(store) = &settings.node.control.store else {
        return Ok(None);
    };
    StoreLink::new(store, settings.node.control.max_document_bytes)
        .map(|link| Some(Arc::new(link)))
        .map_err(|e| StartError::Settings(format!("--config-store: {e}")))
}

/// What the tally loop is set up with.
fn setup(settings: &Settings, identity: &NodeIdentity) -> Setup {
    Setup {
        node_id: identity.node_id.clone(),
        regions: Arc::new(settings.node.regions.clone()),
        settings: TallySettings {
            region: settings.node.region,
            warmup_timeout: settings.warmup_timeout,
            ..TallySettings::default()
        },
        started: std::time::Instant::now(),
        parser: lb_core::config::IncrementalParser::new(),
    }
}

/// The drain decisions kept in `--state-dir`, back in force.
fn restore_drains(settings: &Settings, config: &Config, shared: &Shared) -> Result<(), StartError> {
    let Some(dir) = &settings.state_dir else {
        return Ok(());
    };
    let state = crate::drain_state::DrainState::in_dir(dir)?;
    let loaded = state.load(config)?;
    for note in &loaded.ignored {
        tracing::warn!("{note}");
    }
    if let Ok(mut tables) = shared.drains.tables.lock() {
        tables.decisions = loaded.decisions;
    }
    let _ = shared.drains.state_file.set(state);
    Ok(())
}

/// Warns, in the log and on stderr, when other hosts can read the admin API without a token.
fn warn_if_exposed(settings: &Settings) {
    let credentials = &settings.admin.credentials;
    let token = credentials.tokens().write.clone();
    let certifies = credentials.tls().is_some_and(|t| t.verifies_clients());
    if !certifies
        && meshlb_node::guard::exposed_without_token(settings.admin.addr, token.as_deref())
    {
        tracing::warn!(admin = %settings.admin.addr, "the admin API listens beyond loopback without a token: anyone who reaches it reads every state and vote (changes are refused without a token); set --admin-token-file");
        eprintln!("WARNING: the admin API on {} is reachable from other hosts without a token: its reads are open to them (changes are refused); set --admin-token-file", settings.admin.addr);
    }
}

/// The line an operator (and the tests) read to know the node is up and where.
fn announce(settings: &Settings, identity: &NodeIdentity, admin: std::net::SocketAddr) {
    let scheme = if settings.admin.credentials.tls().is_some() {
        "https"
    } else {
        "http"
    };
    eprintln!(
        "meshlb aggregator {} gossiping on {}, admin API on {scheme}://{}",
        identity.node_id, settings.node.mesh.listen, admin
    );
}

/// The admin API's listeners, bound: the main one (TLS when configured) and the plain one.
struct AdminListeners {
    main: tokio::net::TcpListener,
    addr: std::net::SocketAddr,
    plain: Option<tokio::net::TcpListener>,
}

impl AdminListeners {
    async fn bind(settings: &Settings) -> Result<AdminListeners, StartError> {
        let main = crate::admin::bind(settings.admin.addr).await?;
        let addr = main
            .local_addr()
            .map_err(|e| StartError::Settings(format!("the admin listener's address: {e}")))?;
        let plain = match settings.admin.plain {
            Some(addr) => Some(crate::admin::bind(addr).await?),
            None => None,
        };
        Ok(AdminListeners { main, addr, plain })
    }

    /// Serves both as vital tasks; returns the main one's address.
    fn serve(
        self,
        vital: &mut Vital,
        shared: &Arc<Shared>,
        settings: &Settings,
    ) -> std::net::SocketAddr {
        let credentials = &settings.admin.credentials;
        vital.task(
            "admin API",
            tokio::spawn(crate::admin::serve(
                self.main,
                Arc::clone(shared),
                Arc::clone(credentials),
                credentials.tls().cloned(),
                settings.admin.limits,
                settings.admin.body,
            )),
        );
        if let Some(plain) = self.plain {
            vital.task(
                "plain admin API",
                tokio::spawn(crate::admin::serve(
                    plain,
                    Arc::clone(shared),
                    Arc::clone(credentials),
                    None,
                    settings.admin.limits,
                    settings.admin.body,
                )),
            );
        }
        self.addr
    }
}

/// The tally loop, polling gossip at half the gossip interval (at least every 20 ms).
fn run_tally_loop(
    vital: &mut Vital,
    settings: &Settings,
    shared: &Arc<Shared>,
    node: &MeshNode,
    adoptions: tokio::sync::mpsc::Receiver<crate::adopt::Adopt>,
) {
    let poll = (settings.node.mesh.gossip_interval / 2).max(std::time::Duration::from_millis(20));
    vital.task(
        "tally loop",
        tokio::spawn(crate::service::run(
            Arc::clone(shared),
            node.handle.chitchat(),
            Some(Arc::clone(&node.stats)),
            poll,
            adoptions,
        )),
    );
}

/// Where new generations come from: the mesh's primary (the follower) or the config store's
/// watch; returns what they arrive on.
fn run_config_sources(
    vital: &mut Vital,
    settings: &Settings,
    identity: &NodeIdentity,
    node: &MeshNode,
    protocol: &ConfigProtocol,
    store_link: Option<Arc<StoreLink>>,
) -> tokio::sync::mpsc::Receiver<Fetched> {
    let (follower, fetched) = meshlb_node::control::follower::spawn(
        &identity.node_id,
        &settings.node.mesh,
        &settings.node.control,
        &node.handle,
        &protocol.plane,
    );
    vital.task("config follower", follower);
    match store_link {
        Some(link) => {
            let (task, from_store) =
                meshlb_node::control::etcd::sync::spawn(link, Arc::clone(&protocol.plane));
            vital.task("config store watch", task);
            from_store
        }
        None => fetched,
    }
}

/// HELP text of everything an aggregator records: its own metrics and its frontends'.
fn describe_metrics() {
    meshlb_node::metrics::describe_metrics();
    crate::metrics::describe_metrics();
    lb_dns::describe_metrics();
    lb_proxy::describe_metrics();
    lb_l4::describe_metrics();
    lb_records::describe_metrics();
    tunnel::describe_metrics();
}
