//! Validation: defaults, every rule of docs/design.md#configuration-validation, and that all errors come at once with
//! the file, the field path and the reason; one module per part of the config, sharing the
//! parse and error helpers below (also used by `layer4_tests.rs` and `probe_zone_tests.rs`).

mod affinity_and_rules;
mod defaults;
mod error_paths;
mod fallback_pools;
mod monitor_groups;
mod notifications;
mod origin_tls;
mod private_networks;
mod zones;

use super::*;
use crate::regions_table::RegionsTable;

fn regions() -> RegionsTable {
    RegionsTable::embedded().expect("embedded regions")
}

pub(super) fn parse(text: &str) -> Result<Config, ConfigErrors> {
    Config::parse("meshlb.toml", text, &regions())
}

/// The errors as "path: reason" lines.
pub(super) fn errors(text: &str) -> Vec<String> {
    match parse(text) {
        Ok(_) => panic!("expected errors"),
        Err(e) => {
            e.0.iter()
                .map(|e| {
                    assert_eq!(e.file, "meshlb.toml");
                    format!("{}: {}", e.path, e.reason)
                })
                .collect()
        }
    }
}

#[track_caller]
pub(super) fn has(errors: &[String], needle: &str) {
    assert!(
        errors.iter().any(|e| e.contains(needle)),
        "no error containing {needle:?} in {errors:#?}"
    );
}

const MINIMAL: &str = r#"
[[monitors]]
name = "m"

[[pools]]
name = "p"
monitor = "m"
origins = [{ name = "e", address = "192.0.2.1" }]

[[load_balancers]]
name = "WWW.Example.Test."
default_pools = ["p"]
"#;
