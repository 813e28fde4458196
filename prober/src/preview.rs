//! Monitor previews run by this prober (`mesh::preview`, docs/api.md#previews-run-by-the-mesh).
//! The task watches the live aggregators' `preview/<id>` requests, runs each new one once
//! against the endpoints of its pools whose `check_regions` include this prober's region
//! (`once::probe_once`, from this datacenter, as the real monitor would), and publishes the
//! outcomes under the same key in its own state until the preview expires.
//!
//! Bounded: at most [`PreviewSettings::concurrent`] previews run at once (the rest wait their
//! turn), at most [`PreviewSettings::remembered`] are remembered (a request beyond is skipped
//! and counted), and a request is read only while it has not expired.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chitchat::Chitchat;
use lb_core::config::Config;
use lb_core::{Region, RegionsTable};
use mesh::keys::EndpointResult;
use mesh::preview::{encode_outcomes, preview_key, PreviewOutcome, PreviewRequest, PREVIEW_PREFIX};
use mesh::Role;
use tokio::sync::Mutex;
use tokio::task::JoinSet;

use crate::once::{probe_once, Probed};

/// How previews are run.
#[derive(Debug, Clone, Copy)]
pub struct PreviewSettings {
    /// Previews probing at once.
    pub concurrent: usize,
    /// Previews remembered (running, published or skipped) until they expire.
    pub remembered: usize,
    /// Targets one preview may probe here; a larger one is not run (the aggregator that took
    /// it allows `--api-preview-max-origins`, so only a foreign request is larger).
    pub max_targets: usize,
    /// How often the requests in gossip are read.
    pub poll: Duration,
}

impl Default for PreviewSettings {
    fn default() -> Self {
        PreviewSettings {
            concurrent: 4,
            remembered: 256,
            max_targets: 1024,
            poll: Duration::from_millis(250),
        }
    }
}

/// Runs the previews the mesh asks of a prober in `region`; never returns.
pub async fn run(
    chitchat: Arc<Mutex<Chitchat>>,
    regions: RegionsTable,
    region: Region,
    settings: PreviewSettings,
) {
    // id -> when it expires (unix ms): every preview seen, so none runs twice.
    let mut seen: HashMap<String, u64> = HashMap::new();
    let mut running: JoinSet<(String, String)> = JoinSet::new();
    let mut tick = tokio::time::interval(settings.poll);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            Some(done) = running.join_next(), if !running.is_empty() => {
                if let Ok((id, value)) = done {
                    if seen.contains_key(&id) {
                        chitchat.lock().await.self_node_state().set(preview_key(&id), value);
                    }
                }
                continue;
            }
        }
        let now = lb_core::clock::unix_ms();
        let requests = {
            let mut c = chitchat.lock().await;
            for (id, _) in seen.iter().filter(|(_, &expires)| expires <= now) {
                c.self_node_state().delete(&preview_key(id));
            }
            seen.retain(|_, expires| *expires > now);
            new_requests(&c, &seen)
        };
        for (id, value) in requests {
            if running.len() >= settings.concurrent {
                break;
            }
            let Some(request) = PreviewRequest::decode(&value).filter(|r| r.expires_ms > now)
            else {
                continue;
            };
            if seen.len() >= settings.remembered {
                metrics::counter!("meshlb_prober_previews_total", "outcome" => "skipped")
                    .increment(1);
                continue;
            }
            seen.insert(id.clone(), request.expires_ms);
            let regions = regions.clone();
            running.spawn(async move {
                let value = run_one(&id, &request, &regions, region, settings.max_targets).await;
                (id, value)
            });
        }
    }
}

/// The requests of live aggregators not seen yet: (id, value).
fn new_requests(c: &Chitchat, seen: &HashMap<String, u64>) -> Vec<(String, String)> {
    let live: std::collections::HashSet<_> = c.live_nodes().collect();
    let mut out = Vec::new();
    for (id, state) in c.node_states() {
        if !live.contains(id)
            || Role::parse(state.get(mesh::keys::ROLE).unwrap_or("")) != Role::Aggregator
        {
            continue;
        }
        for (key, value) in state.iter_prefix(PREVIEW_PREFIX) {
            let preview = &key[PREVIEW_PREFIX.len()..];
            if !seen.contains_key(preview) && !out.iter().any(|(p, _)| p == preview) {
                out.push((preview.to_string(), value.value.clone()));
            }
        }
    }
    out
}

/// Runs one preview: its outcomes, encoded for gossip (empty when none of its pools is
/// checked from this region, or its document does not validate here).
async fn run_one(
    id: &str,
    request: &PreviewRequest,
    regions: &RegionsTable,
    region: Region,
    max_targets: usize,
) -> String {
    let config = match Config::parse(&format!("preview {id}"), &request.document, regions) {
        Ok(config) => config,
        Err(errors) => {
            tracing::warn!(preview = id, %errors, "a preview's document does not validate here: not run");
            metrics::counter!("meshlb_prober_previews_total", "outcome" => "invalid").increment(1);
            return String::new();
        }
    };
    let targets = crate::targets(&config, Some(region));
    if targets.len() > max_targets {
        tracing::warn!(
            preview = id,
            targets = targets.len(),
            max_targets,
            "a preview with more targets than --preview-max-targets: not run"
        );
        metrics::counter!("meshlb_prober_previews_total", "outcome" => "too_large").increment(1);
        return String::new();
    }
    let probed = probe_once(&config, &targets).await;
    metrics::counter!("meshlb_prober_previews_total", "outcome" => "run").increment(1);
    encode_outcomes(&probed.iter().map(outcome).collect::<Vec<_>>())
}

fn outcome(p: &Probed) -> PreviewOutcome {
    let a = &p.result.attempt;
    PreviewOutcome {
        pool: p.pool.clone(),
        endpoint: p.endpoint.clone(),
        address: p.address.clone(),
        result: EndpointResult {
            healthy: a.passed,
            rtt_ms: a.passed.then_some(a.rtt.as_secs_f64() * 1000.0),
            code: a.code,
            reason: a.reason.as_ref().map(ToString::to_string),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(origins: usize) -> PreviewRequest {
        // Loopback, on a port nothing listens on: were they probed, each would answer at once
        // (connection refused) with an outcome.
        let origins: Vec<String> = (0..origins)
            .map(|i| {
                format!(
                    "{{ name = \"o{i}\", address = \"127.0.0.{}\", port = 9 }}",
                    i + 1
                )
            })
            .collect();
        PreviewRequest {
            expires_ms: u64::MAX,
            pools: vec![("eu".into(), "eu".into())],
            document: format!(
                "[[monitors]]\nname = \"m\"\ntype = \"tcp\"\ninterval = 60\ntimeout = 5\n\n[[pools]]\nname = \"eu\"\nmonitor = \"m\"\ncheck_regions = [\"WEU\"]\norigins = [{}]\n",
                origins.join(", ")
            ),
        }
    }

    #[tokio::test]
    async fn a_preview_with_more_targets_than_allowed_is_not_run() {
        let regions = RegionsTable::embedded().expect("regions");
        let started = std::time::Instant::now();
        let value = run_one("big", &request(3), &regions, Region::Weu, 2).await;
        assert_eq!(value, "");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "nothing was probed"
        );
    }

    #[tokio::test]
    async fn a_preview_of_pools_this_region_does_not_check_probes_nothing() {
        let regions = RegionsTable::embedded().expect("regions");
        let value = run_one("elsewhere", &request(1), &regions, Region::Enam, 16).await;
        assert_eq!(value, "");
    }
}
