//! The control plane (docs/api.md): one aggregator is the config primary (`--config-primary`);
//! the API's writes go to it alone, each accepted write is a new config generation, persisted
//! and announced in gossip; every node started with `--config-from-mesh` fetches the
//! announced document, checks it, keeps it on disk and reloads — DNS's primary and
//! secondaries, with gossip as the NOTIFY and an authenticated HTTP fetch as the transfer.
//!
//! - [`announce`]: the primary's gossip announcement, and which primary a node follows.
//! - [`signing`]: fetches and documents authenticated with the cluster key.
//! - [`store`]: a node's copy on disk with its generation, written atomically.
//! - [`follower`]: the task that watches gossip and fetches new generations.
//! - [`writes`]: the API's writes, on their way to the task that owns the config.

pub mod announce;
pub mod follower;
pub mod signing;
pub mod store;
pub mod writes;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use arc_swap::ArcSwap;

pub use announce::{Announcement, Primary};
pub use signing::ControlKey;
pub use store::{ConfigStore, Side, Versioned};

/// Which part this node plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `--config-primary`: takes the API's writes and serves the document to the mesh.
    Primary,
    /// `--config-from-mesh`: runs the primary's document.
    Follower,
    /// Neither: runs its own file (and refuses the API's writes).
    Standalone,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Primary => "primary",
            Role::Follower => "follower",
            Role::Standalone => "standalone",
        }
    }
}

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
    pub role: Role,
    /// The document in force, with its generation.
    pub document: ArcSwap<Versioned>,
    /// The primary seen in gossip (none: no live node announces one).
    pub primary: ArcSwap<Option<Primary>>,
    /// The newest generation this node refused, if it refused one since it last applied.
    pub refused: Mutex<Option<Refused>>,
    /// Where the API's writes go (set on the primary).
    pub writes: OnceLock<tokio::sync::mpsc::Sender<writes::WriteRequest>>,
    /// The cluster-derived key of fetches and documents.
    pub key: ControlKey,
    pub max_document_bytes: usize,
    generation: AtomicU64,
}

impl ControlPlane {
    pub fn new(
        role: Role,
        document: Versioned,
        key: ControlKey,
        max_document_bytes: usize,
    ) -> ControlPlane {
        let generation = AtomicU64::new(document.generation);
        record_generation(document.generation);
        ControlPlane {
            role,
            document: ArcSwap::from_pointee(document),
            primary: ArcSwap::from_pointee(None),
            refused: Mutex::new(None),
            writes: OnceLock::new(),
            key,
            max_document_bytes,
            generation,
        }
    }

    /// The generation in force.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Puts `document` in force (after the node reloaded with it).
    pub fn applied(&self, document: Versioned) {
        self.generation
            .store(document.generation, Ordering::Release);
        record_generation(document.generation);
        self.document.store(std::sync::Arc::new(document));
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
