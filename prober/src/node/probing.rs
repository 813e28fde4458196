//! The prober's reload: a config text becomes the probe targets of this region, handed to the
//! running scheduler (which keeps each kept target's timing and thresholds) and to the
//! publisher (which drops the results of targets gone). The config protocol
//! (`meshlb_node::control::protocol`) decides when.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use lb_core::config::IncrementalParser;
use lb_core::{Region, RegionsTable};
use mesh::node::config_hash;
use meshlb_node::reload::{self, Outcome};

use crate::{GossipPublisher, ProbeTarget, Scheduler};

/// What a prober's reload changes.
pub(super) struct Probing {
    pub path: PathBuf,
    pub regions: RegionsTable,
    pub region: Region,
    pub scheduler: Scheduler,
    pub publisher: Arc<GossipPublisher>,
    /// This node's gossip state (its config hash is gossiped).
    pub gossip: Arc<tokio::sync::Mutex<chitchat::Chitchat>>,
    /// The hash of the config in force.
    pub hash: String,
    /// How many loads it took to get there (1: the start).
    pub loads: u64,
    /// Parses each generation, reusing the resources the one before held.
    pub parser: IncrementalParser,
}

/// Each target's gossip key and endpoint: what the publisher keeps.
pub(super) fn keep(targets: &[ProbeTarget]) -> BTreeSet<(String, String)> {
    targets
        .iter()
        .map(|t| (t.key.gossip_key(), t.key.endpoint.clone()))
        .collect()
}

impl Probing {
    fn outcome(&self, reloaded: bool, errors: Vec<String>) -> Outcome {
        Outcome {
            reloaded,
            generation: self.loads,
            config_hash: self.hash.clone(),
            unchanged: false,
            errors,
        }
    }

    async fn replace(
        &mut self,
        why: &str,
        text: &str,
        persist: impl FnOnce() -> Result<(), meshlb_node::control::StoreError>,
    ) -> Outcome {
        let file = self.path.display().to_string();
        let parsed = self
            .parser
            .parse(&file, text, &self.regions)
            .map_err(|errors| errors.0.iter().map(ToString::to_string).collect::<Vec<_>>())
            .and_then(|config| persist().map(|()| config).map_err(|e| vec![e.to_string()]));
        let config = match parsed {
            Ok(config) => config,
            Err(errors) => {
                tracing::warn!(
                    why,
                    errors = ?errors,
                    "config reload ({why}) refused, keeping the running config: {}",
                    errors.join("\n")
                );
                reload::record(false);
                reload::count(false);
                return self.outcome(false, errors);
            }
        };
        let hash = config_hash(text);
        let targets = crate::targets(&config, Some(self.region));
        tracing::info!(
            why,
            targets = targets.len(),
            hash = %hash,
            "config reloaded ({why}): {} targets",
            targets.len()
        );
        self.publisher.retain(keep(&targets));
        self.scheduler.replace_targets(targets);
        let loaded_at = lb_core::clock::unix_secs().to_string();
        {
            let mut chitchat = self.gossip.lock().await;
            let me = chitchat.self_node_state();
            me.set(mesh::keys::CONFIG_HASH, &hash);
            me.set(mesh::keys::CONFIG_LOADED_AT, &loaded_at);
        }
        self.loads += 1;
        self.hash = hash;
        reload::record(true);
        reload::count(true);
        self.outcome(true, Vec::new())
    }
}

impl meshlb_node::control::Reload for Probing {
    fn refused(&self, errors: Vec<String>) -> Outcome {
        self.outcome(false, errors)
    }

    fn reload_text(
        &mut self,
        why: &str,
        text: &str,
        persist: impl FnOnce() -> Result<(), meshlb_node::control::StoreError> + Send,
    ) -> impl std::future::Future<Output = Outcome> + Send {
        self.replace(why, text, persist)
    }
}
