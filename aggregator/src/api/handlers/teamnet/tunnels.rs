//! `/accounts/{account}/cfd_tunnel`: Cloudflare's `CloudflareTunnel` (`id`, `name`,
//! `status`, `connections`, `created_at`, ...; never its secret), the token a connector runs
//! with (`…/{id}/token`, as `cloudflared tunnel token` prints it) and the connectors
//! connected (`…/{id}/connections`).
//!
//! `status` is the mesh's: `healthy` while some PoP holds a connection of the tunnel (this
//! one's hub, or a holder in gossip); else `down` once it had connections here (with
//! `conns_inactive_at` the time the last one ended), `inactive` if it never had, as
//! Cloudflare tells a tunnel that never ran. `connections` are this aggregator's own
//! connections, in detail; the other holders are named under `meshlb.holders`.

use base64::Engine as _;
use http::StatusCode;
use lb_core::config::document::Document;
use serde_json::{json, Value};
use toml::{Table, Value as Toml};

use super::{created_at, fields, fresh_uuid, no_derived_id, now, set, text, Collection, Kind};
use crate::api::call::Call;
use crate::api::envelope::{self, code};
use crate::api::handlers::Served;
use crate::api::write::refusal;

pub(super) const TUNNELS: Collection = Collection {
    key: "tunnels",
    singular: "tunnel",
    derive_id: no_derived_id,
    view,
};

const FIELDS: &[(&str, Kind)] = &[
    ("name", Kind::Text),
    ("tunnel_secret", Kind::Text),
    ("config_src", Kind::Ignored),
];

/// The tunnel's connections at this aggregator, in Cloudflare's `Connection` shape.
fn connections(call: &Call<'_>, id: &tunnel::TunnelId) -> Vec<tunnel::ConnectionInfo> {
    call.shared
        .tunnel_hub
        .get()
        .map(|hub| hub.connections(id))
        .unwrap_or_default()
}

fn rfc3339(at: std::time::SystemTime) -> String {
    humantime::format_rfc3339_seconds(at).to_string()
}

fn connection(call: &Call<'_>, c: &tunnel::ConnectionInfo) -> Value {
    json!({
        "id": format!("{:016x}", c.id),
        "client_id": tunnel::TunnelId(c.client).to_string(),
        "client_version": c.version,
        "colo_name": call.shared.setup.node_id,
        "is_pending_reconnect": false,
        "opened_at": rfc3339(c.opened_at),
        "origin_ip": c.from.ip().to_string(),
        "uuid": format!("{}-{}", tunnel::TunnelId(c.client), c.conn_index),
    })
}

fn view(call: &Call<'_>, _: &Document, t: &Table) -> Value {
    let id = TUNNELS.id_of(t);
    let parsed = id
        .as_deref()
        .and_then(|i| i.parse::<tunnel::TunnelId>().ok());
    let here = parsed.map(|i| connections(call, &i)).unwrap_or_default();
    let holders: Vec<String> = parsed
        .map(|i| call.shared.tunnel_holders.nodes_holding(&i))
        .unwrap_or_default();
    let live = !here.is_empty() || !holders.is_empty();
    let active_at = here.iter().map(|c| c.opened_at).min().map(rfc3339);
    let ended = parsed
        .as_ref()
        .zip(call.shared.tunnel_hub.get())
        .and_then(|(i, hub)| hub.inactive_since(i))
        .filter(|_| !live);
    let status = match (live, ended) {
        (true, _) => "healthy",
        (false, Some(_)) => "down",
        (false, None) => "inactive",
    };
    json!({
        "id": id,
        "account_tag": call.params.account,
        "name": text(t, "name"),
        "config_src": "local",
        "remote_config": false,
        "tun_type": "cfd_tunnel",
        "status": status,
        "connections": here.iter().map(|c| connection(call, c)).collect::<Vec<_>>(),
        "conns_active_at": active_at,
        "conns_inactive_at": ended.map(rfc3339),
        "created_at": created_at(call, t),
        "deleted_at": null,
        "metadata": {},
        "meshlb": { "holders": holders },
    })
}

pub async fn list_tunnels(call: Call<'_>) -> Served {
    super::list(call, TUNNELS).await
}

pub async fn get_tunnel(call: Call<'_>) -> Served {
    super::get(call, TUNNELS).await
}

/// A new tunnel: its id made here, its secret the body's (base64, 32 bytes or more) or 32
/// random bytes.
pub async fn create_tunnel(mut call: Call<'_>) -> Served {
    let body = call.json().await?;
    let body = fields(&body, FIELDS, "tunnel")?;
    let id = fresh_uuid();
    let secret = tunnel::TunnelSecret::random().to_base64();
    let (made, done, doc) = call
        .write(|doc| {
            let mut t = Table::new();
            t.insert("id".into(), Toml::String(id.clone()));
            t.insert("tunnel_secret".into(), Toml::String(secret.clone()));
            t.insert("created_at".into(), Toml::String(now()));
            for (k, v) in &body {
                set(&mut t, k, v);
            }
            doc.top_mut(TUNNELS.key).push(Toml::Table(t.clone()));
            Ok((t, None))
        })
        .await?;
    super::written(&call, TUNNELS, &doc, &made, done.generation)
}

/// `name` or `tunnel_secret` changed; a new secret drops the connectors of the old one
/// at the next generation (`aggregator/src/node/tunnels.rs`).
pub async fn patch_tunnel(mut call: Call<'_>) -> Served {
    let body = call.json().await?;
    let body = fields(&body, FIELDS, "tunnel")?;
    let id = call.id().to_string();
    let (next, done, doc) = call
        .write(|doc| {
            let mut t = TUNNELS.get(doc, &call)?.clone();
            for (k, v) in &body {
                set(&mut t, k, v);
            }
            TUNNELS.replace(doc, &id, t.clone())?;
            Ok((t, None))
        })
        .await?;
    super::written(&call, TUNNELS, &doc, &next, done.generation)
}

/// A tunnel that routes still name is not deleted.
pub async fn delete_tunnel(call: Call<'_>) -> Served {
    super::delete(call, TUNNELS).await
}

/// The tunnel's connectors connected to this aggregator, each with its connections
/// (Cloudflare's `Client`).
pub async fn tunnel_connections(call: Call<'_>) -> Served {
    let doc = call.document()?;
    let t = TUNNELS.get(&doc, &call)?;
    let id = TUNNELS
        .id_of(t)
        .and_then(|i| i.parse::<tunnel::TunnelId>().ok())
        .ok_or_else(|| TUNNELS.not_found(call.id()))?;
    let mut clients: Vec<([u8; 16], Vec<tunnel::ConnectionInfo>)> = Vec::new();
    for c in connections(&call, &id) {
        match clients.iter_mut().find(|(client, _)| *client == c.client) {
            Some((_, conns)) => conns.push(c),
            None => clients.push((c.client, vec![c])),
        }
    }
    let items = clients
        .iter()
        .map(|(client, conns)| {
            json!({
                "id": tunnel::TunnelId(*client).to_string(),
                "version": conns.first().map(|c| c.version.clone()),
                "run_at": conns.iter().map(|c| c.opened_at).min().map(rfc3339),
                "conns": conns.iter().map(|c| connection(&call, c)).collect::<Vec<_>>(),
                "features": [],
            })
        })
        .collect();
    Ok(envelope::list(items, 1, usize::MAX, call.generation))
}

/// The token a connector runs with (`meshlb tunnel run --token`): the tunnel, its secret,
/// and the PoPs that take connectors, those whose certificate shares this aggregator's key
/// pin (or the first one's), this one first.
pub async fn tunnel_token(call: Call<'_>) -> Served {
    let doc = call.document()?;
    let t = TUNNELS.get(&doc, &call)?;
    let id = TUNNELS
        .id_of(t)
        .and_then(|i| i.parse::<tunnel::TunnelId>().ok())
        .ok_or_else(|| TUNNELS.not_found(call.id()))?;
    let secret = base64::engine::general_purpose::STANDARD
        .decode(text(t, "tunnel_secret").trim())
        .ok()
        .and_then(|s| <[u8; 32]>::try_from(s.get(..32)?).ok())
        .ok_or_else(|| {
            refusal(
                StatusCode::CONFLICT,
                code::INVALID,
                "the tunnel's secret is not base64 of 32 bytes or more",
            )
        })?;
    let me = &call.shared.setup.node_id;
    let members = call.shared.latest.members.load();
    let mut relays: Vec<(bool, String, String)> = members
        .iter()
        .filter(|m| m.alive)
        .filter_map(|m| {
            let (addr, pin) = m.tunnel_relay.as_deref()?.trim().split_once(' ')?;
            Some((&m.node_id == me, addr.to_string(), pin.to_string()))
        })
        .collect();
    relays.sort_by_key(|(mine, _, _)| !*mine);
    let Some(pin) = relays.first().map(|(_, _, pin)| pin.clone()) else {
        return Err(refusal(
            StatusCode::CONFLICT,
            code::UNAVAILABLE,
            "no live aggregator of the mesh takes connectors (--tunnel-listen): a token would name no PoP",
        ));
    };
    let token = tunnel::Token {
        account: call
            .params
            .account
            .clone()
            .unwrap_or_else(|| "meshlb".into()),
        tunnel: id,
        secret: tunnel::TunnelSecret(secret),
        pops: relays
            .iter()
            .filter(|(_, _, p)| *p == pin)
            .map(|(_, addr, _)| addr.clone())
            .collect(),
        pin: Some(pin),
    };
    Ok(envelope::ok(
        StatusCode::OK,
        json!(token.encode()),
        call.generation,
    ))
}
