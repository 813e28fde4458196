//! `meshlb prober`: probe the pools this region checks and publish the results in gossip.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context};
use lb_core::config::Config;
use lb_core::{Region, RegionsTable};
use mesh::{node::config_hash, NodeIdentity};
use prober::GossipPublisher;
use prober::{Scheduler, SchedulerSettings};

use super::mesh_args::{stopped, MeshArgs};
use super::reload;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The configuration file (re-read on SIGHUP, and with --watch-config when it changes).
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// Also reload when the file's content changes (a Kubernetes ConfigMap update included).
    #[arg(long)]
    watch_config: bool,
    /// How often --watch-config reads the file.
    #[arg(long, value_name = "MS", default_value_t = 2000)]
    watch_interval_ms: u64,
    /// This prober's region.
    #[arg(long)]
    region: Region,
    /// This prober's datacenter (a code of regions.toml, or any name unique in the region).
    #[arg(long)]
    dc: String,
    /// Probes in flight at once.
    #[arg(long, default_value_t = 512)]
    concurrency: usize,
    /// Serve Prometheus metrics on this address (GET /metrics), and `POST /-/reload` (needs
    /// the admin token).
    #[arg(long, value_name = "ADDR")]
    metrics: Option<std::net::SocketAddr>,
    /// File holding the bearer token of `POST /-/reload` (else MESHLB_ADMIN_TOKEN; none: the
    /// endpoint refuses every reload).
    #[arg(long, value_name = "FILE")]
    admin_token_file: Option<PathBuf>,
    /// How long a request head may take to arrive at the --metrics listener.
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    admin_head_timeout_ms: u64,
    /// Connections the --metrics listener keeps open at once; more are closed at accept.
    #[arg(long, value_name = "N", default_value_t = 256)]
    admin_max_connections: usize,
    #[command(flatten)]
    control: super::control_args::ControlArgs,
    #[command(flatten)]
    mesh: MeshArgs,
}

/// The config of `text`, and its hash.
fn parse(path: &Path, text: &str, regions: &RegionsTable) -> anyhow::Result<(Config, String)> {
    let config =
        Config::parse(&path.display().to_string(), text, regions).map_err(|e| anyhow!("{e}"))?;
    Ok((config, config_hash(text)))
}

/// The config a prober runs: its hash, and how many loads it took to get there (1: the start).
struct Running {
    hash: String,
    generation: u64,
}

impl Running {
    fn outcome(&self, reloaded: bool, errors: Vec<String>) -> aggregator::reload::Outcome {
        aggregator::reload::Outcome {
            reloaded,
            generation: self.generation,
            config_hash: self.hash.clone(),
            unchanged: false,
            errors,
        }
    }
}

fn keep(targets: &[prober::ProbeTarget]) -> BTreeSet<(String, String)> {
    targets
        .iter()
        .map(|t| (t.key.gossip_key(), t.key.endpoint.clone()))
        .collect()
}

pub fn run(args: &Args, regions: &RegionsTable) -> anyhow::Result<ExitCode> {
    // Aggregators count votes only from the datacenters the regions table lists per region.
    if !regions.on_roster(args.region, &args.dc) {
        let listed: Vec<&str> = regions
            .region(args.region)
            .datacenters
            .iter()
            .map(|d| d.code.as_str())
            .collect();
        return Err(anyhow!(
            "--dc {}: not a datacenter of {} in the regions table ({}); aggregators would not count this prober's votes",
            args.dc,
            args.region.code(),
            listed.join(", ")
        ));
    }
    let role = if args.control.config_from_mesh {
        aggregator::control::Role::Follower
    } else {
        aggregator::control::Role::Standalone
    };
    let (store, document) = super::control_args::open(&args.config, role)?;
    let text = document.text.to_string();
    let (config, hash) = parse(&args.config, &text, regions)?;
    let plane = args.control.plane(
        role,
        document,
        super::control_args::control_key(&args.mesh)?,
    );
    let settings = args.mesh.settings()?;
    let token: Option<Arc<str>> = match &args.admin_token_file {
        Some(f) => Some(
            std::fs::read_to_string(f)
                .with_context(|| format!("cannot read {}", f.display()))?
                .trim()
                .into(),
        ),
        None => std::env::var("MESHLB_ADMIN_TOKEN").ok().map(Into::into),
    };
    let (requests, mut requested) = tokio::sync::mpsc::channel(4);
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    runtime.block_on(async {
        let identity = NodeIdentity {
            node_id: args.mesh.node_id("prober", args.region.code(), &args.dc),
            role: mesh::Role::Prober,
            region: args.region.code().to_string(),
            datacenter: args.dc.clone(),
            config_hash: hash.clone(),
            config_loaded_at: lb_core::clock::unix_secs(),
        };
        let node = mesh::start(&identity, &settings).await?;
        let mut vital = super::supervise::Vital::new();
        vital.future("gossip task", {
            let ended = node.handle.termination_watcher();
            async move { super::supervise::Ending::describe(ended.await) }
        });
        if let Some(addr) = args.metrics {
            let handle = super::metrics_http::install(&[
                ("node_role", "prober"),
                ("node_region", args.region.code()),
                ("node_dc", &args.dc),
            ])
            .ok_or_else(|| anyhow!("a metrics recorder is already installed"))?;
            let endpoint = super::metrics_http::ReloadEndpoint {
                token: token.clone(),
                requests: requests.clone(),
            };
            let limits = aggregator::admin::guard::Limits {
                head_timeout: Duration::from_millis(args.admin_head_timeout_ms.max(1)),
                max_connections: args.admin_max_connections,
            };
            vital.task(
                "metrics listener",
                tokio::spawn(super::metrics_http::serve(
                    addr,
                    handle,
                    Some(endpoint),
                    limits,
                )),
            );
            let stats = Arc::clone(&node.stats);
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
                loop {
                    tick.tick().await;
                    aggregator::metrics::record_gossip(&stats);
                }
            });
        }
        super::control_args::publish(&node.handle, &plane, None).await;
        let (follower, mut fetched) =
            args.control
                .spawn_follower(&identity.node_id, &settings, &node.handle, &plane);
        vital.task("config follower", follower);
        let targets = prober::targets(&config, Some(args.region));
        let round = config
            .monitors
            .iter()
            .map(|m| m.interval)
            .min()
            .unwrap_or(std::time::Duration::from_secs(60));
        let (publisher, publishing) = GossipPublisher::start(&node.handle, round);
        vital.task("gossip publisher", publishing);
        eprintln!(
            "meshlb prober {} ({}/{}) gossiping on {}: {} targets",
            identity.node_id,
            identity.region,
            identity.datacenter,
            settings.listen,
            targets.len()
        );
        let mut scheduler = Scheduler::start(
            targets,
            SchedulerSettings {
                concurrency: args.concurrency,
                ..SchedulerSettings::default()
            },
            Arc::clone(&publisher) as _,
        );
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
        let mut running = Running {
            hash,
            generation: 1,
        };
        let stop = stopped();
        tokio::pin!(stop);
        loop {
            let (why, reply, from_mesh) = tokio::select! {
                () = &mut stop => break,
                (name, why) = vital.ended() => return Err(super::supervise::exit_error(name, &why)),
                why = scheduler.ended() => return Err(super::supervise::exit_error("scheduler", &why)),
                t = reload::next(&mut hup, watch.as_mut()) => (t.name().to_string(), None, None),
                Some(r) = requested.recv() => ("POST /-/reload".to_string(), Some(r.reply), None),
                Some(f) = fetched.recv() => (format!("generation {} from {}", f.document.generation, f.primary), None, Some(f)),
            };
            let text = match (&from_mesh, role) {
                (Some(f), _) => Ok(f.document.text.to_string()),
                (None, aggregator::control::Role::Follower) => {
                    match std::fs::read_to_string(&args.config) {
                        Ok(t) if *t == *plane.document.load().text => Ok(t),
                        _ => Err(anyhow!(
                            "this node runs the mesh's config (--config-from-mesh): change it through the config primary's API"
                        )),
                    }
                }
                (None, _) => std::fs::read_to_string(&args.config)
                    .with_context(|| format!("cannot read {}", args.config.display())),
            };
            let parsed = text.and_then(|t| {
                let (config, hash) = parse(&args.config, &t, regions)?;
                if let Some(f) = &from_mesh {
                    store.commit(&f.document, false)?;
                }
                Ok((config, hash))
            });
            let outcome = match parsed {
                Ok((config, hash)) => {
                    let targets = prober::targets(&config, Some(args.region));
                    eprintln!("config reloaded ({why}): {} targets", targets.len());
                    publisher.retain(keep(&targets));
                    scheduler.replace_targets(targets);
                    let loaded_at = lb_core::clock::unix_secs().to_string();
                    node.handle
                        .with_chitchat(|c| {
                            let me = c.self_node_state();
                            me.set(mesh::keys::CONFIG_HASH, &hash);
                            me.set(mesh::keys::CONFIG_LOADED_AT, &loaded_at);
                        })
                        .await;
                    running.generation += 1;
                    running.hash = hash;
                    reload::record(true);
                    reload::count(true);
                    if let Some(f) = &from_mesh {
                        plane.applied(f.document.clone());
                    }
                    running.outcome(true, Vec::new())
                }
                Err(e) => {
                    eprintln!("config reload ({why}) refused, keeping the running config: {e:#}");
                    reload::record(false);
                    reload::count(false);
                    let errors: Vec<String> =
                        format!("{e:#}").lines().map(str::to_string).collect();
                    if let Some(f) = &from_mesh {
                        plane.refuse(aggregator::control::Refused {
                            generation: f.document.generation,
                            sha256: f.document.sha256.clone(),
                            errors: errors.clone(),
                        });
                    }
                    running.outcome(false, errors)
                }
            };
            if let Some(f) = from_mesh {
                super::control_args::publish(&node.handle, &plane, None).await;
                let _ = f.done.send(());
            }
            if let Some(reply) = reply {
                let _ = reply.send(outcome);
            }
        }
        scheduler.shutdown().await;
        let _ = node.handle.shutdown().await;
        Ok(ExitCode::SUCCESS)
    })
}
