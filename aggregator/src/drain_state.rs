//! The drain decisions an aggregator publishes, kept in `drains.json` under `--state-dir`
//! across restarts. Other aggregators keep a drain alive while one of them runs
//! (`drains::adopt`), but a lone aggregator that restarts — an upgrade, a crash — would forget
//! its drains and send traffic back to an endpoint taken out for maintenance.

use std::path::{Path, PathBuf};

use lb_core::config::Config;
use mesh::keys::DrainDecision;
use serde::{Deserialize, Serialize};

use crate::drains::{newest, Decisions};

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StateFile {
    drains: Vec<DrainDecision>,
}

#[derive(Debug)]
pub struct DrainState {
    path: PathBuf,
}

/// What a state file held: the decisions about endpoints the config knows, and a note for
/// each one it no longer does.
#[derive(Debug, Default)]
pub struct Loaded {
    pub decisions: Decisions,
    pub ignored: Vec<String>,
}

/// The drain state file cannot be used; each names the file (or `--state-dir`).
#[derive(Debug, thiserror::Error)]
pub enum StateFileError {
    #[error("--state-dir {}: cannot create it: {error}", dir.display())]
    Dir { dir: PathBuf, error: std::io::Error },
    #[error("{}: cannot read: {error}", path.display())]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{}: line {line} column {column}: {reason} (fix or remove the file)", path.display())]
    Parse {
        path: PathBuf,
        line: usize,
        column: usize,
        reason: String,
    },
    #[error("{}: cannot write: {error}", path.display())]
    Write {
        path: PathBuf,
        error: std::io::Error,
    },
}

impl DrainState {
    /// The state file in `dir` (created when missing).
    pub fn in_dir(dir: &Path) -> Result<DrainState, StateFileError> {
        std::fs::create_dir_all(dir).map_err(|error| StateFileError::Dir {
            dir: dir.to_path_buf(),
            error,
        })?;
        Ok(DrainState {
            path: dir.join("drains.json"),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The saved decisions; none when there is no file yet. A file that cannot be read or
    /// parsed is an error naming it, so that drains are never dropped without a word.
    pub fn load(&self, config: &Config) -> Result<Loaded, StateFileError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Loaded::default()),
            Err(error) => {
                return Err(StateFileError::Read {
                    path: self.path.clone(),
                    error,
                })
            }
        };
        let file: StateFile = serde_json::from_str(&text).map_err(|e| StateFileError::Parse {
            path: self.path.clone(),
            line: e.line(),
            column: e.column(),
            reason: e.to_string(),
        })?;
        let decisions = newest(config, file.drains.iter());
        let ignored = file
            .drains
            .iter()
            .filter(|d| {
                !decisions
                    .values()
                    .any(|k| k.pool == d.pool && k.endpoint == d.endpoint)
            })
            .map(|d| {
                format!(
                    "{}: the config has no endpoint `{}` in pool `{}`; its drain decision is dropped",
                    self.path.display(),
                    d.endpoint,
                    d.pool
                )
            })
            .collect();
        Ok(Loaded { decisions, ignored })
    }

    /// Writes the decisions (to a temporary file renamed over the old one, so a crash
    /// mid-write leaves the previous state).
    pub fn save(&self, decisions: &[DrainDecision]) -> Result<(), StateFileError> {
        let file = StateFile {
            drains: decisions.to_vec(),
        };
        let write = |error| StateFileError::Write {
            path: self.path.clone(),
            error,
        };
        let text = serde_json::to_string_pretty(&file).map_err(|e| write(e.into()))?;
        let tmp = self.path.with_extension("json.tmp");
        std::fs::write(&tmp, text + "\n")
            .and_then(|()| std::fs::rename(&tmp, &self.path))
            .map_err(write)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drains::tests::config;

    fn dir(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("meshlb-drain-state-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn d(endpoint: &str, draining: bool) -> DrainDecision {
        DrainDecision {
            pool: "web".into(),
            endpoint: endpoint.into(),
            draining,
            since: 100,
            at_ms: 100_000,
        }
    }

    #[test]
    fn decisions_come_back_after_a_restart() {
        let c = config();
        let d0 = dir("roundtrip");
        let st = DrainState::in_dir(&d0).expect("dir");
        assert!(st.load(&c).expect("no file yet").decisions.is_empty());
        st.save(&[d("a", true), d("b", false), d("gone", true)])
            .expect("save");
        let loaded = DrainState::in_dir(&d0)
            .expect("dir")
            .load(&c)
            .expect("load");
        assert_eq!(loaded.decisions.len(), 2);
        assert!(loaded.decisions.values().any(|x| *x == d("a", true)));
        assert_eq!(loaded.ignored.len(), 1);
        assert!(loaded.ignored[0].contains("`gone`"), "{:?}", loaded.ignored);
        let _ = std::fs::remove_dir_all(&d0);
    }

    #[test]
    fn an_error_names_its_cause_once() {
        let d0 = dir("blocked");
        std::fs::create_dir_all(&d0).expect("dir");
        let file = d0.join("file");
        std::fs::write(&file, "x").expect("file");
        let Err(e) = DrainState::in_dir(&file.join("sub")) else {
            panic!("a file is in the way");
        };
        let text = e.to_string();
        assert!(
            text.starts_with("--state-dir ") && text.contains("cannot create it: "),
            "{text}"
        );
        // The message is whole, so no cause repeats it when the binary prints a chain.
        assert!(std::error::Error::source(&e).is_none());
    }

    #[test]
    fn a_damaged_file_is_an_error_naming_it() {
        let d0 = dir("damaged");
        let st = DrainState::in_dir(&d0).expect("dir");
        std::fs::write(st.path(), "{\"drains\": [{\"pool\": 1}]}").expect("write");
        let e = st.load(&config()).expect_err("damaged").to_string();
        assert!(e.contains("drains.json") && e.contains("line 1"), "{e}");
        let _ = std::fs::remove_dir_all(&d0);
    }
}
