//! docs/api.md is checked against the code: every route, error code, header and metric of the
//! control plane is documented, and the documented paths are the ones the code routes.

use super::envelope::code;
use super::routes::documented;

fn doc() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/api.md"))
        .expect("docs/api.md")
}

#[test]
fn every_route_is_documented_with_its_methods() {
    let doc = doc();
    let routes = documented();
    for (methods, path) in &routes {
        let row = format!("| {methods} | `{path}` |");
        assert!(doc.contains(&row), "docs/api.md lacks the row {row}");
    }
    let rows = doc
        .lines()
        .filter(|l| {
            ["| GET", "| POST", "| PUT", "| PATCH", "| DELETE"]
                .iter()
                .any(|m| l.starts_with(m))
                && l.contains("` |")
                && l.contains("`/")
        })
        .count();
    assert_eq!(
        rows,
        routes.len(),
        "docs/api.md lists a route the code does not have"
    );
}

#[test]
fn every_error_code_header_and_metric_is_documented() {
    let doc = doc();
    for c in [
        code::UNAVAILABLE,
        code::NOT_FOUND,
        code::INVALID,
        code::CONFLICT,
        code::NOT_PRIMARY,
        code::AUTH,
        code::EXISTS,
        code::METHOD,
        code::TOO_LARGE,
    ] {
        assert!(doc.contains(&format!("| {c} |")), "error code {c}");
    }
    use meshlb_node::control::signing::*;
    for h in [
        NODE_HEADER,
        TIME_HEADER,
        GENERATION_HEADER,
        SHA256_HEADER,
        SIGNATURE_HEADER,
    ] {
        let titled: String = h
            .split('-')
            .map(|w| {
                let mut c = w.chars();
                c.next()
                    .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                    .unwrap_or_default()
            })
            .collect::<Vec<_>>()
            .join("-");
        assert!(doc.contains(&titled), "header {titled}");
    }
    for f in super::convert::READ_ONLY {
        assert!(doc.contains(&format!("`{f}`")), "read-only field {f}");
    }
    for m in [
        "meshlb_config_generation",
        "meshlb_config_primary_seen",
        "meshlb_config_fetches_total",
        "meshlb_config_documents_refused_total",
        "meshlb_config_fetches_refused_total",
    ] {
        assert!(doc.contains(&format!("`{m}")), "metric {m}");
    }
    for key in [
        mesh::keys::CONFIG_PRIMARY,
        mesh::keys::CONFIG_GENERATION,
        mesh::keys::CONFIG_REFUSED,
    ] {
        assert!(doc.contains(&format!("`{key}`")), "gossip key {key}");
    }
}
