//! Every control-plane flag that `meshlb aggregator --help` and `meshlb prober --help` print
//! is in docs/api.md.

use std::process::Command;

pub fn every_control_plane_flag_is_documented() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/api.md"))
        .expect("docs/api.md");
    for role in ["aggregator", "prober"] {
        let out = Command::new(env!("CARGO_BIN_EXE_meshlb"))
            .args([role, "--help"])
            .output()
            .expect("help");
        let help = String::from_utf8_lossy(&out.stdout);
        let flags: Vec<&str> = help
            .split_whitespace()
            .filter(|w| {
                w.starts_with("--config-")
                    || *w == "--admin-read-token-file"
                    || *w == "--admin-body-timeout-ms"
            })
            .collect();
        assert!(flags.len() >= 3, "{role}: {help}");
        for flag in flags {
            let flag = flag.trim_end_matches(',');
            assert!(
                doc.contains(&format!("`{flag}")),
                "docs/api.md lacks {flag} ({role})"
            );
        }
    }
}
