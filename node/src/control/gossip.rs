//! What a node says of its config in gossip: the generation it runs, the one it refused (and
//! why), and on the primary the announcement followers fetch from (`announce.rs`).

use super::ControlPlane;

/// Sets this node's gossip values of the control plane.
pub async fn publish(
    handle: &chitchat::ChitchatHandle,
    plane: &ControlPlane,
    announcement: Option<String>,
) {
    let generation = plane.generation().to_string();
    let refused = plane
        .refused()
        .map(|r| format!("{} {} {}", r.generation, r.sha256, r.errors.join("; ")));
    handle
        .with_chitchat(|c| {
            let me = c.self_node_state();
            me.set(mesh::keys::CONFIG_GENERATION, &generation);
            // A writer announces under `config_primary` (writes go there), a relay under
            // `config_holds`.
            let key = if plane.role.takes_writes() {
                mesh::keys::CONFIG_PRIMARY
            } else {
                mesh::keys::CONFIG_HOLDS
            };
            if let Some(a) = &announcement {
                me.set(key, a);
            }
            match &refused {
                Some(r) => me.set(mesh::keys::CONFIG_REFUSED, r),
                None => {
                    if me.get(mesh::keys::CONFIG_REFUSED).is_some() {
                        me.delete(mesh::keys::CONFIG_REFUSED);
                    }
                }
            }
        })
        .await;
}
