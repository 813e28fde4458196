//! A node's copy of the mesh config on disk: the file (`--config`) and, beside it,
//! `<file>.generation` saying which generation it is (`{"generation": N, "sha256": "..."}`).
//! Every write is atomic (a temporary file in the same directory, synced, renamed over), and
//! the primary keeps the generation it replaces as `<file>.previous`.
//!
//! Which generation a file is, at start: the one its `.generation` names when the hashes
//! match. A file edited by hand (the hashes differ) is, on the primary, the generation after
//! the recorded one; on a follower, generation 0, so that the primary's replaces it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::signing::sha256_hex;

/// A document and its generation, with the writer's signature when it has one
/// (`writer_key.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versioned {
    pub generation: u64,
    pub sha256: String,
    pub text: Arc<str>,
    /// The Ed25519 signature (base64) over generation, hash and size.
    pub signature: Option<Arc<str>>,
}

impl Versioned {
    pub fn new(generation: u64, text: &str) -> Versioned {
        Versioned {
            generation,
            sha256: sha256_hex(text.as_bytes()),
            text: text.into(),
            signature: None,
        }
    }

    pub fn signed(self, signature: Option<Arc<str>>) -> Versioned {
        Versioned { signature, ..self }
    }

    pub fn size(&self) -> u64 {
        self.text.len() as u64
    }
}

/// Which side of the control plane the store is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// `--config-primary`: its file is the mesh's config.
    Primary,
    /// `--config-from-mesh`: its file is a copy of the primary's.
    Follower,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{path}: {error}")]
    Io { path: String, error: std::io::Error },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |error| StoreError::Io {
        path: path.display().to_string(),
        error,
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Sidecar {
    generation: u64,
    sha256: String,
    /// The writer's signature of this generation, so that the node can relay it after a
    /// restart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    signature: Option<String>,
}

/// The config file of a node and its generation record.
#[derive(Debug, Clone)]
pub struct ConfigStore {
    path: PathBuf,
}

fn beside(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

/// Writes `bytes` to `path` atomically: readers see the old content or the new, never a part.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io(path))?;
    tmp.write_all(bytes).map_err(io(path))?;
    tmp.as_file().sync_all().map_err(io(path))?;
    tmp.persist(path).map_err(|e| StoreError::Io {
        path: path.display().to_string(),
        error: e.error,
    })?;
    // The rename is durable once the directory is.
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

impl ConfigStore {
    pub fn new(path: &Path) -> ConfigStore {
        ConfigStore {
            path: path.to_path_buf(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `<file>.generation`.
    pub fn sidecar_path(&self) -> PathBuf {
        beside(&self.path, ".generation")
    }

    /// `<file>.previous`: the generation before the one in the file (primary only).
    pub fn previous_path(&self) -> PathBuf {
        beside(&self.path, ".previous")
    }

    fn sidecar(&self) -> Option<Sidecar> {
        let text = std::fs::read_to_string(self.sidecar_path()).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// What the file holds now, with its generation (see the module's comment). A follower
    /// without a file yet starts from an empty config at generation 0.
    pub fn open(&self, side: Side) -> Result<Versioned, StoreError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && side == Side::Follower => {
                String::new()
            }
            Err(e) => return Err(io(&self.path)(e)),
        };
        let here = Versioned::new(0, &text);
        let recorded = self.sidecar();
        let (generation, signature) = match (&recorded, side) {
            (Some(r), _) if r.sha256 == here.sha256 => {
                (r.generation, r.signature.as_deref().map(Arc::from))
            }
            (r, Side::Primary) => {
                let next = r.as_ref().map_or(1, |r| r.generation + 1);
                self.record(next, &here.sha256, None)?;
                (next, None)
            }
            (_, Side::Follower) => (0, None),
        };
        Ok(Versioned {
            generation,
            signature,
            ..here
        })
    }

    /// Records that the file holds `generation` (its text already written), signed with
    /// `signature` when it is.
    pub fn record(
        &self,
        generation: u64,
        sha256: &str,
        signature: Option<&str>,
    ) -> Result<(), StoreError> {
        let body = serde_json::to_vec(&Sidecar {
            generation,
            sha256: sha256.to_string(),
            signature: signature.map(str::to_string),
        })
        .unwrap_or_default();
        write_atomic(&self.sidecar_path(), &body)
    }

    /// Writes `next` as the file's content and generation; `keep_previous` first saves the
    /// content it replaces as `<file>.previous`.
    pub fn commit(&self, next: &Versioned, keep_previous: bool) -> Result<(), StoreError> {
        if keep_previous {
            if let Ok(old) = std::fs::read(&self.path) {
                write_atomic(&self.previous_path(), &old)?;
            }
        }
        write_atomic(&self.path, next.text.as_bytes())?;
        self.record(next.generation, &next.sha256, next.signature.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generations_survive_restarts_and_hand_edits_move_the_primary_on() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("meshlb.toml");
        std::fs::write(&path, "a = 1\n").expect("write");
        let store = ConfigStore::new(&path);
        assert_eq!(store.open(Side::Primary).expect("open").generation, 1);
        assert_eq!(store.open(Side::Primary).expect("reopen").generation, 1);
        store
            .commit(&Versioned::new(2, "a = 2\n"), true)
            .expect("commit");
        assert_eq!(std::fs::read_to_string(&path).expect("file"), "a = 2\n");
        assert_eq!(
            std::fs::read_to_string(store.previous_path()).expect("previous"),
            "a = 1\n"
        );
        assert_eq!(store.open(Side::Primary).expect("open").generation, 2);
        std::fs::write(&path, "a = 3\n").expect("hand edit");
        assert_eq!(store.open(Side::Primary).expect("edited").generation, 3);
        assert_eq!(store.open(Side::Follower).expect("follower").generation, 3);
        std::fs::write(&path, "a = 4\n").expect("edit a copy");
        assert_eq!(
            store.open(Side::Follower).expect("follower").generation,
            0,
            "a follower's edited copy is older than any primary's"
        );
    }

    #[test]
    fn a_follower_starts_without_a_file_and_a_primary_does_not() {
        let dir = tempfile::tempdir().expect("dir");
        let store = ConfigStore::new(&dir.path().join("meshlb.toml"));
        let first = store.open(Side::Follower).expect("follower");
        assert_eq!((first.generation, &*first.text), (0, ""));
        assert!(store.open(Side::Primary).is_err());
    }
}
