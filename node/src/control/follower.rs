//! A follower's side of the control plane (`--config-from-mesh`): every poll, and as soon as a
//! writer's announcement arrives in gossip, it reads what the live nodes announce holding — the
//! writer (primary or store-connected aggregators) and every relay, any follower that holds a
//! signed generation (`announce.rs`). When the newest
//! generation whose writer signature checks out (`writer_key.rs`) is newer than the one in
//! force here (and not one this node refused already), it waits a random part of a poll (so
//! that followers spread over the holders as they appear), then fetches the document from a
//! holder picked at random, another one if that one fails or is busy (`serve.rs`): zstd, or a
//! delta from the generation it runs. It checks hash, size and the writer's signature (or the
//! cluster-key HMAC where no writer key is configured) and hands the document to the node's
//! config task, which validates, persists and reloads (or refuses). An announcement or a
//! document whose signature does not check out is refused and counted
//! (`meshlb_config_documents_forged_total`). It never hands over an older generation than the
//! one in force. Once a generation is in force, the node gossips with the writer at once
//! (`ConfigProtocol::publish`), so the writer sees it within a round trip. Failed rounds back
//! off (1 s doubling to 30 s).

use std::sync::Arc;
use std::time::Duration;

use chitchat::Chitchat;
use tokio::sync::{mpsc, oneshot, Mutex};

use rand::seq::SliceRandom;
use rand::Rng;

use super::announce::{choose, Announcement, Primary};
use super::serve::{DELTA_FROM_HEADER, SIZE_HEADER, WRITER_SIGNATURE_HEADER};
use super::signing::{self, sha256_hex};
use super::{ControlPlane, Versioned};

/// Holders tried for one generation in one round.
const TRIES_PER_ROUND: usize = 3;

/// A document fetched from the primary, for the node's config task.
pub struct Fetched {
    pub primary: String,
    pub document: Versioned,
    /// The gossip address of the writer announcing the generation, told at once when it is
    /// in force here (`ConfigProtocol::publish`).
    pub tell: Option<std::net::SocketAddr>,
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
    #[error("the document's compression is broken: {0}")]
    Undecodable(String),
}

/// An error and its causes, `: `-separated: reqwest's own message ("error sending request")
/// leaves out why (refused, a certificate that does not verify).
pub(crate) fn causes(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(s) = source {
        text = format!("{text}: {s}");
        source = s.source();
    }
    text
}

/// The primary announced by the live nodes of `c`, among announcements `signed` accepts: with
/// writer keys, one a writer signed, so a node holding only the cluster key cannot become the
/// primary that 421 refusals, `GET /config` and a follower's tell-back name.
pub fn primary_of(c: &Chitchat, mut signed: impl FnMut(&Announcement) -> bool) -> Option<Primary> {
    let live: std::collections::HashSet<_> = c.live_nodes().cloned().collect();
    choose(c.node_states().iter().filter_map(|(id, st)| {
        if !live.contains(id) {
            return None;
        }
        let value = st.get(mesh::keys::CONFIG_PRIMARY)?;
        Announcement::parse(value)
            .filter(|a| signed(a))
            .map(|_| (&*id.node_id, value))
    }))
}

/// Every live node's announcement of what it holds: writers' (`config_primary`) and relays'
/// (`config_holds`).
pub fn holders_of(c: &Chitchat) -> Vec<(String, Announcement)> {
    let live: std::collections::HashSet<_> = c.live_nodes().cloned().collect();
    let mut out = Vec::new();
    for (id, st) in c.node_states() {
        if !live.contains(id) {
            continue;
        }
        for key in [mesh::keys::CONFIG_PRIMARY, mesh::keys::CONFIG_HOLDS] {
            if let Some(a) = st.get(key).and_then(Announcement::parse) {
                out.push((id.node_id.to_string(), a));
            }
        }
    }
    out
}

/// Fetches the document a holder holds now (it may be newer than its announcement): a delta
/// from the document in force here when the holder has it, else the whole, zstd-compressed.
pub async fn fetch(
    client: &reqwest::Client,
    plane: &ControlPlane,
    node_id: &str,
    url: &str,
) -> Result<Versioned, FetchError> {
    let now = lb_core::clock::unix_secs();
    let current = plane.document.load_full();
    let url = match current.generation {
        0 => format!("{}/-/config/document", url.trim_end_matches('/')),
        // The hash too: the same generation number may stand for another text on a holder (a
        // primary that lost its generation file counts from 1 again), and a delta made
        // against that text could not be applied here.
        g => format!(
            "{}/-/config/document?from={g}&base={}",
            url.trim_end_matches('/'),
            current.sha256
        ),
    };
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
        .header(http::header::ACCEPT_ENCODING, "zstd")
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
    let (generation, sha256, signature, writer) = (
        header(signing::GENERATION_HEADER),
        header(signing::SHA256_HEADER),
        header(signing::SIGNATURE_HEADER),
        header(WRITER_SIGNATURE_HEADER),
    );
    let writer = (!writer.is_empty()).then_some(writer);
    let generation: u64 = generation.parse().map_err(|_| FetchError::Forged)?;
    if !plane.key.verify_document(generation, &sha256, &signature) {
        return Err(FetchError::Forged);
    }
    let size: u64 = header(SIZE_HEADER).parse().unwrap_or(0);
    if !plane.writer_signed(generation, &sha256, size, writer.as_deref()) {
        return Err(FetchError::Forged);
    }
    let encoded = header(http::header::CONTENT_ENCODING.as_str()) == "zstd";
    let delta_from: Option<u64> = header(DELTA_FROM_HEADER).parse().ok();
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
    let body = if encoded {
        decode(&body, delta_from, &current, max)?
    } else {
        body
    };
    if sha256_hex(&body) != sha256 || body.len() as u64 != size && writer.is_some() {
        return Err(FetchError::Forged);
    }
    let text = String::from_utf8(body).map_err(|_| FetchError::NotText)?;
    Ok(Versioned::new(generation, &text).signed(writer.map(Into::into)))
}

/// A zstd body, at most `max` bytes once decompressed: the whole document, or a delta made with
/// generation `from` (the one in force here, `current`) as the dictionary.
fn decode(
    body: &[u8],
    from: Option<u64>,
    current: &Versioned,
    max: usize,
) -> Result<Vec<u8>, FetchError> {
    let broken = |e: std::io::Error| {
        if e.to_string().contains("Destination buffer is too small") {
            FetchError::TooLarge(max)
        } else {
            FetchError::Undecodable(e.to_string())
        }
    };
    match from {
        None => zstd::bulk::decompress(body, max).map_err(broken),
        Some(g) if g == current.generation => {
            let mut d = zstd::bulk::Decompressor::with_dictionary(current.text.as_bytes())
                .map_err(broken)?;
            d.decompress(body, max).map_err(broken)
        }
        Some(g) => Err(FetchError::Undecodable(format!(
            "a delta from generation {g}, and this node runs {}",
            current.generation
        ))),
    }
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

/// Follows the writer's announcements until the node's config task goes away.
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
    let Some(client) = fetch_client(&settings) else {
        return;
    };
    let announced = Arc::new(tokio::sync::Notify::new());
    let _listener = {
        let announced = Arc::clone(&announced);
        chitchat
            .lock()
            .await
            .subscribe_event(mesh::keys::CONFIG_PRIMARY, move |_| announced.notify_one())
    };
    let mut tick = tokio::time::interval(settings.poll);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut follower = Follower {
        settings,
        client,
        plane,
        backoff: Duration::ZERO,
        warned_missing: false,
        missing_polls: 0,
        forged: Forged::default(),
        verified: Verified::default(),
        jittered: 0,
    };
    loop {
        // Every poll, and at once when a writer announces (chitchat calls the listener as the
        // announcement arrives in gossip).
        tokio::select! {
            _ = tick.tick() => {}
            () = announced.notified() => {}
        }
        let Some((holders, writer)) = follower.look(&chitchat).await else {
            continue;
        };
        let Some(candidates) = follower.newest(holders) else {
            continue;
        };
        let tried = candidates.len().min(TRIES_PER_ROUND);
        let document = match follower.fetch_newest(candidates).await {
            Round::Got(holder, document) => (holder, document),
            Round::Failed { busy } if busy == tried => {
                // Every holder tried was busy: again after a short random wait, not a poll.
                let wait = (follower.settings.poll / 4).mul_f64(rand::rng().random::<f64>());
                tokio::time::sleep(wait).await;
                tick.reset_immediately();
                continue;
            }
            Round::Failed { .. } => {
                follower.backoff =
                    (follower.backoff * 2).clamp(Duration::from_secs(1), Duration::from_secs(30));
                tokio::time::sleep(follower.backoff).await;
                continue;
            }
        };
        follower.backoff = Duration::ZERO;
        let (holder, document) = document;
        if document.generation <= follower.plane.generation() {
            continue;
        }
        let (done, wait) = oneshot::channel();
        let fetched = Fetched {
            primary: holder,
            document,
            tell: writer,
            done,
        };
        if out.send(fetched).await.is_err() {
            return;
        }
        let _ = wait.await;
    }
}

/// The client fetches go through: a primary over https (`--admin-tls-cert`, or an `https://`
/// --config-advertise-url) is verified as `--config-ca` / `--config-pin` say, else against
/// the public web PKI.
fn fetch_client(settings: &FollowerSettings) -> Option<reqwest::Client> {
    let tls = match settings.trust.config() {
        Ok(t) => t,
        Err(e) => {
            tracing::error!(error = %e, "the config follower cannot set up TLS");
            return None;
        }
    };
    match reqwest::Client::builder()
        .use_preconfigured_tls((*tls).clone())
        .timeout(settings.fetch_timeout)
        .connect_timeout(settings.fetch_timeout)
        .build()
    {
        Ok(c) => Some(c),
        Err(e) => {
            tracing::error!(error = %e, "the config follower cannot build its HTTP client");
            None
        }
    }
}

/// How one round's fetches came out.
enum Round {
    /// The document, from this holder.
    Got(String, Versioned),
    /// None fetched; `busy` of the holders tried were serving their most at once.
    Failed { busy: usize },
}

/// The follower's state from one round to the next.
struct Follower {
    settings: FollowerSettings,
    client: reqwest::Client,
    plane: Arc<ControlPlane>,
    /// The wait after a failed round (1 s doubling to 30 s; zero after a success).
    backoff: Duration,
    warned_missing: bool,
    missing_polls: u32,
    forged: Forged,
    verified: Verified,
    /// The generation whose fetch already waited its random part of a poll.
    jittered: u64,
}

impl Follower {
    /// Reads gossip: the live writer (published for the API and `GET /config`), the holders
    /// and the writer's gossip address. `None` when there is nothing to follow this round.
    async fn look(
        &mut self,
        chitchat: &Mutex<Chitchat>,
    ) -> Option<(Vec<(String, Announcement)>, Option<std::net::SocketAddr>)> {
        let (primary, holders, writer) = {
            let c = chitchat.lock().await;
            let verified = &mut self.verified;
            let plane = self.plane.as_ref();
            let primary = primary_of(&c, |a| verified.check(plane, a));
            let writer = primary.as_ref().and_then(|p| {
                c.live_nodes()
                    .find(|id| *id.node_id == *p.node_id)
                    .map(|id| id.gossip_advertise_addr)
            });
            (primary, holders_of(&c), writer)
        };
        metrics::gauge!("meshlb_config_primary_seen").set(if primary.is_some() {
            1.0
        } else {
            0.0
        });
        let missing = primary.is_none() && holders.is_empty();
        self.plane.primary.store(Arc::new(primary));
        if missing {
            self.missing_polls += 1;
            // A node that just started has not heard from the mesh yet: only a primary
            // missing for a while is worth a warning.
            if !self.warned_missing && self.settings.follow && self.missing_polls >= 50 {
                tracing::warn!(
                    generation = self.plane.generation(),
                    "no live config primary in the mesh: serving the generation in force until one announces itself"
                );
                self.warned_missing = true;
            }
            return None;
        }
        self.warned_missing = false;
        self.missing_polls = 0;
        self.settings.follow.then_some((holders, writer))
    }

    /// The holders of the newest signed generation, newer than the one in force and not one
    /// refused here, in random order; `None` when there is none to fetch.
    fn newest(
        &mut self,
        holders: Vec<(String, Announcement)>,
    ) -> Option<Vec<(String, Announcement)>> {
        // Only what is newer than the generation in force is looked at, and a signature is
        // checked once: every holder announces every poll.
        let current = self.plane.generation();
        let (plane, verified, forged) = (self.plane.as_ref(), &mut self.verified, &mut self.forged);
        let mut candidates: Vec<(String, Announcement)> = holders
            .into_iter()
            .filter(|(_, a)| a.generation > current)
            .filter(|(node, a)| {
                let signed = verified.check(plane, a);
                if !signed {
                    forged.note(node, a.generation, "announcement");
                }
                signed
            })
            .collect();
        let newest = candidates.iter().map(|(_, a)| a.generation).max()?;
        let refused = plane.refused().is_some_and(|r| r.generation == newest);
        if newest <= plane.generation() || refused {
            return None;
        }
        candidates.retain(|(_, a)| a.generation == newest);
        if candidates
            .iter()
            .all(|(_, a)| a.size > plane.max_document_bytes as u64)
        {
            count("failure");
            tracing::warn!("the newest config generation is larger than --config-max-bytes");
            return None;
        }
        candidates.shuffle(&mut rand::rng());
        Some(candidates)
    }

    /// Fetches the newest generation from up to [`TRIES_PER_ROUND`] of its holders, the first
    /// time after a random part of a poll.
    async fn fetch_newest(&mut self, candidates: Vec<(String, Announcement)>) -> Round {
        let newest = candidates.first().map_or(0, |(_, a)| a.generation);
        // The first nodes to hold a generation would take every fetch: wait a random part of
        // a poll first, once per generation, while more holders appear.
        if self.jittered != newest {
            self.jittered = newest;
            let wait = self.settings.poll.mul_f64(rand::rng().random::<f64>());
            tokio::time::sleep(wait).await;
        }
        let mut busy = 0;
        for (node, a) in candidates.into_iter().take(TRIES_PER_ROUND) {
            match fetch(&self.client, &self.plane, &self.settings.node_id, &a.url).await {
                Ok(document) => {
                    count("success");
                    return Round::Got(node, document);
                }
                Err(FetchError::Forged) => {
                    count("failure");
                    self.forged.note(&node, a.generation, "document");
                }
                // A holder serving its most at once: not a failure, try again next poll.
                Err(FetchError::Status(503)) => busy += 1,
                Err(e) => {
                    count("failure");
                    tracing::warn!(holder = %node, error = %e, "fetching the config generation {} failed", a.generation);
                }
            }
        }
        Round::Failed { busy }
    }
}

/// Announcements whose writer signature was checked, and how it came out.
#[derive(Default)]
struct Verified(std::collections::HashMap<(u64, u64, String, String), bool>);

impl Verified {
    fn check(&mut self, plane: &ControlPlane, a: &Announcement) -> bool {
        let key = (
            a.generation,
            a.size,
            a.sha256.clone(),
            a.signature.clone().unwrap_or_default(),
        );
        if let Some(&ok) = self.0.get(&key) {
            return ok;
        }
        if self.0.len() > 1024 {
            self.0.clear();
        }
        let ok = plane.writer_signed(a.generation, &a.sha256, a.size, a.signature.as_deref());
        self.0.insert(key, ok);
        ok
    }
}

/// Forged announcements and documents seen: each (node, generation) counted and logged once.
#[derive(Default)]
struct Forged(std::collections::HashSet<(String, u64, &'static str)>);

impl Forged {
    fn note(&mut self, node: &str, generation: u64, what: &'static str) {
        if self.0.len() > 4096 {
            self.0.clear();
        }
        if self.0.insert((node.to_string(), generation, what)) {
            metrics::counter!("meshlb_config_documents_forged_total", "what" => what).increment(1);
            tracing::warn!(
                node,
                generation,
                what,
                "a config {what} whose writer signature does not check out: refused"
            );
        }
    }
}
