//! The repository's own files, for the tests that read its text (tests/doc_references.rs,
//! tests/metrics_catalogue.rs): every file below a folder whose name ends with an extension,
//! leaving out the folders a test says are not the project's own.

use std::path::{Path, PathBuf};

/// Every file below `dir` ending in `ext`, in no particular order; a folder is entered only
/// when `enter` says so (given its path).
pub fn repo_files(dir: &Path, ext: &str, enter: &dyn Fn(&Path) -> bool) -> Vec<PathBuf> {
    let mut out = Vec::new();
    walk(dir, ext, enter, &mut out);
    out
}

fn walk(dir: &Path, ext: &str, enter: &dyn Fn(&Path) -> bool, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            if enter(&p) {
                walk(&p, ext, enter, out);
            }
        } else if p.to_string_lossy().ends_with(ext) {
            out.push(p);
        }
    }
}
