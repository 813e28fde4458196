//! A prober node as a library: [`start`] checks its place on the regions table's roster,
//! joins the mesh, starts probing this region's targets and publishing the results, and
//! returns a [`RunningNode`] with a handle to reload and stop it. `meshlb prober` maps its
//! flags onto the [`Settings`] and waits on the node.

mod config_task;
mod probing;
mod settings;

use std::net::SocketAddr;
use std::sync::Arc;

use lb_core::config::Config;
use mesh::node::config_hash;
use mesh::NodeIdentity;
use meshlb_node::control::ConfigProtocol;
use meshlb_node::handle::NodeHandle;
use meshlb_node::supervise::{Ending, Vital};

pub use settings::{MetricsListener, Settings};

use crate::{GossipPublisher, Scheduler, SchedulerSettings};
use config_task::ConfigTask;
use probing::Probing;

/// A started prober and its handle.
pub struct RunningNode {
    /// The gossip address.
    pub gossip: SocketAddr,
    /// The control plane: the generation this prober runs, or the one it refused.
    pub control: Arc<meshlb_node::control::ControlPlane>,
    /// Reload, stop, or wait for the node's end.
    pub handle: NodeHandle,
}

/// Why a prober node did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Aggregators count votes only from the datacenters the regions table lists per region.
    #[error("--dc {dc}: not a datacenter of {region} in the regions table ({listed}); aggregators would not count this prober's votes")]
    OffRoster {
        dc: String,
        region: &'static str,
        listed: String,
    },
    #[error(transparent)]
    Open(#[from] meshlb_node::control::protocol::OpenError),
    /// The config did not validate: every error, each naming file, field path and reason.
    #[error("{0}")]
    Config(lb_core::ConfigErrors),
    #[error(transparent)]
    Mesh(#[from] mesh::StartError),
}

/// Starts a prober node with `settings`, on the current tokio runtime.
pub async fn start(settings: Settings) -> Result<RunningNode, StartError> {
    check_roster(&settings)?;
    let regions = &settings.node.regions;
    let control = &settings.node.control;
    let (protocol, _) = ConfigProtocol::open(&settings.node.config, control)?;
    // A follower with a listener relays the generations it holds.
    let protocol = match &settings.metrics {
        Some(listener) => protocol
            .with_credentials(Arc::clone(&listener.credentials))
            .announcing(listener.url(&settings.node.mesh)),
        None => protocol,
    };
    let text = protocol.text();
    let file = settings.node.config.display().to_string();
    let config = Config::parse(&file, &text, regions).map_err(StartError::Config)?;
    let hash = config_hash(&text);
    let identity = NodeIdentity {
        node_id: settings.node.node_id.clone(),
        role: mesh::Role::Prober,
        region: settings.node.region.code().to_string(),
        datacenter: settings.node.dc.clone(),
        config_hash: hash.clone(),
        config_loaded_at: lb_core::clock::unix_secs(),
    };
    let node = mesh::start(&identity, &settings.node.mesh).await?;
    let (reloads, stop, ends) = NodeHandle::channels();
    let mut vital = Vital::new();
    vital.future("gossip task", {
        let ended = node.handle.termination_watcher();
        async move { Ending::describe(ended.await) }
    });
    if let Some(listener) = &settings.metrics {
        serve_metrics(
            &settings,
            listener,
            (&reloads, &protocol.plane),
            &node,
            &mut vital,
        );
    }
    protocol.publish(&node.handle).await;
    let (follower, fetched) = meshlb_node::control::follower::spawn(
        &identity.node_id,
        &settings.node.mesh,
        control,
        &node.handle,
        &protocol.plane,
    );
    vital.task("config follower", follower);
    let probing = start_probing(&settings, &identity, &config, hash, &node, &mut vital);
    let control = Arc::clone(&protocol.plane);
    let task = ConfigTask {
        protocol,
        probing,
        mesh: node,
        vital,
        requested: ends.requested,
        fetched,
        triggers: meshlb_node::reload::Triggers::new(
            settings.node.reloads,
            &settings.node.config,
            &text,
        ),
    };
    let task = tokio::spawn(task.run(ends.stop));
    Ok(RunningNode {
        gossip: settings.node.mesh.listen,
        control,
        handle: NodeHandle::new(reloads, stop, task),
    })
}

/// A prober's datacenter must be on its region's roster (regions.toml): the tally counts
/// votes per datacenter.
fn check_roster(settings: &Settings) -> Result<(), StartError> {
    let regions = &settings.node.regions;
    if regions.on_roster(settings.node.region, &settings.node.dc) {
        return Ok(());
    }
    let listed: Vec<&str> = regions
        .region(settings.node.region)
        .datacenters
        .iter()
        .map(|d| d.code.as_str())
        .collect();
    Err(StartError::OffRoster {
        dc: settings.node.dc.clone(),
        region: settings.node.region.code(),
        listed: listed.join(", "),
    })
}

/// The probing: this region's targets scheduled, their results gossiped by the publisher, and
/// the preview runner, the last two as vital tasks.
fn start_probing(
    settings: &Settings,
    identity: &NodeIdentity,
    config: &Config,
    hash: String,
    node: &mesh::MeshNode,
    vital: &mut Vital,
) -> Probing {
    let targets = crate::targets(config, Some(settings.node.region));
    let (publisher, publishing) =
        GossipPublisher::start(&node.handle, crate::publisher::PROGRESS_ROUND);
    vital.task("gossip publisher", publishing);
    vital.task(
        "preview runner",
        tokio::spawn(crate::preview::run(
            node.handle.chitchat(),
            settings.node.regions.clone(),
            settings.node.region,
            settings.previews,
        )),
    );
    eprintln!(
        "meshlb prober {} ({}/{}) gossiping on {}: {} targets",
        identity.node_id,
        identity.region,
        identity.datacenter,
        settings.node.mesh.listen,
        targets.len()
    );
    let holders = Arc::new(tunnel::HolderList::default());
    vital.task(
        "tunnel holders",
        tokio::spawn(meshlb_node::tunnel_holders::follow(
            node.handle.chitchat(),
            Arc::clone(&holders),
            meshlb_node::tunnel_holders::FOLLOW_EVERY,
        )),
    );
    let through = tunnel::TunnelDialer::new(
        None,
        settings.relay_key.clone(),
        holders,
        tunnel::HubLimits::default().open_timeout,
    );
    let scheduler = Scheduler::start(
        targets,
        SchedulerSettings {
            concurrency: settings.concurrency,
            dialer: crate::monitors::Dialer::through(lb_edge::PrivateDialer(Arc::new(through))),
            ..SchedulerSettings::default()
        },
        Arc::clone(&publisher) as _,
    );
    Probing {
        path: settings.node.config.clone(),
        regions: settings.node.regions.clone(),
        region: settings.node.region,
        scheduler,
        publisher,
        gossip: node.handle.chitchat(),
        hash,
        loads: 1,
        parser: lb_core::config::IncrementalParser::new(),
    }
}

/// The `/metrics` listener (with `POST /-/reload`), and gossip's counters copied into the
/// recorder every second.
fn serve_metrics(
    settings: &Settings,
    listener: &MetricsListener,
    (reloads, plane): (
        &tokio::sync::mpsc::Sender<meshlb_node::reload::Request>,
        &Arc<meshlb_node::control::ControlPlane>,
    ),
    node: &mesh::MeshNode,
    vital: &mut Vital,
) {
    let Some(handle) = meshlb_node::metrics::install(&[
        ("node_role", "prober"),
        ("node_region", settings.node.region.code()),
        ("node_dc", &settings.node.dc),
    ]) else {
        tracing::warn!("a metrics recorder is installed already: /metrics serves none");
        return;
    };
    meshlb_node::metrics::describe_metrics();
    crate::metrics::describe_metrics();
    let endpoint = meshlb_node::metrics::ReloadEndpoint {
        requests: reloads.clone(),
        plane: Some(Arc::clone(plane)),
    };
    vital.task(
        "metrics listener",
        tokio::spawn(meshlb_node::metrics::serve(
            listener.addr,
            handle,
            Some(endpoint),
            Arc::clone(&listener.credentials),
            listener.limits,
        )),
    );
    let stats = Arc::clone(&node.stats);
    vital.task(
        "gossip counters",
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
            loop {
                tick.tick().await;
                meshlb_node::metrics::record_gossip(&stats);
            }
        }) as tokio::task::JoinHandle<()>,
    );
}
