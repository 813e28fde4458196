//! Starting an aggregator node: the config, the mesh, the shared state, the listeners, then
//! the tasks, in that order; anything that fails stops the start with the reason.

use std::sync::Arc;

use lb_core::config::Config;
use lb_edge::Generation;
use mesh::node::config_hash;
use mesh::NodeIdentity;
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

/// Starts an aggregator node with `settings`, on the current tokio runtime.
pub async fn start(settings: Settings) -> Result<RunningNode, StartError> {
    let file = settings.node.config.display().to_string();
    let (protocol, writes) = ConfigProtocol::open(&settings.node.config, &settings.node.control)?;
    let text = protocol.text();
    let config = Config::parse(&file, &text, &settings.node.regions).map_err(StartError::Config)?;
    settings.warn_of_unserved(&config)?;
    let hash = config_hash(&text);
    let loaded_at = lb_core::clock::unix_secs();
    let identity = NodeIdentity {
        node_id: settings.node.node_id.clone(),
        role: mesh::Role::Aggregator,
        region: settings.node.region.code().to_string(),
        datacenter: settings.node.dc.clone(),
        config_hash: hash.clone(),
        config_loaded_at: loaded_at,
    };
    let node = mesh::start(&identity, &settings.node.mesh).await?;
    if !settings.advertise_proxy.is_empty() {
        let addrs = mesh::keys::encode_addrs(&settings.advertise_proxy);
        node.handle
            .with_chitchat(|c| c.self_node_state().set(mesh::keys::PROXY_ADDRS, &addrs))
            .await;
    }
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
    let config = Arc::new(config);
    let generation = Arc::new(Generation::unknown(1, Arc::clone(&config)));
    let notifier = crate::notify::Notifier::start(Arc::clone(&config), identity.node_id.clone())
        .map_err(|e| StartError::frontend("notifications")(format!("{file}: {e}")))?;
    let in_force = InForce::new(
        Arc::clone(&generation),
        hash,
        loaded_at,
        crate::drains::from_config(&config, None, loaded_at),
        notifier,
    );
    let (reloads, stop, ends) = NodeHandle::channels();
    let listener = crate::admin::bind(settings.admin.addr).await?;
    let admin_addr = listener
        .local_addr()
        .map_err(|e| StartError::Settings(format!("the admin listener's address: {e}")))?;
    let protocol = protocol
        .announcing(settings.announce_url(admin_addr))
        .with_credentials(Arc::clone(&settings.admin.credentials));
    let store_link = match &settings.node.control.store {
        Some(store) => Some(Arc::new(
            meshlb_node::control::etcd::StoreLink::new(
                store,
                settings.node.control.max_document_bytes,
            )
            .map_err(|e| StartError::Settings(format!("--config-store: {e}")))?,
        )),
        None => None,
    };
    let protocol = match &store_link {
        Some(link) => protocol.with_store(Arc::clone(link)),
        None => protocol,
    };
    let plain = match settings.admin.plain {
        Some(addr) => Some(crate::admin::bind(addr).await?),
        None => None,
    };
    let tally = TallySettings {
        region: settings.node.region,
        warmup_timeout: settings.warmup_timeout,
        ..TallySettings::default()
    };
    let setup = Setup {
        node_id: identity.node_id.clone(),
        regions: Arc::new(settings.node.regions.clone()),
        settings: tally,
        started: std::time::Instant::now(),
        parser: lb_core::config::IncrementalParser::new(),
    };
    let shared = Shared::new(
        in_force,
        setup,
        Outputs { metrics },
        Arc::clone(&protocol.plane),
        reloads.clone(),
        crate::previews::Previews::new(Some(node.handle.chitchat()), settings.admin.previews),
    );
    protocol.publish(&node.handle).await;
    if let Some(dir) = &settings.state_dir {
        let state = crate::drain_state::DrainState::in_dir(dir)?;
        let loaded = state.load(&config)?;
        for note in &loaded.ignored {
            tracing::warn!("{note}");
        }
        if let Ok(mut tables) = shared.drains.tables.lock() {
            tables.decisions = loaded.decisions;
        }
        let _ = shared.drains.state_file.set(state);
    }
    let credentials = &settings.admin.credentials;
    let token = credentials.tokens().write.clone();
    let certifies = credentials.tls().is_some_and(|t| t.verifies_clients());
    if !certifies
        && meshlb_node::guard::exposed_without_token(settings.admin.addr, token.as_deref())
    {
        tracing::warn!(admin = %settings.admin.addr, "the admin API listens beyond loopback without a token: anyone who reaches it reads every state and vote (changes are refused without a token); set --admin-token-file");
        eprintln!("WARNING: the admin API on {} is reachable from other hosts without a token: its reads are open to them (changes are refused); set --admin-token-file", settings.admin.addr);
    }
    let scheme = if credentials.tls().is_some() {
        "https"
    } else {
        "http"
    };
    eprintln!(
        "meshlb aggregator {} gossiping on {}, admin API on {scheme}://{}",
        identity.node_id, settings.node.mesh.listen, admin_addr
    );
    let (adopter, adoptions) = Adopter::channel();
    let started = Frontends::start(&settings, &generation, &shared, adopter).await?;
    let Started {
        frontends,
        dns_server,
        proxies,
    } = started;
    let mut vital = Vital::new();
    vital.future("gossip task", {
        let ended = node.handle.termination_watcher();
        async move { Ending::describe(ended.await) }
    });
    vital.task(
        "admin API",
        tokio::spawn(crate::admin::serve(
            listener,
            Arc::clone(&shared),
            Arc::clone(credentials),
            credentials.tls().cloned(),
            settings.admin.limits,
            settings.admin.body,
        )),
    );
    if let Some(plain) = plain {
        vital.task(
            "plain admin API",
            tokio::spawn(crate::admin::serve(
                plain,
                Arc::clone(&shared),
                Arc::clone(credentials),
                None,
                settings.admin.limits,
                settings.admin.body,
            )),
        );
    }
    let poll = (settings.node.mesh.gossip_interval / 2).max(std::time::Duration::from_millis(20));
    vital.task(
        "tally loop",
        tokio::spawn(crate::service::run(
            Arc::clone(&shared),
            node.handle.chitchat(),
            Some(Arc::clone(&node.stats)),
            poll,
            adoptions,
        )),
    );
    let (follower, fetched) = meshlb_node::control::follower::spawn(
        &identity.node_id,
        &settings.node.mesh,
        &settings.node.control,
        &node.handle,
        &protocol.plane,
    );
    vital.task("config follower", follower);
    let fetched = match store_link {
        Some(link) => {
            let (task, from_store) =
                meshlb_node::control::etcd::sync::spawn(link, Arc::clone(&protocol.plane));
            vital.task("config store watch", task);
            from_store
        }
        None => fetched,
    };
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
        writes,
        fetched,
        triggers: Triggers::new(settings.node.reloads, &settings.node.config, &text),
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

/// HELP text of everything an aggregator records: its own metrics and its frontends'.
fn describe_metrics() {
    meshlb_node::metrics::describe_metrics();
    crate::metrics::describe_metrics();
    crate::previews::describe_metrics();
    lb_dns::describe_metrics();
    lb_proxy::describe_metrics();
    lb_l4::describe_metrics();
    lb_records::describe_metrics();
}
