//! A store-connected node's link to etcd: the document key, the client, whether the store
//! answered last time; the task that reads and watches the key and hands every newer
//! generation to the node's config task (`protocol.rs`, as a follower's fetches are); and the
//! conditional write of the API's documents.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use super::client::{EtcdClient, EtcdError, Put, WatchEvent};
use super::settings::StoreSettings;
use crate::control::follower::Fetched;
use crate::control::signing::sha256_hex;
use crate::control::{ControlPlane, Versioned};

/// What a watch waits for before it checks the key's revision with a read (a watch held by a
/// member that went away silently is found out this way).
const WATCH_CHECK: Duration = Duration::from_secs(5);
/// Waits after a failure, doubling.
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// Who hands generations to the config task (the log names it).
pub const STORE_SOURCE: &str = "the config store";

/// A node's link to the store.
pub struct StoreLink {
    pub client: EtcdClient,
    /// The key of the config document: `<prefix>/config`.
    pub key: String,
    /// Whether the store answered the last request.
    up: AtomicBool,
}

impl StoreLink {
    /// The link to the store `settings` name, for documents of at most `max_document_bytes`.
    pub fn new(
        settings: &StoreSettings,
        max_document_bytes: usize,
    ) -> Result<StoreLink, EtcdError> {
        Ok(StoreLink {
            client: EtcdClient::new(settings, max_document_bytes)?,
            key: format!("{}/config", settings.url.prefix),
            up: AtomicBool::new(false),
        })
    }

    fn mark(&self, up: bool) {
        self.up.store(up, Ordering::Relaxed);
        metrics::gauge!("meshlb_config_store_up").set(if up { 1.0 } else { 0.0 });
    }

    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }

    /// Writes `text` as the next generation if the key is still at `base`: the revision
    /// written, or what holds the key now. A write whose first try reached etcd but whose
    /// answer was lost is found by its content and taken as done, never applied twice.
    pub async fn write(&self, base: u64, text: &str) -> Result<Put, EtcdError> {
        let result = self.client.put_if(&self.key, base, text.as_bytes()).await;
        self.mark(!matches!(result, Err(EtcdError::Unreachable(_))));
        let outcome = match &result {
            Ok(Put::Done { .. }) => "success",
            Ok(Put::Conflict { .. }) => "conflict",
            Err(_) => "failure",
        };
        metrics::counter!("meshlb_config_store_writes_total", "result" => outcome).increment(1);
        match result? {
            Put::Conflict { current: Some(kv) }
                if sha256_hex(&kv.value) == sha256_hex(text.as_bytes()) =>
            {
                Ok(Put::Done {
                    revision: kv.mod_revision,
                })
            }
            other => Ok(other),
        }
    }
}

/// Starts the task that keeps the node's document in step with the store; generations go to
/// the returned channel, for the config task.
pub fn spawn(
    link: Arc<StoreLink>,
    plane: Arc<ControlPlane>,
) -> (tokio::task::JoinHandle<()>, mpsc::Receiver<Fetched>) {
    let (out, fetched) = mpsc::channel(1);
    (tokio::spawn(run(link, plane, out)), fetched)
}

/// Hands `kv`'s document to the config task when it is newer than the one in force; waits
/// until it was applied or refused. `false`: the config task is gone.
async fn hand_over(
    plane: &ControlPlane,
    out: &mpsc::Sender<Fetched>,
    text: Vec<u8>,
    revision: u64,
) -> bool {
    if revision <= plane.generation() || text.is_empty() {
        return true;
    }
    let refused = plane.refused().is_some_and(|r| r.generation == revision);
    if refused {
        return true;
    }
    let Ok(text) = String::from_utf8(text) else {
        tracing::warn!(
            revision,
            "the config store holds a document that is not UTF-8"
        );
        return true;
    };
    if text.len() > plane.max_document_bytes {
        tracing::warn!(
            revision,
            "the config store's document is larger than --config-max-bytes"
        );
        return true;
    }
    let (done, wait) = oneshot::channel();
    let fetched = Fetched {
        primary: STORE_SOURCE.to_string(),
        document: Versioned::new(revision, &text),
        tell: None,
        done,
    };
    if out.send(fetched).await.is_err() {
        return false;
    }
    let _ = wait.await;
    true
}

async fn run(link: Arc<StoreLink>, plane: Arc<ControlPlane>, out: mpsc::Sender<Fetched>) {
    link.mark(false);
    let mut backoff = BACKOFF_MIN;
    loop {
        // Read the whole document, then watch from the revision after the read.
        let read = match link.client.get(&link.key).await {
            Ok(read) => read,
            Err(e) => {
                link.mark(false);
                tracing::warn!(error = %e, retry_in = ?backoff, "reading the config store failed");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
                continue;
            }
        };
        link.mark(true);
        if let Some(kv) = read.kv {
            if !hand_over(&plane, &out, kv.value, kv.mod_revision).await {
                return;
            }
        }
        let mut watch = match link
            .client
            .watch(&link.key, read.revision.saturating_add(1))
            .await
        {
            Ok(w) => w,
            Err(e) => {
                link.mark(false);
                tracing::warn!(error = %e, retry_in = ?backoff, "watching the config store failed");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
                continue;
            }
        };
        backoff = BACKOFF_MIN;
        loop {
            let events = match tokio::time::timeout(WATCH_CHECK, watch.next()).await {
                Ok(Ok(events)) => events,
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "the config store's watch ended: reading the document again");
                    break;
                }
                // Quiet: make sure the member is still there and nothing was missed.
                Err(_) => match link.client.get(&link.key).await {
                    Ok(r) if r.kv.as_ref().map_or(0, |k| k.mod_revision) <= plane.generation() => {
                        link.mark(true);
                        continue;
                    }
                    _ => break,
                },
            };
            let mut lost = false;
            for event in events {
                match event {
                    WatchEvent::Changed(kv) => {
                        if !hand_over(&plane, &out, kv.value, kv.mod_revision).await {
                            return;
                        }
                    }
                    WatchEvent::Lost => lost = true,
                }
            }
            if lost {
                tracing::info!("the config store's watch lost its place (compaction): reading the document again");
                break;
            }
        }
    }
}
