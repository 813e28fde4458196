//! `/accounts/{account}/teamnet/virtual_networks`: Cloudflare's `VirtualNetwork` (`id`,
//! `name`, `comment`, `is_default_network`, `created_at`, `deleted_at`). Making one the
//! default takes it from the one that was, as Cloudflare does.

use lb_core::config::document::Document;
use serde_json::{json, Value};
use toml::{Table, Value as Toml};

use super::{created_at, fields, fresh_uuid, no_derived_id, now, set, text, Collection, Kind};
use crate::api::call::Call;
use crate::api::handlers::Served;

pub(super) const NETWORKS: Collection = Collection {
    key: "virtual_networks",
    singular: "virtual network",
    derive_id: no_derived_id,
    view,
};

/// The fields a body may hold (`is_default` is Cloudflare's older name of
/// `is_default_network`).
const FIELDS: &[(&str, Kind)] = &[
    ("name", Kind::Text),
    ("comment", Kind::Text),
    ("is_default", Kind::Flag),
    ("is_default_network", Kind::Flag),
];

fn view(call: &Call<'_>, _: &Document, t: &Table) -> Value {
    json!({
        "id": NETWORKS.id_of(t),
        "name": text(t, "name"),
        "comment": text(t, "comment"),
        "is_default_network": t.get("is_default_network").and_then(Toml::as_bool).unwrap_or(false),
        "created_at": created_at(call, t),
        "deleted_at": null,
    })
}

/// Applies a body's fields to `t`; whether it asks to be the default.
fn apply(t: &mut Table, body: &serde_json::Map<String, Value>) -> bool {
    for key in ["name", "comment"] {
        if let Some(v) = body.get(key) {
            set(t, key, v);
        }
    }
    let default = body
        .get("is_default_network")
        .or_else(|| body.get("is_default"))
        .and_then(Value::as_bool);
    if let Some(d) = default {
        t.insert("is_default_network".into(), Toml::Boolean(d));
    }
    default == Some(true)
}

/// Takes the default from every network but `except`.
fn only_default(doc: &mut Document, except: &str) {
    for item in doc.top_mut(NETWORKS.key) {
        if let Toml::Table(t) = item {
            if NETWORKS.id_of(t).as_deref() != Some(except) {
                t.remove("is_default_network");
            }
        }
    }
}

pub async fn list_networks(call: Call<'_>) -> Served {
    super::list(call, NETWORKS).await
}

pub async fn get_network(call: Call<'_>) -> Served {
    super::get(call, NETWORKS).await
}

pub async fn create_network(mut call: Call<'_>) -> Served {
    let body = call.json().await?;
    let body = fields(&body, FIELDS, "virtual network")?;
    let id = fresh_uuid();
    let (made, done, doc) = call
        .write(|doc| {
            let mut t = Table::new();
            t.insert("id".into(), Toml::String(id.clone()));
            t.insert("created_at".into(), Toml::String(now()));
            let default = apply(&mut t, &body);
            if default {
                only_default(doc, &id);
            }
            doc.top_mut(NETWORKS.key).push(Toml::Table(t.clone()));
            Ok((t, None))
        })
        .await?;
    super::written(&call, NETWORKS, &doc, &made, done.generation)
}

pub async fn patch_network(mut call: Call<'_>) -> Served {
    let body = call.json().await?;
    let body = fields(&body, FIELDS, "virtual network")?;
    let id = call.id().to_string();
    let (next, done, doc) = call
        .write(|doc| {
            let mut t = NETWORKS.get(doc, &call)?.clone();
            if apply(&mut t, &body) {
                only_default(doc, &NETWORKS.id_of(&t).unwrap_or_default());
            }
            NETWORKS.replace(doc, &id, t.clone())?;
            Ok((t, None))
        })
        .await?;
    super::written(&call, NETWORKS, &doc, &next, done.generation)
}

/// A network that routes or endpoints still name is not deleted.
pub async fn delete_network(call: Call<'_>) -> Served {
    super::delete(call, NETWORKS).await
}
