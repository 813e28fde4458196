//! A follower's side of the control plane (`--config-from-mesh`): every poll it reads which
//! primary the live nodes announce; when that primary holds a newer generation than the one
//! in force here (and not one this node refused already), it fetches the document over HTTP
//! (`signing.rs`), checks signature, hash and size, and hands it to the node's config task,
//! which validates, persists and reloads (or refuses). It never hands over an older
//! generation than the one in force. Failed fetches back off (1 s doubling to 30 s).

use std::sync::Arc;
use std::time::Duration;

use chitchat::Chitchat;
use tokio::sync::{mpsc, oneshot, Mutex};

use super::announce::{choose, Primary};
use super::signing::{self, sha256_hex};
use super::{ControlPlane, Versioned};

/// A document fetched from the primary, for the node's config task.
pub struct Fetched {
    pub primary: String,
    pub document: Versioned,
    /// Answered once the task has applied or refused it.
    pub done: oneshot::Sender<()>,
}

/// What the follower task is given.
pub struct FollowerSettings {
    pub node_id: String,
    /// How often it reads gossip for the primary's announcement.
    pub poll: Duration,
    /// The longest a fetch may take (`--config-fetch-timeout-ms`).
    pub fetch_timeout: Duration,
    /// Fetch and hand over new generations (`--config-from-mesh`); else only watch which
    /// primary is live (for the API's refusals and `GET /config`).
    pub follow: bool,
    /// Whom a fetch over https trusts (`--config-ca`, `--config-pin`) and the client
    /// certificate it presents.
    pub trust: lb_tls::ClientTrust,
}

/// Why a fetch did not bring a document.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("cannot reach the primary at {url}: {}", causes(error))]
    Unreachable { url: String, error: reqwest::Error },
    #[error("the primary answered {0}")]
    Status(u16),
    #[error("the document is larger than --config-max-bytes ({0} bytes)")]
    TooLarge(usize),
    #[error("the document's signature or hash does not check out: not applied")]
    Forged,
    #[error("the document is not UTF-8")]
    NotText,
}

/// An error and its causes, `: `-separated: reqwest's own message ("error sending request")
/// leaves out why (refused, a certificate that does not verify).
fn causes(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(s) = source {
        text = format!("{text}: {s}");
        source = s.source();
    }
    text
}

/// The primary announced by the live nodes of `c`.
pub fn primary_of(c: &Chitchat) -> Option<Primary> {
    let live: std::collections::HashSet<_> = c.live_nodes().cloned().collect();
    choose(c.node_states().iter().filter_map(|(id, st)| {
        if !live.contains(id) {
            return None;
        }
        st.get(mesh::keys::CONFIG_PRIMARY)
            .map(|v| (&*id.node_id, v))
    }))
}

/// Fetches the document the primary holds now (it may be newer than its announcement).
pub async fn fetch(
    client: &reqwest::Client,
    plane: &ControlPlane,
    node_id: &str,
    url: &str,
) -> Result<Versioned, FetchError> {
    let now = lb_core::clock::unix_secs();
    let url = format!("{}/-/config/document", url.trim_end_matches('/'));
    let unreachable = |error| FetchError::Unreachable {
        url: url.clone(),
        error,
    };
    let mut response = client
        .get(&url)
        .header(signing::NODE_HEADER, node_id)
        .header(signing::TIME_HEADER, now.to_string())
        .header(
            http::header::AUTHORIZATION,
            plane.key.sign_fetch(node_id, now),
        )
        .send()
        .await
        .map_err(unreachable)?;
    if !response.status().is_success() {
        return Err(FetchError::Status(response.status().as_u16()));
    }
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let (generation, sha256, signature) = (
        header(signing::GENERATION_HEADER),
        header(signing::SHA256_HEADER),
        header(signing::SIGNATURE_HEADER),
    );
    let generation: u64 = generation.parse().map_err(|_| FetchError::Forged)?;
    if !plane.key.verify_document(generation, &sha256, &signature) {
        return Err(FetchError::Forged);
    }
    let max = plane.max_document_bytes;
    if response.content_length().is_some_and(|l| l > max as u64) {
        return Err(FetchError::TooLarge(max));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(unreachable)? {
        if body.len() + chunk.len() > max {
            return Err(FetchError::TooLarge(max));
        }
        body.extend_from_slice(&chunk);
    }
    if sha256_hex(&body) != sha256 {
        return Err(FetchError::Forged);
    }
    let text = String::from_utf8(body).map_err(|_| FetchError::NotText)?;
    Ok(Versioned::new(generation, &text))
}

fn count(result: &'static str) {
    metrics::counter!("meshlb_config_fetches_total", "result" => result).increment(1);
}

/// Watches gossip and fetches; runs until dropped.
/// Starts the task that watches gossip for the primary (and, on a follower, fetches its
/// generations into the returned channel, for the config task).
pub fn spawn(
    node_id: &str,
    mesh: &mesh::MeshSettings,
    control: &super::ControlSettings,
    handle: &chitchat::ChitchatHandle,
    plane: &Arc<ControlPlane>,
) -> (tokio::task::JoinHandle<()>, mpsc::Receiver<Fetched>) {
    let (fetches, fetched) = mpsc::channel(1);
    let task = tokio::spawn(run(
        FollowerSettings {
            node_id: node_id.to_string(),
            poll: mesh.gossip_interval.max(Duration::from_millis(50)),
            fetch_timeout: control.fetch_timeout,
            follow: plane.role == super::ConfigRole::Follower,
            trust: control.fetch_trust.clone(),
        },
        handle.chitchat(),
        Arc::clone(plane),
        fetches,
    ));
    (task, fetched)
}

pub async fn run(
    settings: FollowerSettings,
    chitchat: Arc<Mutex<Chitchat>>,
    plane: Arc<ControlPlane>,
    out: mpsc::Sender<Fetched>,
) {
    for result in ["success", "failure"] {
        metrics::counter!("meshlb_config_fetches_total", "result" => result).absolute(0);
    }
    metrics::counter!("meshlb_config_documents_refused_total").absolute(0);
    // A primary over https (`--admin-tls-cert`, or an `https://` --config-advertise-url) is
    // verified as `--config-ca` / `--config-pin` say, else against the public web PKI.
    let tls = match settings.trust.config() {
        Ok(t) => t,
        Err(e) => {
            tracing::error!(error = %e, "the config follower cannot set up TLS");
            return;
        }
    };
    let client = match reqwest::Client::builder()
        .use_preconfigured_tls((*tls).clone())
        .timeout(settings.fetch_timeout)
        .connect_timeout(settings.fetch_timeout)
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "the config follower cannot build its HTTP client");
            return;
        }
    };
    let mut backoff = Duration::ZERO;
    let mut warned_missing = false;
    let mut missing_polls = 0u32;
    let mut tick = tokio::time::interval(settings.poll);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let primary = primary_of(&*chitchat.lock().await);
        metrics::gauge!("meshlb_config_primary_seen").set(if primary.is_some() {
            1.0
        } else {
            0.0
        });
        plane.primary.store(Arc::new(primary.clone()));
        let Some(primary) = primary else {
            missing_polls += 1;
            // A node that just started has not heard from the mesh yet: only a primary
            // missing for a while is worth a warning.
            if !warned_missing && settings.follow && missing_polls >= 50 {
                tracing::warn!(
                    generation = plane.generation(),
                    "no live config primary in the mesh: serving the generation in force until one announces itself"
                );
                warned_missing = true;
            }
            continue;
        };
        warned_missing = false;
        missing_polls = 0;
        if !settings.follow {
            continue;
        }
        let a = &primary.announcement;
        let refused = plane
            .refused()
            .is_some_and(|r| r.generation == a.generation && r.sha256 == a.sha256);
        if a.generation <= plane.generation() || refused {
            continue;
        }
        if a.size > plane.max_document_bytes as u64 {
            count("failure");
            tracing::warn!(
                size = a.size,
                "the primary's document is larger than --config-max-bytes"
            );
            continue;
        }
        match fetch(&client, &plane, &settings.node_id, &a.url).await {
            Ok(document) if document.generation > plane.generation() => {
                count("success");
                backoff = Duration::ZERO;
                let (done, wait) = oneshot::channel();
                let fetched = Fetched {
                    primary: primary.node_id.clone(),
                    document,
                    done,
                };
                if out.send(fetched).await.is_err() {
                    return;
                }
                let _ = wait.await;
            }
            Ok(_) => count("success"),
            Err(e) => {
                count("failure");
                backoff = (backoff * 2).clamp(Duration::from_secs(1), Duration::from_secs(30));
                tracing::warn!(primary = %primary.node_id, error = %e, retry_in = ?backoff, "fetching the config generation {} failed", a.generation);
                tokio::time::sleep(backoff).await;
            }
        }
    }
}
