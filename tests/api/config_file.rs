//! The file the primary writes: the generation in force with the one before kept, valid for
//! `meshlb check`, and `meshlb config diff` and `push` against it.

use std::process::Command;

use serde_json::{json, Value};

use super::world::Primary;

pub fn the_file_holds_the_generation_in_force_and_keeps_the_one_before(w: &mut Primary) {
    let text = std::fs::read_to_string(&w.config).expect("config");
    assert!(text.contains("www.example.com"), "{text}");
    assert!(w.dir.path().join("meshlb.toml.previous").exists());
    let sidecar = w.dir.path().join("meshlb.toml.generation");
    let sidecar: Value =
        serde_json::from_str(&std::fs::read_to_string(sidecar).expect("generation")).expect("json");
    assert_eq!(sidecar["generation"], json!(w.generation()), "{sidecar:#}");
}

pub fn the_written_file_passes_meshlb_check(w: &mut Primary) {
    let check = Command::new(env!("CARGO_BIN_EXE_meshlb"))
        .args(["check", w.config.to_str().unwrap()])
        .output()
        .expect("check");
    let stderr = String::from_utf8_lossy(&check.stderr);
    assert!(check.status.success(), "{stderr}");
}

pub fn meshlb_config_diff_shows_what_a_push_would_change(w: &mut Primary) {
    let (next, _) = w.edited_config();
    let (code, out, _) = w.cli(&["config", "diff", next.to_str().unwrap()]);
    assert_eq!(code, Some(1), "a difference: {out}");
    assert!(out.contains("+description = \"Edited monitor\""), "{out}");
}

pub fn a_config_push_based_on_a_stale_generation_is_refused_409(w: &mut Primary) {
    let (next, _) = w.edited_config();
    let next = next.to_str().unwrap();
    let (code, out, err) = w.cli(&["config", "push", next, "--if-match", "1"]);
    assert_ne!(code, Some(0), "a stale push is refused: {out}");
    assert!(err.contains("409"), "{err}");
}

pub fn meshlb_config_push_writes_the_file_verbatim(w: &mut Primary) {
    let original = w.dir.path().join("original.toml");
    std::fs::copy(&w.config, &original).expect("copy");
    let (next, edited) = w.edited_config();
    let next = next.to_str().unwrap();
    let (code, out, err) = w.cli(&["config", "push", next]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("pushed: generation"), "{out}");
    let text = std::fs::read_to_string(&w.config).expect("config");
    assert_eq!(text, edited, "pushed verbatim");
    assert_eq!(
        w.cli(&["config", "diff", next]).0,
        Some(0),
        "nothing left to push"
    );
    // Put the monitor's description back for the trials after this one.
    let (code, _, err) = w.cli(&["config", "push", original.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
}

impl Primary {
    /// The file in force with the monitor's description edited, written beside it.
    fn edited_config(&self) -> (std::path::PathBuf, String) {
        let edited = std::fs::read_to_string(&self.config)
            .expect("config")
            .replace("Login page monitor", "Edited monitor");
        assert!(edited.contains("Edited monitor"), "{edited}");
        let next = self.dir.path().join("next.toml");
        std::fs::write(&next, &edited).expect("next");
        (next, edited)
    }
}
