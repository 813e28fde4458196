//! The config task's side of the control plane, the same for every node role: a reload of the
//! file (SIGHUP, `--watch-config`, `POST /-/reload`), an API write on the primary, and a
//! generation fetched by a follower each become one call of the node's own [`Reload`], and
//! each is persisted, put in force or refused here, in one place (docs/api.md#one-config-for-the-mesh).
//!
//! - On the primary, a changed file or an accepted write is the next generation, recorded
//!   beside the file (`store.rs`) and announced in gossip.
//! - A follower's file is the mesh's: a reload by hand is refused (change it through the
//!   primary), and a fetched generation is validated, persisted and served, or refused with
//!   its errors gossiped (`gossip.rs`).
//! - A standalone node reloads its own file.

use std::future::Future;
use std::sync::Arc;

use super::follower::Fetched;
use super::writes::{code, FieldError, Refusal, WriteRequest, Written};
use super::{Announcement, ConfigRole, ConfigStore, ControlPlane, Refused, Side, Versioned};
use crate::reload::{self, Outcome};

/// Why a node running the mesh's config refuses a reload of its file by hand.
pub const FOLLOWER_REFUSES_FILE: &str = "this node runs the mesh's config (--config-from-mesh or --config-store): change it through the API (the config primary's, or any store-connected aggregator's)";

/// A node's own way of putting a config text in force: the aggregator rebuilds its
/// frontends and has the tally adopt the generation, the prober replaces its probe targets.
pub trait Reload {
    /// What is in force now, as the outcome of a reload refused for `errors` before it was
    /// tried.
    fn refused(&self, errors: Vec<String>) -> Outcome;

    /// Validates `text` and builds everything that serves it; then runs `persist`, and only
    /// if that succeeds puts the new config in force. Anything that fails leaves the running
    /// config in force, untouched, and the outcome says why. Logs and counts the outcome.
    fn reload_text(
        &mut self,
        why: &str,
        text: &str,
        persist: impl FnOnce() -> Result<(), super::store::StoreError> + Send,
    ) -> impl Future<Output = Outcome> + Send;
}

/// The node's config could not be opened at start.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Store(#[from] super::store::StoreError),
    #[error("cannot read {path}: {error}")]
    Read { path: String, error: std::io::Error },
}

/// The config task's state: the node's copy on disk and the control plane.
pub struct ConfigProtocol {
    pub store: ConfigStore,
    pub plane: Arc<ControlPlane>,
    /// The admin API URL a primary announces for fetches (none on other roles).
    announce_url: Option<String>,
    /// The admin listener's tokens and TLS, re-read with every file reload.
    credentials: Option<Arc<crate::credentials::AdminCredentials>>,
    /// The config store, where a store-connected node's writes go.
    store_link: Option<Arc<super::etcd::StoreLink>>,
    /// The writer to tell at once, in the next publish, that this node runs a generation it
    /// fetched (`Fetched::tell`).
    tell: std::sync::Mutex<Option<std::net::SocketAddr>>,
}

impl ConfigProtocol {
    /// Opens the node's config at `path` for `role`: the document it starts with, and on the
    /// primary the receiving end of the API's writes.
    pub fn open(
        path: &std::path::Path,
        settings: &super::ControlSettings,
    ) -> Result<
        (
            ConfigProtocol,
            Option<tokio::sync::mpsc::Receiver<WriteRequest>>,
        ),
        OpenError,
    > {
        let role = settings.role;
        let store = ConfigStore::new(path);
        let document = match role {
            ConfigRole::Primary => store.open(Side::Primary)?,
            ConfigRole::Follower | ConfigRole::Store => store.open(Side::Follower)?,
            ConfigRole::Standalone => {
                let text = std::fs::read_to_string(path).map_err(|error| OpenError::Read {
                    path: path.display().to_string(),
                    error,
                })?;
                let opened = store.open(Side::Follower).ok();
                match opened.filter(|o| *o.text == *text) {
                    Some(o) => o,
                    None => Versioned::new(0, &text),
                }
            }
        };
        let (mut plane, writes) = ControlPlane::new(
            role,
            document,
            settings.key.clone(),
            settings.max_document_bytes.max(1),
            settings.documents.clone(),
        );
        if let Some(store) = &settings.store {
            plane.catch_up = store.request_timeout;
        }
        let protocol = ConfigProtocol {
            store,
            plane: Arc::new(plane),
            announce_url: None,
            credentials: None,
            store_link: None,
            tell: std::sync::Mutex::new(None),
        };
        Ok((protocol, writes))
    }

    /// Announces `url` for fetches of the document (known once the listener is bound): on a
    /// writer, and on a follower, which relays what it holds.
    pub fn announcing(self, url: String) -> ConfigProtocol {
        let announce_url = (self.plane.role != ConfigRole::Standalone).then_some(url);
        ConfigProtocol {
            announce_url,
            ..self
        }
    }

    /// Writes through `link` (a store-connected node's API writes).
    pub fn with_store(self, link: Arc<super::etcd::StoreLink>) -> ConfigProtocol {
        ConfigProtocol {
            store_link: Some(link),
            ..self
        }
    }

    /// Re-reads `credentials` (tokens, TLS files) with every reload of the file.
    pub fn with_credentials(
        self,
        credentials: Arc<crate::credentials::AdminCredentials>,
    ) -> ConfigProtocol {
        ConfigProtocol {
            credentials: Some(credentials),
            ..self
        }
    }

    /// The text of the document in force.
    pub fn text(&self) -> String {
        self.plane.document.load().text.to_string()
    }

    /// This node's announcement of the generation in force, when it serves one: always on a
    /// writer, on a follower once it holds a generation its writer signed.
    pub fn announcement(&self) -> Option<String> {
        let url = self.announce_url.as_ref()?;
        let d = self.plane.document.load();
        let relay = !self.plane.role.takes_writes();
        let signed =
            self.plane
                .writer_signed(d.generation, &d.sha256, d.size(), d.signature.as_deref());
        if relay && (d.generation == 0 || !signed) {
            return None;
        }
        Some(
            Announcement {
                generation: d.generation,
                sha256: d.sha256.clone(),
                size: d.size(),
                url: url.clone(),
                signature: d.signature.as_deref().map(str::to_string),
            }
            .to_string(),
        )
    }

    /// Says in gossip which generation this node runs (and, on the primary, announces it).
    pub async fn publish(&self, handle: &chitchat::ChitchatHandle) {
        super::gossip::publish(handle, &self.plane, self.announcement()).await;
        // A gossip round with the writer now, rather than the epidemic's few rounds: the
        // writer (its API's `/members`, the console) sees the generation in force here within
        // a round trip.
        let tell = self.tell.lock().ok().and_then(|mut t| t.take());
        if let Some(writer) = tell {
            if let Err(e) = handle.gossip(writer) {
                tracing::debug!(error = %e, "telling the config writer");
            }
        }
    }

    /// A reload of the file: on the primary, a changed file is the next generation; a
    /// follower's file is the mesh's and is not reloaded by hand.
    pub async fn file_reload(&self, node: &mut impl Reload, why: &str) -> Outcome {
        if let Some(credentials) = &self.credentials {
            credentials.reload();
        }
        let plane = &self.plane;
        let path = self.store.path();
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) => {
                let file = path.display();
                return refuse(node, why, format!("{file}: cannot read the config: {e}"));
            }
        };
        if plane.role.file_is_kept() && *text != *plane.document.load().text {
            return refuse(node, why, FOLLOWER_REFUSES_FILE.to_string());
        }
        let outcome = node.reload_text(why, &text, || Ok(())).await;
        // The text in force reloaded (files it names changed, or a prober rebuilt its targets)
        // is no new generation: a follower keeps the mesh's, the primary makes none.
        if outcome.reloaded && *text != *plane.document.load().text {
            let next = Versioned::new(plane.generation() + 1, &text);
            let next = match plane.role {
                ConfigRole::Primary => {
                    let next = plane.sign(next);
                    if let Err(e) =
                        self.store
                            .record(next.generation, &next.sha256, next.signature.as_deref())
                    {
                        tracing::error!(error = %e, "recording the config generation");
                    }
                    next
                }
                ConfigRole::Follower | ConfigRole::Standalone | ConfigRole::Store => Versioned {
                    generation: 0,
                    ..next
                },
            };
            plane.applied(next);
        }
        outcome
    }

    /// An API write on the primary: the next generation, persisted, then served. Answers the
    /// writer.
    pub async fn write(&self, node: &mut impl Reload, write: WriteRequest) {
        let result = match &self.store_link {
            Some(link) => {
                self.store_write(node, link, &write.why, write.base, &write.text)
                    .await
            }
            None => {
                self.primary_write(node, &write.why, write.base, &write.text)
                    .await
            }
        };
        let _ = write.reply.send(result);
    }

    /// An API write on a store-connected node: an etcd transaction on the revision the write
    /// was based on; once etcd took it, the generation is the mesh's, and this node applies it
    /// (a node that cannot build it refuses it here, as a follower would, and says so).
    async fn store_write(
        &self,
        node: &mut impl Reload,
        link: &super::etcd::StoreLink,
        why: &str,
        base: u64,
        text: &str,
    ) -> Result<Written, Refusal> {
        let plane = &self.plane;
        let current = plane.document.load_full();
        if base == current.generation
            && super::signing::sha256_hex(text.as_bytes()) == current.sha256
        {
            return Ok(Written {
                generation: current.generation,
                changed: false,
            });
        }
        let revision = match link.write(base, text).await {
            Ok(super::etcd::Put::Done { revision }) => revision,
            Ok(super::etcd::Put::Conflict { current }) => {
                let now = current.as_ref().map_or(0, |kv| kv.mod_revision);
                // Another aggregator wrote first and this one's watch has not brought it yet:
                // take it now, so that the API's retry (a write without If-Match) edits it.
                if let Some(kv) = current.filter(|kv| kv.mod_revision > plane.generation()) {
                    if let Ok(text) = String::from_utf8(kv.value) {
                        let why =
                            format!("generation {now} from {}", super::etcd::sync::STORE_SOURCE);
                        self.apply_stored(node, &why, Versioned::new(now, &text))
                            .await;
                    }
                }
                return Err(Refusal::stale(base, now));
            }
            Err(e) => {
                return Err(Refusal::new(
                    http::StatusCode::SERVICE_UNAVAILABLE,
                    code::UNAVAILABLE,
                    format!(
                    "the write was not taken: {e}; nodes serve the generation they have, try again"
                ),
                ))
            }
        };
        tracing::info!(
            why,
            generation = revision,
            "config generation {revision} ({why}), in the config store"
        );
        self.apply_stored(node, why, Versioned::new(revision, text))
            .await;
        Ok(Written {
            generation: revision,
            changed: true,
        })
    }

    /// Puts a generation the store holds in force here, signed with this writer's key and kept
    /// on disk, unless a newer one is in force; a node that cannot build it refuses it, as a
    /// follower would.
    async fn apply_stored(&self, node: &mut impl Reload, why: &str, next: Versioned) {
        let plane = &self.plane;
        if next.generation <= plane.generation() {
            return;
        }
        let next = plane.sign(next);
        let outcome = node
            .reload_text(why, &next.text, || self.store.commit(&next, false))
            .await;
        if outcome.reloaded || outcome.unchanged {
            plane.applied(next);
        } else {
            plane.refuse(Refused {
                generation: next.generation,
                sha256: next.sha256.clone(),
                errors: outcome.errors,
            });
        }
    }

    async fn primary_write(
        &self,
        node: &mut impl Reload,
        why: &str,
        base: u64,
        text: &str,
    ) -> Result<Written, Refusal> {
        let plane = &self.plane;
        let current = plane.generation();
        if base != current {
            return Err(Refusal::stale(base, current));
        }
        let next = plane.sign(Versioned::new(current + 1, text));
        if next.sha256 == plane.document.load().sha256 {
            return Ok(Written {
                generation: current,
                changed: false,
            });
        }
        let outcome = node
            .reload_text(why, text, || self.store.commit(&next, true))
            .await;
        if outcome.reloaded || outcome.unchanged {
            plane.applied(next.clone());
            tracing::info!(
                why,
                generation = next.generation,
                "config generation {} ({why})",
                next.generation
            );
            return Ok(Written {
                generation: next.generation,
                changed: true,
            });
        }
        Err(Refusal {
            errors: outcome
                .errors
                .iter()
                .map(|e| FieldError {
                    path: String::new(),
                    reason: e.clone(),
                })
                .collect(),
            ..Refusal::new(
                http::StatusCode::UNPROCESSABLE_ENTITY,
                code::INVALID,
                "the primary could not build the generation: nothing was changed",
            )
        })
    }

    /// A generation fetched from the primary: validated, persisted, served — or refused here,
    /// and the refusal kept for gossip. Tells the follower task once done.
    pub async fn follow(&self, node: &mut impl Reload, fetched: Fetched) {
        let plane = &self.plane;
        // From the store, a writer signs what it takes; a fetched document comes signed.
        let doc = match fetched.document.signature {
            Some(_) => fetched.document,
            None => plane.sign(fetched.document),
        };
        if doc.generation > plane.generation() {
            let why = format!("generation {} from {}", doc.generation, fetched.primary);
            let outcome = node
                .reload_text(&why, &doc.text, || self.store.commit(&doc, false))
                .await;
            if outcome.reloaded || outcome.unchanged {
                plane.applied(doc);
            } else {
                plane.refuse(Refused {
                    generation: doc.generation,
                    sha256: doc.sha256.clone(),
                    errors: outcome.errors,
                });
            }
            if let Ok(mut tell) = self.tell.lock() {
                *tell = fetched.tell;
            }
        }
        let _ = fetched.done.send(());
    }
}

/// A reload refused before it was tried: logged, counted, answered.
fn refuse(node: &impl Reload, why: &str, error: String) -> Outcome {
    tracing::warn!(why, error = %error, "config reload ({why}) refused: {error}");
    reload::record(false);
    reload::count(false);
    node.refused(vec![error])
}
