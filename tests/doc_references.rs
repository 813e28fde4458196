//! Docs and comments that name a file of the repository, or a heading of one of its Markdown
//! files, name one that exists: every Markdown link in README.md and docs/, and every
//! repository path or Markdown heading written in those files and in the comments of the
//! Rust sources. A file moved or a heading renamed fails here instead of leaving a reader at
//! a dead end. And README.md's command table lists every command and verb `meshlb --help`
//! lists, and nothing else.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Directories whose files are not the project's own text.
const SKIPPED: &[&str] = &["target", "vendor", ".git", "node_modules", "fuzz/target"];

/// The top-level directories a repository path in prose starts with.
const TOP: &[&str] = &[
    "aggregator/",
    "lb-core/",
    "prober/",
    "mesh/",
    "node/",
    "src/",
    "tests/",
    "docs/",
    "bench/",
    "deploy/",
    "scripts/",
    "vendor/",
    "fuzz/",
    "tls/",
    ".ci/",
];

/// The extensions of the files prose names.
const EXTENSIONS: &[&str] = &[".rs", ".md", ".sh", ".toml", ".yml", ".yaml", ".json"];

/// Whether a folder holds the project's own text (not one of [`SKIPPED`]).
fn ours(dir: &Path) -> bool {
    let rel = dir
        .strip_prefix(root())
        .unwrap_or(dir)
        .to_string_lossy()
        .to_string();
    !SKIPPED
        .iter()
        .any(|s| rel == *s || rel.ends_with(&format!("/{s}")))
}

fn files(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    out.extend(test_support::repo_files::repo_files(dir, ext, &ours));
}

/// GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens, a
/// repeated heading numbered.
fn anchors(markdown: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let text = line.trim_start_matches('#').trim();
        let slug: String = text
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let n = seen.entry(slug.clone()).or_insert(0);
        out.insert(if *n == 0 {
            slug.clone()
        } else {
            format!("{slug}-{n}")
        });
        *n += 1;
    }
    out
}

/// Where a reference written in `from` may be: from the repository's root, beside `from`,
/// from `from`'s crate or its `src/`, or (a bare `*.md`) in docs/.
fn candidates(from: &Path, target: &str) -> Vec<PathBuf> {
    let mut out = vec![root().join(target)];
    if let Some(dir) = from.parent() {
        out.push(dir.join(target));
        let mut crate_dir = Some(dir);
        while let Some(d) = crate_dir {
            if d.join("Cargo.toml").exists() {
                out.push(d.join(target));
                out.push(d.join("src").join(target));
                break;
            }
            crate_dir = d.parent();
        }
    }
    if !target.contains('/') && target.ends_with(".md") {
        out.push(root().join("docs").join(target));
    }
    out
}

struct Checker {
    anchors: BTreeMap<PathBuf, BTreeSet<String>>,
    stale: Vec<String>,
}

impl Checker {
    fn anchors_of(&mut self, file: &Path) -> &BTreeSet<String> {
        self.anchors
            .entry(file.to_path_buf())
            .or_insert_with(|| anchors(&std::fs::read_to_string(file).unwrap_or_default()))
    }

    /// `target` (`path`, `path#anchor` or `#anchor`), written in `from` at `line`.
    fn check(&mut self, from: &Path, line: usize, target: &str) {
        let (path, anchor) = match target.split_once('#') {
            Some((p, a)) => (p, Some(a)),
            None => (target, None),
        };
        let file = if path.is_empty() {
            Some(from.to_path_buf())
        } else {
            candidates(from, path.trim_start_matches("./"))
                .into_iter()
                .find(|c| c.exists())
        };
        let at = format!(
            "{}:{line}",
            from.strip_prefix(root()).unwrap_or(from).display()
        );
        let Some(file) = file else {
            self.stale.push(format!("{at}: no file {path}"));
            return;
        };
        if let Some(anchor) = anchor.filter(|_| file.extension().is_some_and(|e| e == "md")) {
            if !self.anchors_of(&file).contains(anchor) {
                self.stale
                    .push(format!("{at}: no heading #{anchor} in {path}"));
            }
        }
    }
}

/// The Markdown links of a line: `[text](target)`.
fn links(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        if let Some(end) = rest.find(')') {
            out.push(rest[..end].trim());
            rest = &rest[end..];
        }
    }
    out
}

/// The repository paths a line of prose names: words ending in a known extension (an anchor
/// may follow) that hold a directory (from the root, the crate or the file's own) or name a
/// Markdown file's heading. A bare `guard.rs` is not read: it names a sibling by habit.
fn paths(line: &str) -> Vec<&str> {
    line.split(|c: char| !(c.is_alphanumeric() || "_./#-".contains(c)))
        .map(|w| w.trim_end_matches(['.', '-']))
        .filter(|w| {
            let file = w.split('#').next().unwrap_or("");
            // What a run writes (`target/...`) and placeholders (`DIR/drains.json`).
            let first = file.split('/').next().unwrap_or("");
            if first == "target"
                || (first.len() > 1 && first.chars().all(|c| c.is_ascii_uppercase()))
            {
                return false;
            }
            EXTENSIONS.iter().any(|e| file.ends_with(e))
                && !file.starts_with('/')
                && (TOP.iter().any(|t| file.starts_with(t))
                    || file.contains('/')
                    || (file.ends_with(".md") && w.contains('#')))
        })
        .collect()
}

fn is_external(target: &str) -> bool {
    target.contains("://") || target.starts_with("mailto:") || target.contains('{')
}

#[test]
fn every_file_and_heading_that_docs_and_comments_name_exists() {
    let mut checker = Checker {
        anchors: BTreeMap::new(),
        stale: Vec::new(),
    };
    let mut markdown = Vec::new();
    files(&root(), ".md", &mut markdown);
    for file in &markdown {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        let mut fenced = false;
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
            }
            for target in links(line) {
                if !is_external(target) && !target.is_empty() {
                    checker.check(file, n + 1, target);
                }
            }
            if !fenced {
                for target in paths(line) {
                    checker.check(file, n + 1, target);
                }
            }
        }
    }
    let mut sources = Vec::new();
    files(&root(), ".rs", &mut sources);
    for file in &sources {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        for (n, line) in text.lines().enumerate() {
            if !line.trim_start().starts_with("//") {
                continue;
            }
            for target in paths(line) {
                checker.check(file, n + 1, target);
            }
        }
    }
    assert!(
        checker.stale.is_empty(),
        "{} stale references:\n{}",
        checker.stale.len(),
        checker.stale.join("\n")
    );
}

#[test]
fn a_heading_has_github_s_anchor() {
    let a = anchors("# The mesh at fleet size\n## `GET /status`, and more\n## Twice\n## Twice\n```\n# not a heading\n```\n");
    assert_eq!(
        a,
        [
            "the-mesh-at-fleet-size",
            "get-status-and-more",
            "twice",
            "twice-1"
        ]
        .into_iter()
        .map(String::from)
        .collect()
    );
}

#[test]
fn prose_names_paths_by_top_level_directory_or_markdown_anchor() {
    assert_eq!(
        paths("see `aggregator/src/api/routes.rs`, design.md#fail-static and guard.rs."),
        vec!["aggregator/src/api/routes.rs", "design.md#fail-static"]
    );
    assert_eq!(
        links("[a](docs/x.md#y) and [b](#z)"),
        vec!["docs/x.md#y", "#z"]
    );
}

/// The subcommands a `--help` lists (`help` aside).
fn subcommands(args: &[&str]) -> Vec<String> {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_meshlb"))
        .args(args)
        .arg("--help")
        .output()
        .expect("meshlb --help");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    text.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(String::from)
        .collect()
}

/// The rows of README.md's command table: its first cell, and the whole row.
fn readme_commands() -> Vec<(String, String)> {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    readme
        .lines()
        .skip_while(|l| *l != "## Commands")
        .skip(1)
        .take_while(|l| !l.starts_with("## "))
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let first = l.split('|').nth(1).unwrap_or("").to_string();
            (first, l.to_string())
        })
        .collect()
}

#[test]
fn the_readme_lists_every_command_and_verb_that_meshlb_help_lists() {
    let rows = readme_commands();
    let listed = subcommands(&[]);
    let mut missing = Vec::new();
    for command in &listed {
        let named = |cell: &str| {
            cell.contains(&format!("`meshlb {command}")) || cell.contains(&format!("`{command}`"))
        };
        let Some((_, row)) = rows.iter().find(|(first, _)| named(first)) else {
            missing.push(format!("meshlb {command}"));
            continue;
        };
        for verb in subcommands(&[command]) {
            if !row.contains(&format!("`{verb}")) {
                missing.push(format!("meshlb {command} {verb}"));
            }
        }
    }
    for (first, _) in &rows {
        for word in first.split('`').skip(1).step_by(2) {
            let name = word
                .trim_start_matches("meshlb ")
                .split(' ')
                .next()
                .unwrap_or("");
            if !name.is_empty() && !name.contains(',') && !listed.iter().any(|c| c == name) {
                missing.push(format!(
                    "README names `{name}`, which meshlb --help does not"
                ));
            }
        }
    }
    assert!(missing.is_empty(), "README.md#commands: {missing:#?}");
}

/// Whether `line` cites one of the user's source documents (`seed NNN`, the seeds directory)
/// rather than saying what the cited behaviour is.
fn cites_a_seed(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    let numbered = lower.match_indices("seed ").any(|(i, m)| {
        let rest = &lower.as_bytes()[i + m.len()..];
        rest.len() >= 3
            && rest[..3].iter().all(u8::is_ascii_digit)
            && rest
                .get(3)
                .is_none_or(|b| !b.is_ascii_digit() && *b != b'.' && *b != b':')
    });
    numbered || lower.contains(concat!("seeds", "/"))
}

#[test]
fn no_doc_or_comment_cites_the_seed_documents() {
    let mut found = Vec::new();
    for ext in [".md", ".rs"] {
        let mut all = Vec::new();
        files(&root(), ext, &mut all);
        for file in all {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            for (n, line) in text.lines().enumerate() {
                if cites_a_seed(line) {
                    found.push(format!("{}:{}", file.display(), n + 1));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "cite the behaviour, not the seed: {found:?}"
    );
}

#[test]
fn a_seed_citation_is_recognised() {
    assert!(cites_a_seed(concat!("as the docs say (Seed", " 000)")));
    assert!(!cites_a_seed(concat!("--seed", " 127.0.0.1:7946")));
}
