//! Scratch directories that remove themselves.

/// A fresh scratch directory `meshlb-{name}-*` under the temp dir, holding a cluster key
/// file; returns (directory, key file). The directory goes when the guard drops.
pub fn scratch_dir_with_key(name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix(&format!("meshlb-{name}-"))
        .tempdir()
        .expect("scratch dir");
    let key = dir.path().join("key");
    std::fs::write(&key, format!("the meshlb {name} test cluster key")).expect("key");
    (dir, key)
}
