//! The metrics catalogues (`lb_core::metric`; one `METRICS` table per crate that records)
//! agree with the code and with docs/operations.md#metrics: every metric the code records is
//! in exactly one table and every table's metric is recorded somewhere; the docs' table lists
//! exactly the catalogued metrics, each with its type and labels. A counter added without its
//! entry, an entry left behind by a removed metric, or a row of the docs that drifted fails
//! here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use lb_core::metric::Metric;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every crate's catalogue, by crate.
fn catalogues() -> Vec<(&'static str, &'static [Metric])> {
    vec![
        ("lb-dns", lb_dns::METRICS),
        ("lb-proxy", lb_proxy::METRICS),
        ("lb-l4", lb_l4::METRICS),
        ("lb-records", lb_records::METRICS),
        ("prober", prober::metrics::METRICS),
        ("aggregator", aggregator::metrics::METRICS),
        ("meshlb-node", meshlb_node::metrics::METRICS),
        ("tunnel", tunnel::METRICS),
    ]
}

fn catalogued() -> BTreeMap<&'static str, Metric> {
    catalogues()
        .into_iter()
        .flat_map(|(_, table)| table.iter().map(|m| (m.name, *m)))
        .collect()
}

/// The Rust sources of the crates (not tests, vendor or build output).
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let enter = |p: &Path| {
        let name = p.file_name().map(|n| n.to_string_lossy().to_string());
        !["target", "vendor", "tests", "fuzz", ".git", "node_modules"]
            .contains(&name.as_deref().unwrap_or(""))
    };
    out.extend(
        test_support::repo_files::repo_files(dir, ".rs", &enter)
            .into_iter()
            .filter(|p| {
                let name = p.to_string_lossy();
                !name.ends_with("_tests.rs") && !name.ends_with("/tests.rs")
            }),
    );
}

/// The `meshlb_*` name starting at `text`, if one does.
fn metric_name(text: &str) -> Option<&str> {
    let rest = text.strip_prefix("\"meshlb_")?;
    let end = rest.find('"')?;
    let name = &text[1..end + 8];
    name.bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        .then_some(name)
}

/// The metric names the code records: the first argument of `counter!`, `gauge!` and
/// `histogram!` when it is a literal, and the literal of a `const …: &str = "meshlb_…"` (a
/// name given to a recorder through a constant), with the file that names each.
fn recorded() -> BTreeMap<String, PathBuf> {
    let mut files = Vec::new();
    for top in [
        "lb-core",
        "prober",
        "aggregator",
        "node",
        "mesh",
        "tls",
        "tunnel",
        "src",
    ] {
        sources(&root().join(top), &mut files);
    }
    let mut names = BTreeMap::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        for (i, _) in text.match_indices("!(") {
            let before = &text[..i];
            let is_record = ["counter", "gauge", "histogram"]
                .iter()
                .any(|m| before.ends_with(m) && !before.ends_with(&format!("describe_{m}")));
            if !is_record {
                continue;
            }
            if let Some(name) = metric_name(text[i + 2..].trim_start()) {
                names.insert(name.to_string(), file.clone());
            }
        }
        for line in text.lines() {
            let line = line.trim();
            if line.starts_with("const ") || line.starts_with("pub const ") {
                if let Some((_, value)) = line.split_once(": &str = ") {
                    if let Some(name) = metric_name(value) {
                        names.insert(name.to_string(), file.clone());
                    }
                }
            }
        }
    }
    names
}

#[test]
fn no_metric_is_in_two_catalogues() {
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    let mut twice = Vec::new();
    for (krate, table) in catalogues() {
        for m in table {
            if let Some(other) = seen.insert(m.name, krate) {
                twice.push(format!("{} in {other} and {krate}", m.name));
            }
        }
    }
    assert!(twice.is_empty(), "metrics catalogued twice: {twice:?}");
}

#[test]
fn every_metric_the_code_records_is_catalogued() {
    let catalogued = catalogued();
    let missing: Vec<String> = recorded()
        .into_iter()
        .filter(|(name, _)| !catalogued.contains_key(name.as_str()))
        .map(|(name, file)| format!("{name} ({})", file.display()))
        .collect();
    assert!(
        missing.is_empty(),
        "recorded but in no METRICS table: {missing:?}"
    );
}

#[test]
fn every_catalogued_metric_is_recorded_by_the_code() {
    let recorded = recorded();
    let stale: Vec<&str> = catalogued()
        .into_keys()
        .filter(|name| !recorded.contains_key(*name))
        .collect();
    assert!(stale.is_empty(), "catalogued but never recorded: {stale:?}");
}

/// `a_{b,c}_d` as `a_b_d`, `a_c_d` (one brace group or two).
fn expand(pattern: &str) -> Vec<String> {
    let Some(open) = pattern.find('{') else {
        return vec![pattern.to_string()];
    };
    let Some(close) = pattern[open..].find('}').map(|c| open + c) else {
        return vec![pattern.to_string()];
    };
    pattern[open + 1..close]
        .split(',')
        .flat_map(|alt| {
            expand(&format!(
                "{}{alt}{}",
                &pattern[..open],
                &pattern[close + 1..]
            ))
        })
        .collect()
}

/// The backticked words of a table cell.
fn ticked(cell: &str) -> Vec<&str> {
    cell.split('`').skip(1).step_by(2).collect()
}

/// docs/operations.md's metrics table: each documented name with its row's type and labels
/// cells.
fn documented() -> BTreeMap<String, (String, String)> {
    let text = std::fs::read_to_string(root().join("docs/operations.md")).unwrap_or_default();
    let section = text
        .split("\n## Metrics\n")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .unwrap_or_default();
    let mut rows = BTreeMap::new();
    for line in section.lines().filter(|l| l.starts_with("| `meshlb_")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let (names, kind, labels) = (cells[1], cells[2], cells[3]);
        for name in ticked(names).into_iter().flat_map(expand) {
            rows.insert(name, (kind.to_string(), labels.to_string()));
        }
    }
    rows
}

#[test]
fn the_operations_guide_lists_exactly_the_catalogued_metrics() {
    let catalogued = catalogued();
    let documented = documented();
    let undocumented: Vec<&str> = catalogued
        .keys()
        .copied()
        .filter(|n| !documented.contains_key(*n))
        .collect();
    let gone: Vec<&String> = documented
        .keys()
        .filter(|n| !catalogued.contains_key(n.as_str()))
        .collect();
    assert!(
        undocumented.is_empty() && gone.is_empty(),
        "not in docs/operations.md#metrics: {undocumented:?}; documented but not catalogued: {gone:?}"
    );
}

#[test]
fn the_operations_guide_gives_each_metric_its_type_and_labels() {
    let mut wrong = Vec::new();
    for (name, (kind, labels)) in documented() {
        let Some(m) = catalogued().get(name.as_str()).copied() else {
            continue;
        };
        if !kind.starts_with(m.kind.name()) {
            wrong.push(format!(
                "{name}: type `{kind}`, catalogued {}",
                m.kind.name()
            ));
        }
        let cell = ticked(&labels);
        for label in m.labels {
            if !cell.contains(label) {
                wrong.push(format!("{name}: label `{label}` missing"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "rows of docs/operations.md#metrics: {wrong:#?}"
    );
}
