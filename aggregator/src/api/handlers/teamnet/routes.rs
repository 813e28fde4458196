//! `/accounts/{account}/teamnet/routes`: Cloudflare's `Route` (`id`, `network`,
//! `tunnel_id`, `virtual_network_id`, `comment`, `created_at`, `deleted_at`), listed as its
//! `Teamnet` (with the tunnel's and the network's names). A route written in a file without
//! an `id` is shown under one derived from its network and virtual network.

use lb_core::config::document::Document;
use lb_core::config::private::canonical_uuid;
use serde_json::{json, Value};
use sha2::Digest;
use toml::{Table, Value as Toml};

use super::networks::NETWORKS;
use super::tunnels::TUNNELS;
use super::{created_at, fields, fresh_uuid, now, set, text, Collection, Kind};
use crate::api::call::Call;
use crate::api::handlers::Served;

pub(super) const ROUTES: Collection = Collection {
    key: "routes",
    singular: "route",
    derive_id: derived_id,
    view,
};

const FIELDS: &[(&str, Kind)] = &[
    ("network", Kind::Text),
    ("tunnel_id", Kind::Text),
    ("virtual_network_id", Kind::Text),
    ("comment", Kind::Text),
];

/// A UUID from the route's network and virtual network: stable while they are.
fn derived_id(t: &Table) -> Option<String> {
    let mut h = sha2::Sha256::new();
    h.update(b"meshlb route id v1|");
    h.update(text(t, "network").as_bytes());
    h.update(b"|");
    h.update(
        text(t, "virtual_network_id")
            .to_ascii_lowercase()
            .as_bytes(),
    );
    let digest = h.finalize();
    let mut b = [0u8; 16];
    b.copy_from_slice(&digest[..16]);
    b[6] = (b[6] & 0x0f) | 0x50;
    b[8] = (b[8] & 0x3f) | 0x80;
    Some(tunnel::TunnelId(b).to_string())
}

/// The default virtual network's id, and each id's name, of `doc`.
fn names(doc: &Document, c: Collection) -> Vec<(String, String)> {
    doc.list_top(c.key)
        .into_iter()
        .filter_map(|t| Some((c.id_of(t)?, text(t, "name").to_string())))
        .collect()
}

fn view(call: &Call<'_>, doc: &Document, t: &Table) -> Value {
    let default = doc
        .list_top(NETWORKS.key)
        .into_iter()
        .find(|n| n.get("is_default_network").and_then(Toml::as_bool) == Some(true))
        .and_then(|n| NETWORKS.id_of(n));
    let network = t
        .get("virtual_network_id")
        .and_then(Toml::as_str)
        .and_then(canonical_uuid)
        .or(default);
    let tunnel = canonical_uuid(text(t, "tunnel_id"));
    let name_in = |c: Collection, id: &Option<String>| {
        names(doc, c)
            .into_iter()
            .find(|(i, _)| Some(i) == id.as_ref())
            .map(|(_, n)| n)
    };
    json!({
        "id": ROUTES.id_of(t),
        "network": text(t, "network"),
        "tunnel_id": tunnel,
        "tunnel_name": name_in(TUNNELS, &tunnel),
        "tun_type": "cfd_tunnel",
        "virtual_network_id": network,
        "virtual_network_name": name_in(NETWORKS, &network),
        "comment": text(t, "comment"),
        "created_at": created_at(call, t),
        "deleted_at": null,
    })
}

fn apply(t: &mut Table, body: &serde_json::Map<String, Value>) {
    for (key, _) in FIELDS {
        if let Some(v) = body.get(*key) {
            set(t, key, v);
        }
    }
}

pub async fn list_routes(call: Call<'_>) -> Served {
    super::list(call, ROUTES).await
}

pub async fn get_route(call: Call<'_>) -> Served {
    super::get(call, ROUTES).await
}

pub async fn create_route(mut call: Call<'_>) -> Served {
    let body = call.json().await?;
    let body = fields(&body, FIELDS, "route")?;
    let id = fresh_uuid();
    let (made, done, doc) = call
        .write(|doc| {
            let mut t = Table::new();
            t.insert("id".into(), Toml::String(id.clone()));
            t.insert("created_at".into(), Toml::String(now()));
            apply(&mut t, &body);
            doc.top_mut(ROUTES.key).push(Toml::Table(t.clone()));
            Ok((t, None))
        })
        .await?;
    super::written(&call, ROUTES, &doc, &made, done.generation)
}

pub async fn patch_route(mut call: Call<'_>) -> Served {
    let body = call.json().await?;
    let body = fields(&body, FIELDS, "route")?;
    let id = call.id().to_string();
    let (next, done, doc) = call
        .write(|doc| {
            let mut t = ROUTES.get(doc, &call)?.clone();
            // A derived id would change with the network: the route keeps the one it had.
            if t.get("id").is_none() {
                if let Some(was) = ROUTES.id_of(&t) {
                    t.insert("id".into(), Toml::String(was));
                }
            }
            apply(&mut t, &body);
            ROUTES.replace(doc, &id, t.clone())?;
            Ok((t, None))
        })
        .await?;
    super::written(&call, ROUTES, &doc, &next, done.generation)
}

pub async fn delete_route(call: Call<'_>) -> Served {
    super::delete(call, ROUTES).await
}
