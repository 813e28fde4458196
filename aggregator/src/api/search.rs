//! `GET /accounts/{a}/load_balancers/search` (Cloudflare's "Search Resources"): the load
//! balancers, pools and monitors whose id, name or description contains `query` (any case;
//! every one when empty), each with its references when `references` asks (`*` both
//! directions, `referrer` or `referral`, empty none). Monitor groups are not searched: the
//! SDKs' `resource_type` has no value for them.

use lb_core::config::document::{Document, Kind};
use lb_core::config::references::{references, Direction};
use serde_json::{json, Value};

use super::query::QueryError;
use toml::Value as Toml;

/// The arguments of a search.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Search {
    pub query: String,
    /// Which references each result carries.
    pub references: Option<Option<Direction>>,
}

impl Search {
    /// From the query string (`query`, `references`, also as `search_params[...]`, the
    /// form of Cloudflare's documentation). An unknown `references` value is an error.
    pub fn parse(query: &str) -> Result<Search, QueryError> {
        let mut out = Search::default();
        for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
            let k = k
                .strip_prefix("search_params[")
                .and_then(|k| k.strip_suffix(']'))
                .unwrap_or(&k);
            match k {
                "query" => out.query = v.into_owned(),
                "references" => {
                    out.references = match &*v {
                        "" => None,
                        "*" => Some(None),
                        "referrer" => Some(Some(Direction::Referrer)),
                        "referral" => Some(Some(Direction::Referral)),
                        other => {
                            return Err(QueryError::value(
                                "references",
                                r#""", "*", "referrer" or "referral""#,
                                other,
                            ))
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(out)
    }
}

/// The matching resources, in Cloudflare's shape (`resource_id`, `resource_name`,
/// `resource_type`, and `references` when asked).
pub fn search(doc: &Document, s: &Search) -> Vec<Value> {
    let needle = s.query.to_lowercase();
    let mut out = Vec::new();
    for kind in [Kind::LoadBalancer, Kind::Pool, Kind::Monitor] {
        for t in doc.list(kind) {
            let field = |k: &str| t.get(k).and_then(Toml::as_str).unwrap_or("");
            let (id, description) = (field("name"), field("description"));
            if !needle.is_empty()
                && !id.to_lowercase().contains(&needle)
                && !description.to_lowercase().contains(&needle)
            {
                continue;
            }
            let mut item = json!({
                "resource_id": id,
                "resource_name": id,
                "resource_type": super::convert::resource_type(kind),
            });
            if let Some(direction) = s.references {
                let refs: Vec<Value> = references(doc, kind, id)
                    .into_iter()
                    .filter(|r| direction.is_none_or(|d| r.direction == d))
                    .map(|r| super::convert::reference(&r))
                    .collect();
                item["references"] = Value::Array(refs);
            }
            out.push(item);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = r#"
[[monitors]]
name = "web"
description = "Login page"

[[pools]]
name = "eu-west"
monitor = "web"
origins = [{ name = "a", address = "192.0.2.1" }]

[[load_balancers]]
name = "www.example.com"
default_pools = ["eu-west"]
fallback_pool = "eu-west"
"#;

    fn ids(found: &[Value]) -> Vec<&str> {
        found
            .iter()
            .filter_map(|v| v["resource_id"].as_str())
            .collect()
    }

    #[test]
    fn a_query_matches_ids_and_descriptions_in_any_case() {
        let doc = Document::parse(DOC).expect("doc");
        let found = search(&doc, &Search::parse("query=LOGIN").expect("args"));
        assert_eq!(ids(&found), ["web"]);
        let found = search(
            &doc,
            &Search::parse("search_params%5Bquery%5D=eu").expect("args"),
        );
        assert_eq!(ids(&found), ["eu-west"]);
    }

    #[test]
    fn an_empty_query_finds_every_resource_without_references() {
        let doc = Document::parse(DOC).expect("doc");
        let found = search(&doc, &Search::parse("").expect("args"));
        assert_eq!(ids(&found), ["www.example.com", "eu-west", "web"]);
        assert!(found.iter().all(|v| v.get("references").is_none()));
    }

    #[test]
    fn references_come_in_the_direction_asked() {
        let doc = Document::parse(DOC).expect("doc");
        let found = search(
            &doc,
            &Search::parse("query=eu-west&references=referrer").expect("args"),
        );
        assert_eq!(
            found[0]["references"][0]["resource_id"],
            json!("www.example.com")
        );
        assert_eq!(found[0]["references"].as_array().map(Vec::len), Some(1));
        let found = search(
            &doc,
            &Search::parse("query=eu-west&references=*").expect("args"),
        );
        assert_eq!(found[0]["references"].as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn an_unknown_references_value_is_refused() {
        assert!(Search::parse("references=both").is_err());
    }
}
