//! Private networks through the API, in Cloudflare's Zero Trust shapes: tunnels
//! (`/accounts/{account}/cfd_tunnel`, `tunnels.rs`), virtual networks
//! (`/accounts/{account}/teamnet/virtual_networks`, `networks.rs`) and routes
//! (`/accounts/{account}/teamnet/routes`, `routes.rs`). Each is a top-level array of the
//! config (`[[tunnels]]`, `[[virtual_networks]]`, `[[routes]]`) whose tables are found by
//! their `id` field (a UUID), not by name as the load-balancing resources are; a write is
//! checked and made the next generation as every API write is (`crate::api::write`).

mod networks;
mod routes;
mod tunnels;

pub use networks::{create_network, delete_network, get_network, list_networks, patch_network};
pub use routes::{create_route, delete_route, get_route, list_routes, patch_route};
pub use tunnels::{create_tunnel, delete_tunnel, get_tunnel, list_tunnels, patch_tunnel};
pub use tunnels::{tunnel_connections, tunnel_token};

use http::StatusCode;
use lb_core::config::document::Document;
use lb_core::config::private::canonical_uuid;
use serde_json::{Map, Value};
use toml::{Table, Value as Toml};

use crate::api::call::Call;
use crate::api::envelope::{self, code};
use crate::api::handlers::Served;
use crate::api::write::refusal;
use meshlb_node::control::writes::{FieldError, Refusal};

/// One of the three arrays.
#[derive(Debug, Clone, Copy)]
pub(super) struct Collection {
    /// The config's key.
    key: &'static str,
    /// One of them, for messages.
    singular: &'static str,
    /// The table's id when it has none of its own (a route written in a file).
    derive_id: fn(&Table) -> Option<String>,
    /// A table as the API shows it.
    view: fn(&Call<'_>, &Document, &Table) -> Value,
}

impl Collection {
    /// The id of `t`: its `id`, canonical, else the derived one.
    fn id_of(&self, t: &Table) -> Option<String> {
        match t.get("id").and_then(Toml::as_str) {
            Some(id) => canonical_uuid(id),
            None => (self.derive_id)(t),
        }
    }

    fn position(&self, doc: &Document, id: &str) -> Option<usize> {
        let wanted = canonical_uuid(id)?;
        doc.list_top(self.key)
            .iter()
            .position(|t| self.id_of(t).as_deref() == Some(wanted.as_str()))
    }

    /// The table `{id}` of the call's path.
    fn get<'d>(&self, doc: &'d Document, call: &Call<'_>) -> Result<&'d Table, Refusal> {
        self.position(doc, call.id())
            .map(|i| doc.list_top(self.key)[i])
            .ok_or_else(|| self.not_found(call.id()))
    }

    fn not_found(&self, id: &str) -> Refusal {
        refusal(
            StatusCode::NOT_FOUND,
            code::NOT_FOUND,
            format!(
                "no {} with id {:?}",
                self.singular,
                id.chars().take(64).collect::<String>()
            ),
        )
    }

    /// Replaces table `{id}` by `next` (its `id` kept), in its place.
    fn replace(&self, doc: &mut Document, id: &str, next: Table) -> Result<(), Refusal> {
        let at = self.position(doc, id).ok_or_else(|| self.not_found(id))?;
        doc.top_mut(self.key)[at] = Toml::Table(next);
        Ok(())
    }

    /// Removes table `{id}` and returns it.
    fn remove(&self, doc: &mut Document, id: &str) -> Result<Table, Refusal> {
        let at = self.position(doc, id).ok_or_else(|| self.not_found(id))?;
        match doc.top_mut(self.key).remove(at) {
            Toml::Table(t) => Ok(t),
            _ => Err(self.not_found(id)),
        }
    }
}

fn no_derived_id(_: &Table) -> Option<String> {
    None
}

/// `GET` a collection.
async fn list(call: Call<'_>, c: Collection) -> Served {
    let doc = call.document()?;
    let items = doc
        .list_top(c.key)
        .into_iter()
        .map(|t| (c.view)(&call, &doc, t))
        .collect();
    let (page, per_page) = call.page()?;
    Ok(envelope::list(items, page, per_page, call.generation))
}

/// `GET` one table.
async fn get(call: Call<'_>, c: Collection) -> Served {
    let doc = call.document()?;
    let t = c.get(&doc, &call)?;
    Ok(envelope::ok(
        StatusCode::OK,
        (c.view)(&call, &doc, t),
        call.generation,
    ))
}

/// `DELETE` one table: the answer is it, with its `deleted_at`. What the config still names
/// is not deleted: the write's validation names it.
async fn delete(call: Call<'_>, c: Collection) -> Served {
    let id = call.id().to_string();
    let (gone, written, doc) = call.write(|doc| Ok((c.remove(doc, &id)?, None))).await?;
    let mut shown = (c.view)(&call, &doc, &gone);
    shown["deleted_at"] = serde_json::json!(now());
    Ok(envelope::ok(StatusCode::OK, shown, written.generation))
}

/// The answer to a create or a patch: the table as written.
fn written(call: &Call<'_>, c: Collection, doc: &Document, t: &Table, generation: u64) -> Served {
    Ok(envelope::ok(
        StatusCode::OK,
        (c.view)(call, doc, t),
        generation,
    ))
}

/// A fresh random UUID (version 4), as Cloudflare makes its ids.
pub(super) fn fresh_uuid() -> String {
    let mut b: [u8; 16] = rand::random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    tunnel::TunnelId(b).to_string()
}

/// Now, as `created_at` and `deleted_at` are written.
pub(super) fn now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// A table's `created_at`, else when the config in force was loaded: Cloudflare's SDKs
/// require the field.
pub(super) fn created_at(call: &Call<'_>, t: &Table) -> String {
    t.get("created_at")
        .and_then(Toml::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| {
            let at = std::time::UNIX_EPOCH
                + std::time::Duration::from_secs(call.shared.in_force.load().loaded_at);
            humantime::format_rfc3339_seconds(at).to_string()
        })
}

/// The body as a JSON object, its fields checked against `fields`: each a known field's
/// name and whether it is a string (else a boolean); any other field is refused with its
/// path, as a wrong type is.
pub(super) fn fields(
    body: &Value,
    known: &[(&str, Kind)],
    what: &str,
) -> Result<Map<String, Value>, Refusal> {
    let invalid = |errors: Vec<FieldError>| Refusal {
        errors,
        ..refusal(
            StatusCode::BAD_REQUEST,
            code::INVALID,
            format!("the body is not a {what}"),
        )
    };
    let Value::Object(map) = body else {
        return Err(invalid(vec![FieldError {
            path: String::new(),
            reason: "the body must be a JSON object".into(),
        }]));
    };
    let mut errors = Vec::new();
    let mut out = Map::new();
    for (k, v) in map {
        if crate::api::convert::READ_ONLY.contains(&k.as_str()) || v.is_null() {
            continue;
        }
        let Some((_, kind)) = known.iter().find(|(name, _)| name == k) else {
            errors.push(FieldError {
                path: k.clone(),
                reason: format!("not a field of a {what}"),
            });
            continue;
        };
        let fits = match kind {
            Kind::Text => v.is_string(),
            Kind::Flag => v.is_boolean(),
            Kind::Ignored => true,
        };
        if !fits {
            errors.push(FieldError {
                path: k.clone(),
                reason: match kind {
                    Kind::Text => "expected a string".into(),
                    _ => "expected true or false".into(),
                },
            });
        } else if *kind != Kind::Ignored {
            out.insert(k.clone(), v.clone());
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(invalid(errors))
    }
}

/// What a body's field holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Text,
    Flag,
    /// Taken and not kept (Cloudflare's `config_src`: meshlb's tunnels are configured in the
    /// config).
    Ignored,
}

/// Sets `key` of `t` from a JSON string or boolean.
pub(super) fn set(t: &mut Table, key: &str, v: &Value) {
    match v {
        Value::String(s) => {
            t.insert(key.into(), Toml::String(s.clone()));
        }
        Value::Bool(b) => {
            t.insert(key.into(), Toml::Boolean(*b));
        }
        _ => {}
    }
}

/// A string field of a table, or `""`.
pub(super) fn text<'t>(t: &'t Table, key: &str) -> &'t str {
    t.get(key).and_then(Toml::as_str).unwrap_or("")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const KNOWN: &[(&str, Kind)] = &[
        ("name", Kind::Text),
        ("is_default", Kind::Flag),
        ("config_src", Kind::Ignored),
    ];

    #[test]
    fn a_body_keeps_known_fields_and_refuses_others_and_wrong_types_each_with_its_path() {
        let ok = fields(
            &json!({ "name": "n", "config_src": "local", "id": "x", "comment": null }),
            KNOWN,
            "thing",
        )
        .expect("fields");
        assert_eq!(ok.len(), 1, "{ok:?}");
        let e = fields(
            &json!({ "name": 3, "is_default": "yes", "colour": "red" }),
            KNOWN,
            "thing",
        )
        .expect_err("refused");
        let paths: Vec<&str> = e.errors.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["colour", "is_default", "name"]);
        assert!(fields(&json!([1]), KNOWN, "thing").is_err());
    }

    #[test]
    fn fresh_ids_are_version_4_uuids_and_found_in_any_spelling() {
        let id = fresh_uuid();
        assert_eq!(canonical_uuid(&id).as_deref(), Some(id.as_str()));
        assert_eq!(id.as_bytes()[14], b'4');
        let mut doc = Document::parse("").expect("empty");
        let mut t = Table::new();
        t.insert("id".into(), Toml::String(id.to_uppercase()));
        doc.top_mut("tunnels").push(Toml::Table(t));
        let tunnels = tunnels::TUNNELS;
        assert_eq!(tunnels.position(&doc, &id.replace('-', "")), Some(0));
        assert_eq!(tunnels.position(&doc, "not a uuid"), None);
    }
}
