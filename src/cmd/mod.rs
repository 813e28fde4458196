//! One module per subcommand.

mod admin_client;
pub mod aggregator;
pub mod api_cli;
pub mod check;
pub mod demo;
pub mod explain;
pub mod probe;
pub mod prober;
pub mod regions;
mod serve;
pub mod simulate;
pub mod status;
mod stopped;
pub mod tunnel;

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
