//! The control plane (docs/api.md): one aggregator is the config primary (`--config-primary`);
//! the API's writes go to it alone, each accepted write is a new config generation, persisted
//! and announced in gossip; every node started with `--config-from-mesh` fetches the
//! announced document, checks it, keeps it on disk and reloads — DNS's primary and
//! secondaries, with gossip as the NOTIFY and an authenticated HTTP fetch as the transfer.
//!
//! - [`announce`]: the primary's gossip announcement, and which primary a node follows.
//! - [`etcd`]: the config kept in etcd instead (`--config-store`): any connected aggregator
//!   takes writes, each an etcd transaction; every connected aggregator watches.
//! - [`signing`]: fetches and documents authenticated with the cluster key.
//! - [`store`]: a node's copy on disk with its generation, written atomically.
//! - [`follower`]: the task that watches gossip and fetches new generations.
//! - [`writes`]: the API's writes, on their way to the task that owns the config.
//! - [`protocol`]: that task's side — file reloads, the primary's writes, the follower's
//!   generations — the same for every node role, over the node's own way of reloading.
//! - [`gossip`]: what a node says of its generation in gossip.

pub mod announce;
pub mod etcd;
pub mod follower;
#[cfg(test)]
mod follower_tests;
pub mod gossip;
pub mod protocol;
pub mod serve;
#[cfg(test)]
mod serve_tests;
pub mod signing;
pub mod store;
pub mod writer_key;
pub mod writes;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;

pub use announce::{Announcement, Primary};
pub use protocol::{ConfigProtocol, Reload};
pub use signing::ControlKey;
pub use store::{ConfigStore, Side, StoreError, Versioned};

/// Which part this node plays in the control plane (its mesh role, prober or aggregator, is
/// `mesh::Role`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigRole {
    /// `--config-primary`: takes the API's writes and serves the document to the mesh.
    Primary,
    /// `--config-from-mesh`: runs the primary's document.
    Follower,
    /// Neither: runs its own file (and refuses the API's writes).
    Standalone,
    /// `--config-store`: the config lives in etcd; this node takes the API's writes as etcd
    /// transactions, watches the store and serves the document to the mesh (`etcd/`).
    Store,
}

impl ConfigRole {
    pub fn name(self) -> &'static str {
        match self {
            ConfigRole::Primary => "primary",
            ConfigRole::Follower => "follower",
            ConfigRole::Standalone => "standalone",
            ConfigRole::Store => "store",
        }
    }

    /// Whether this node takes the API's writes (and serves the document to the mesh).
    pub fn takes_writes(self) -> bool {
        matches!(self, ConfigRole::Primary | ConfigRole::Store)
    }

    /// Whether the node's file is the mesh's document, kept by the control plane (not edited
    /// by hand).
    pub fn file_is_kept(self) -> bool {
        matches!(self, ConfigRole::Follower | ConfigRole::Store)
    }
}

/// A node's part in the control plane, as it starts.
#[derive(Clone)]
pub struct ControlSettings {
    pub role: ConfigRole,
    /// The cluster-derived key of fetches and documents.
    pub key: ControlKey,
    /// The largest config document fetched or written (`--config-max-bytes`).
    pub max_document_bytes: usize,
    /// The longest a fetch of the primary's document may take (`--config-fetch-timeout-ms`).
    pub fetch_timeout: std::time::Duration,
    /// Whom a fetch over https trusts and what it presents (`--config-ca`, `--config-pin`,
    /// `--config-client-cert`); the default is the public web PKI.
    pub fetch_trust: lb_tls::ClientTrust,
    /// The config store (`--config-store`, role `Store`).
    pub store: Option<etcd::StoreSettings>,
    /// Who may make a generation, and how documents travel (`writer_key.rs`, `serve.rs`).
    pub documents: DocumentSettings,
}

/// How documents are signed, checked and served.
#[derive(Clone, Default)]
pub struct DocumentSettings {
    /// The writer's key (`--config-signing-key`), on config-writing nodes.
    pub signing: Option<Arc<writer_key::SigningKey>>,
    /// The keys documents must be signed with (`--config-verify-key`, and the signing key's
    /// own); none: documents are authenticated with the cluster key alone.
    pub verify: writer_key::VerifyKeys,
    /// Fetches of this node's document served at once (`--config-serve-max`); more are
    /// answered 503 and the follower tries another holder.
    pub serve_max: usize,
}

/// Fetches of a node's document served at once, by default.
pub const DEFAULT_SERVE_MAX: usize = 8;

/// Largest config document fetched or written (`--config-max-bytes`).
pub const DEFAULT_MAX_DOCUMENT_BYTES: usize = 32 << 20;

/// A generation this node refused, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Refused {
    pub generation: u64,
    pub sha256: String,
    pub errors: Vec<String>,
}

/// The control plane as a node's tasks share it.
pub struct ControlPlane {
    pub role: ConfigRole,
    /// The document in force, with its generation.
    pub document: ArcSwap<Versioned>,
    /// The primary seen in gossip (none: no live node announces one).
    pub primary: ArcSwap<Option<Primary>>,
    /// The newest generation this node refused, if it refused one since it last applied.
    pub refused: Mutex<Option<Refused>>,
    /// Where the API's writes go (on the primary; its config task holds the other end).
    pub writes: Option<tokio::sync::mpsc::Sender<writes::WriteRequest>>,
    /// The cluster-derived key of fetches and documents.
    pub key: ControlKey,
    pub max_document_bytes: usize,
    /// Signing, checking and serving documents.
    pub documents: DocumentSettings,
    /// The generation in force before this one (a follower one behind takes a delta from it).
    pub previous: ArcSwap<Option<Versioned>>,
    /// Fetches being served (`serve.rs`).
    pub serving: Arc<tokio::sync::Semaphore>,
    /// The compressed forms of the document in force, made once (`serve.rs`).
    pub packed: Mutex<serve::Packed>,
    /// How long a write whose `If-Match` names a newer generation than this node's waits for
    /// it to arrive: on a store-connected node, `--config-store-timeout-ms` (another
    /// aggregator wrote it, and this one's watch brings it); elsewhere none.
    pub catch_up: std::time::Duration,
    generation: AtomicU64,
    /// Each generation put in force, for `caught_up`.
    applied_generations: tokio::sync::watch::Sender<u64>,
}

impl ControlPlane {
    /// The control plane of a node in `role`, starting from `document`; on the primary, with
    /// the receiving end of the API's writes for its config task.
    pub fn new(
        role: ConfigRole,
        document: Versioned,
        key: ControlKey,
        max_document_bytes: usize,
        documents: DocumentSettings,
    ) -> (
        ControlPlane,
        Option<tokio::sync::mpsc::Receiver<writes::WriteRequest>>,
    ) {
        let generation = AtomicU64::new(document.generation);
        record_generation(document.generation);
        let (writes, written) = if role.takes_writes() {
            let (tx, rx) = tokio::sync::mpsc::channel(16);
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        let serving = Arc::new(tokio::sync::Semaphore::new(documents.serve_max));
        // A writer's document at start (its file, as recorded) is signed like every other.
        let document = match (&documents.signing, &document.signature) {
            (Some(key), None) if document.generation > 0 => {
                let signature = key.sign(document.generation, &document.sha256, document.size());
                document.signed(Some(signature.into()))
            }
            _ => document,
        };
        let plane = ControlPlane {
            role,
            document: ArcSwap::from_pointee(document),
            primary: ArcSwap::from_pointee(None),
            refused: Mutex::new(None),
            writes,
            key,
            max_document_bytes,
            documents,
            previous: ArcSwap::from_pointee(None),
            serving,
            packed: Mutex::new(serve::Packed::default()),
            catch_up: std::time::Duration::ZERO,
            applied_generations: tokio::sync::watch::Sender::new(
                generation.load(Ordering::Relaxed),
            ),
            generation,
        };
        (plane, written)
    }

    /// The generation in force.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Whether generation `at_least` (or a newer one) is in force, waiting up to `catch_up`
    /// for it.
    pub async fn caught_up(&self, at_least: u64) -> bool {
        let mut applied = self.applied_generations.subscribe();
        if self.generation() >= at_least {
            return true;
        }
        if self.catch_up.is_zero() {
            return false;
        }
        let arrived =
            tokio::time::timeout(self.catch_up, applied.wait_for(|&g| g >= at_least)).await;
        matches!(arrived, Ok(Ok(_)))
    }

    /// `document` signed with this node's writer key, when it has one.
    pub fn sign(&self, document: Versioned) -> Versioned {
        match &self.documents.signing {
            Some(key) => {
                let signature = key.sign(document.generation, &document.sha256, document.size());
                document.signed(Some(signature.into()))
            }
            None => document,
        }
    }

    /// Whether `signature` is a writer's over a document of `generation`, `sha256` and `size`;
    /// with no writer key configured, any (documents are then authenticated by the cluster
    /// key's HMAC alone).
    pub fn writer_signed(
        &self,
        generation: u64,
        sha256: &str,
        size: u64,
        signature: Option<&str>,
    ) -> bool {
        let keys = &self.documents.verify;
        !keys.required() || signature.is_some_and(|s| keys.verify(generation, sha256, size, s))
    }

    /// Puts `document` in force (after the node reloaded with it).
    pub fn applied(&self, document: Versioned) {
        let generation = document.generation;
        record_generation(generation);
        let before = self.document.load_full();
        if before.generation != generation {
            self.previous.store(Arc::new(Some((*before).clone())));
        }
        // The document first: whoever sees the generation (`generation()`, `caught_up`) then
        // reads it.
        self.document.store(std::sync::Arc::new(document));
        self.generation.store(generation, Ordering::Release);
        self.applied_generations.send_replace(generation);
        if let Ok(mut r) = self.refused.lock() {
            *r = None;
        }
    }

    /// Records that `refused` was not applied here.
    pub fn refuse(&self, refused: Refused) {
        metrics::counter!("meshlb_config_documents_refused_total").increment(1);
        if let Ok(mut r) = self.refused.lock() {
            *r = Some(refused);
        }
    }

    pub fn refused(&self) -> Option<Refused> {
        self.refused.lock().ok().and_then(|r| r.clone())
    }
}

fn record_generation(generation: u64) {
    metrics::gauge!("meshlb_config_generation").set(generation as f64);
}
