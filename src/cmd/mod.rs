//! One module per subcommand.

mod admin_client;
pub mod aggregator;
pub mod api_cli;
pub mod check;
mod control_args;
pub mod demo;
pub mod explain;
mod mesh_args;
mod node_args;
pub mod probe;
pub mod prober;
mod record_args;
pub mod regions;
mod serve;
pub mod simulate;
pub mod status;

use std::path::Path;

use lb_core::{ConfigErrors, RegionsTable};

/// Loads a config, printing every error (file, field, reason) to stderr when it is invalid.
pub fn load_config(path: &Path, regions: &RegionsTable) -> Option<lb_core::config::Config> {
    match lb_core::config::Config::load(path, regions) {
        Ok(c) => Some(c),
        Err(errors) => {
            for e in &errors.0 {
                eprintln!("{e}");
            }
            None
        }
    }
}

/// The embedded table, or `--regions FILE`.
pub fn load_regions(path: Option<&Path>) -> Result<RegionsTable, String> {
    match path {
        None => RegionsTable::embedded().map_err(|e| e.to_string()),
        Some(p) => {
            let file = p.display().to_string();
            let text = std::fs::read_to_string(p)
                .map_err(|e| format!("{file}: cannot read the regions file: {e}"))?;
            RegionsTable::parse(&file, &text).map_err(|e: ConfigErrors| e.to_string())
        }
    }
}

/// A token from its file, else from the environment variable `env`. A file that its group or
/// others may read is warned about, as ssh does for keys: the token grants the admin API.
pub fn read_token(file: Option<&std::path::PathBuf>, env: &str) -> anyhow::Result<Option<String>> {
    Ok(match file {
        Some(f) => {
            let text = std::fs::read_to_string(f)
                .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", f.display()))?;
            if let Some(mode) = open_mode(f) {
                tracing::warn!(
                    file = %f.display(),
                    mode = format!("{mode:o}"),
                    "the token file {} can be read by more than its owner (mode {mode:o}): chmod 600 it",
                    f.display()
                );
            }
            Some(text.trim().to_string())
        }
        None => std::env::var(env).ok(),
    })
}

/// The permission bits of `file` when its group or others may read or write it.
fn open_mode(file: &std::path::Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(file).ok()?.permissions().mode() & 0o777;
    (mode & 0o077 != 0).then_some(mode)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_token_file_beyond_its_owner_is_told_apart() {
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("token");
        std::fs::write(&file, "t").expect("write");
        for (mode, open) in [
            (0o600, false),
            (0o400, false),
            (0o640, true),
            (0o644, true),
            (0o606, true),
        ] {
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).expect("chmod");
            assert_eq!(super::open_mode(&file).is_some(), open, "{mode:o}");
        }
    }
}
