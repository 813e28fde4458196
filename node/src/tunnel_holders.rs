//! The PoPs holding tunnels, read from gossip (`mesh::keys::TUNNEL_RELAY`,
//! `mesh::keys::TUNNELS_HELD`): what an aggregator or a prober without a connection of a
//! tunnel relays its streams through (`tunnel::TunnelDialer`).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use chitchat::Chitchat;
use mesh::keys;
use tunnel::{Holder, HolderList};

/// The live aggregators that publish a tunnel address and hold some tunnel.
pub fn read(c: &Chitchat) -> Vec<Holder> {
    let live: HashSet<_> = c.live_nodes().collect();
    c.node_states()
        .iter()
        .filter(|(id, _)| live.contains(id))
        .filter(|(_, st)| {
            mesh::Role::parse(st.get(keys::ROLE).unwrap_or("")) == mesh::Role::Aggregator
        })
        .filter_map(|(id, st)| {
            let held = st.get(keys::TUNNELS_HELD).filter(|h| !h.is_empty())?;
            Holder::read(&id.node_id, st.get(keys::TUNNEL_RELAY)?, Some(held))
        })
        .filter(|h| !h.tunnels.is_empty())
        .collect()
}

/// How often a prober reads the holders again.
pub const FOLLOW_EVERY: Duration = Duration::from_millis(250);

/// Keeps `holders` at what gossip says, read every `every`; runs for as long as the node.
pub async fn follow(
    gossip: Arc<tokio::sync::Mutex<Chitchat>>,
    holders: Arc<HolderList>,
    every: Duration,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let now = read(&*gossip.lock().await);
        holders.set(now);
    }
}
