//! Monitor previews in gossip (`mesh::preview`, docs/api.md#previews-run-by-the-mesh): this
//! aggregator publishes the requests its API takes, deletes them when they expire, and
//! collects the probers' outcomes of any live aggregator's preview for `GET .../preview/{id}`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chitchat::Chitchat;
use lb_core::Region;
use mesh::preview::{decode_outcomes, preview_key, PreviewOutcome, PreviewRequest, PREVIEW_PREFIX};
use mesh::Role;

/// How many previews, how large, for how long.
#[derive(Debug, Clone, Copy)]
pub struct PreviewLimits {
    /// Previews of this aggregator not expired yet (`--api-preview-max`).
    pub max_active: usize,
    /// Endpoints one preview may probe (`--api-preview-max-origins`).
    pub max_origins: usize,
    /// How long a preview and its outcomes last (`--api-preview-ttl-secs`).
    pub ttl: Duration,
}

impl Default for PreviewLimits {
    fn default() -> Self {
        PreviewLimits {
            max_active: 16,
            max_origins: 256,
            ttl: Duration::from_secs(600),
        }
    }
}

/// Why a preview was not started.
#[derive(Debug, thiserror::Error)]
pub enum PreviewRefused {
    #[error(
        "{0} previews of this aggregator are running (--api-preview-max): wait for one to expire"
    )]
    TooMany(usize),
}

/// One prober's outcomes of a preview.
#[derive(Debug, Clone)]
pub struct ProberReport {
    pub node: String,
    pub region: Region,
    pub dc: String,
    pub outcomes: Vec<PreviewOutcome>,
}

/// A preview as the mesh holds it now.
#[derive(Debug, Clone)]
pub struct Collected {
    pub request: PreviewRequest,
    pub reports: Vec<ProberReport>,
}

/// The previews of this aggregator and the gossip they travel in.
pub struct Previews {
    pub limits: PreviewLimits,
    gossip: Option<Arc<tokio::sync::Mutex<Chitchat>>>,
    /// This aggregator's previews: id -> when it expires (unix ms).
    mine: Mutex<BTreeMap<String, u64>>,
}

impl Previews {
    /// Previews over `gossip` (`None`: a node without a mesh, which refuses them).
    pub fn new(gossip: Option<Arc<tokio::sync::Mutex<Chitchat>>>, limits: PreviewLimits) -> Self {
        Previews {
            limits,
            gossip,
            mine: Mutex::new(BTreeMap::new()),
        }
    }

    /// Publishes `request` under a fresh id, which it returns.
    pub async fn start(&self, request: PreviewRequest) -> Result<String, PreviewRefused> {
        let id = {
            let mut mine = self.mine.lock().unwrap_or_else(|e| e.into_inner());
            let now = lb_core::clock::unix_ms();
            mine.retain(|_, expires| *expires > now);
            if mine.len() >= self.limits.max_active {
                metrics::counter!("meshlb_api_previews_total", "outcome" => "refused").increment(1);
                return Err(PreviewRefused::TooMany(mine.len()));
            }
            let id = meshlb_node::control::signing::hex(&rand::random::<[u8; 16]>());
            mine.insert(id.clone(), request.expires_ms);
            metrics::gauge!("meshlb_api_previews_active").set(mine.len() as f64);
            id
        };
        if let Some(gossip) = &self.gossip {
            gossip
                .lock()
                .await
                .self_node_state()
                .set(preview_key(&id), request.encode());
        }
        metrics::counter!("meshlb_api_previews_total", "outcome" => "started").increment(1);
        Ok(id)
    }

    /// Deletes this aggregator's expired previews from gossip (the tally loop calls it with
    /// the lock held).
    pub fn sweep(&self, c: &mut Chitchat, now_ms: u64) {
        let mut mine = self.mine.lock().unwrap_or_else(|e| e.into_inner());
        let expired: Vec<String> = c
            .self_node_state()
            .iter_prefix(PREVIEW_PREFIX)
            .map(|(k, _)| k[PREVIEW_PREFIX.len()..].to_string())
            .filter(|id| mine.get(id).is_none_or(|&expires| expires <= now_ms))
            .collect();
        for id in &expired {
            c.self_node_state().delete(&preview_key(id));
            mine.remove(id);
        }
        if !expired.is_empty() {
            metrics::gauge!("meshlb_api_previews_active").set(mine.len() as f64);
        }
    }

    /// Preview `id` as the live nodes hold it: the request of whichever live aggregator
    /// published it, and each live prober's outcomes; `None` when no live aggregator holds
    /// it (unknown, or expired).
    pub async fn collect(&self, id: &str) -> Option<Collected> {
        let gossip = self.gossip.as_ref()?;
        let c = gossip.lock().await;
        let key = preview_key(id);
        let now = lb_core::clock::unix_ms();
        let live: std::collections::HashSet<_> = c.live_nodes().collect();
        let role = |st: &chitchat::NodeState| Role::parse(st.get(mesh::keys::ROLE).unwrap_or(""));
        let request = c
            .node_states()
            .iter()
            .filter(|(n, st)| live.contains(n) && role(st) == Role::Aggregator)
            .find_map(|(_, st)| st.get(&key).and_then(PreviewRequest::decode))
            .filter(|r| r.expires_ms > now)?;
        let reports = c
            .node_states()
            .iter()
            .filter(|(n, st)| live.contains(n) && role(st) == Role::Prober)
            .filter_map(|(n, st)| {
                Some(ProberReport {
                    node: n.node_id.to_string(),
                    region: st.get(mesh::keys::REGION)?.parse().ok()?,
                    dc: st.get(mesh::keys::DATACENTER).unwrap_or("").to_string(),
                    outcomes: decode_outcomes(st.get(&key)?),
                })
            })
            .collect();
        Some(Collected { request, reports })
    }
}
