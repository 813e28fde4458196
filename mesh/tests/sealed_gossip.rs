//! The sealed gossip transport with real chitchat nodes on loopback UDP: members with the key
//! converge, a node with the wrong key neither joins nor injects anything, and its packets are
//! counted as rejected.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chitchat::{
    spawn_chitchat, ChitchatConfig, ChitchatHandle, ChitchatId, FailureDetectorConfig,
    ProtocolVersion,
};
use mesh::{KeyRing, Recipient, SealedTransport, SendFormat, TransportStats};

const KEY: &str = "meshlb test cluster passphrase";

fn free_udp() -> SocketAddr {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    s.local_addr().expect("addr")
}

async fn node(
    name: &str,
    key: &str,
    seeds: &[SocketAddr],
) -> (ChitchatHandle, Arc<TransportStats>, SocketAddr) {
    node_sending(name, key, seeds, SendFormat::Bound).await
}

async fn node_sending(
    name: &str,
    key: &str,
    seeds: &[SocketAddr],
    send: SendFormat,
) -> (ChitchatHandle, Arc<TransportStats>, SocketAddr) {
    let addr = free_udp();
    let transport = SealedTransport::new(
        KeyRing::new(key, None).expect("key"),
        "test-cluster",
        Recipient::new(addr, None, &[]),
        send,
    );
    let stats = transport.stats();
    let config = ChitchatConfig {
        chitchat_id: ChitchatId::new(name.to_string(), 1, addr),
        cluster_id: "test-cluster".to_string(),
        gossip_interval: Duration::from_millis(100),
        listen_addr: addr,
        seed_nodes: seeds.iter().map(|s| s.to_string()).collect(),
        failure_detector_config: FailureDetectorConfig {
            initial_interval: Duration::from_millis(100),
            ..FailureDetectorConfig::default()
        },
        marked_for_deletion_grace_period: Duration::from_secs(60),
        catchup_callback: None,
        extra_liveness_predicate: None,
        protocol_version: ProtocolVersion::V0,
        bounded: None,
        tier: chitchat::Tier::Core,
        view: chitchat::ViewSettings::default(),
    };
    let handle = spawn_chitchat(config, vec![("role".into(), name.into())], &transport)
        .await
        .expect("spawn");
    (handle, stats, addr)
}

async fn sees(h: &ChitchatHandle, name: &str, key: &str, value: &str) -> bool {
    let chitchat = h.chitchat();
    let c = chitchat.lock().await;
    c.node_states()
        .iter()
        .any(|(id, st)| &*id.node_id == name && st.get(key) == Some(value))
}

/// A rolling upgrade: a node sending the unbound formats (as a node of an earlier version
/// does) and nodes sending bound ones hear each other both ways.
#[tokio::test]
async fn nodes_sending_bound_and_unbound_formats_gossip_together() {
    let (old, old_stats, old_addr) = node_sending("old", KEY, &[], SendFormat::Unbound).await;
    let (new, new_stats, _) = node("new", KEY, &[old_addr]).await;
    assert!(
        holds_within(Duration::from_secs(10), || async {
            sees(&old, "new", "role", "new").await && sees(&new, "old", "role", "old").await
        })
        .await,
        "the two did not converge"
    );
    for stats in [old_stats, new_stats] {
        assert_eq!(stats.misaddressed.load(Ordering::Relaxed), 0);
        assert_eq!(stats.rejected.load(Ordering::Relaxed), 0);
    }
}

#[tokio::test]
async fn sealed_gossip_converges_and_shuts_out_the_wrong_key() {
    let (a, a_stats, a_addr) = node("a", KEY, &[]).await;
    let (b, _, _) = node("b", KEY, &[a_addr]).await;
    let (c, _, _) = node("c", KEY, &[a_addr]).await;
    let (intruder, intruder_stats, _) =
        node("intruder", "a different passphrase entirely", &[a_addr]).await;
    b.with_chitchat(|cc| cc.self_node_state().set("verdict", "healthy"))
        .await;
    intruder
        .with_chitchat(|cc| cc.self_node_state().set("verdict", "forged"))
        .await;
    // Bounded wait for convergence.
    holds_within(Duration::from_secs(10), || async {
        sees(&a, "b", "verdict", "healthy").await && sees(&c, "b", "verdict", "healthy").await
    })
    .await;
    assert!(
        sees(&a, "b", "verdict", "healthy").await,
        "a learned b's key through sealed gossip"
    );
    assert!(
        sees(&c, "b", "verdict", "healthy").await,
        "c learned it too"
    );
    // Wait until the intruder has demonstrably tried: its packets reached `a` and were refused.
    holds_within(Duration::from_secs(10), || async {
        a_stats.rejected.load(Ordering::Relaxed) >= 3
    })
    .await;
    for h in [&a, &b, &c] {
        assert!(
            !sees(h, "intruder", "verdict", "forged").await,
            "the wrong key injects nothing"
        );
        let chitchat = h.chitchat();
        let members: Vec<String> = chitchat
            .lock()
            .await
            .node_states()
            .keys()
            .map(|id| id.node_id.to_string())
            .collect();
        assert!(!members.contains(&"intruder".to_string()), "{members:?}");
    }
    assert!(
        a_stats.rejected.load(Ordering::Relaxed) > 0,
        "a counted the intruder's packets"
    );
    assert!(
        !sees(&intruder, "b", "verdict", "healthy").await,
        "and the intruder learned nothing"
    );
    assert!(
        intruder_stats.rejected.load(Ordering::Relaxed) > 0
            || intruder_stats.datagrams_received.load(Ordering::Relaxed) == 0
    );
    for h in [a, b, c, intruder] {
        let _ = h.shutdown().await;
    }
}

#[tokio::test]
async fn large_states_arrive_whole() {
    let (a, _, a_addr) = node("a", KEY, &[]).await;
    let (b, b_stats, _) = node("b", KEY, &[a_addr]).await;
    // 3,000 keys (~100 KB): several deltas, each sealed, some near the datagram limit.
    b.with_chitchat(|cc| {
        // Random (incompressible) values: chitchat compresses deltas.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for i in 0..3000 {
            cc.self_node_state()
                .set(format!("k{i:04}"), random_text(&mut x, 20));
        }
    })
    .await;
    let count = || async {
        let chitchat = a.chitchat();
        let c = chitchat.lock().await;
        c.node_states()
            .iter()
            .filter(|(id, _)| &*id.node_id == "b")
            .map(|(_, st)| {
                st.key_values()
                    .filter(|(k, v)| k.starts_with('k') && v.len() == 20)
                    .count()
            })
            .sum::<usize>()
    };
    holds_within(Duration::from_secs(10), || async { count().await == 3000 }).await;
    assert_eq!(count().await, 3000, "every value arrived");
    // Whether a delta needed two datagrams depends on how tightly chitchat packed it
    // (it compresses); the split itself is tested in `mesh::transport`.
    let _ = b_stats;
    for h in [a, b] {
        let _ = h.shutdown().await;
    }
}

/// A dead member's state stops being gossiped and is forgotten after the grace period
/// (`MeshSettings::dead_node_grace`), instead of chitchat's day: a killed prober's old
/// generation must not stay in every digest.
#[tokio::test]
async fn a_dead_members_state_is_forgotten_after_the_grace_period() {
    let settings = |listen: SocketAddr, seeds: Vec<String>| mesh::MeshSettings {
        dead_node_grace: Duration::from_secs(4),
        ..mesh_settings(listen, seeds)
    };
    let a_addr = free_udp();
    let a = mesh::start(&identity("a"), &settings(a_addr, vec![]))
        .await
        .expect("a");
    let b = mesh::start(
        &identity("b"),
        &settings(free_udp(), vec![a_addr.to_string()]),
    )
    .await
    .expect("b");
    let known = |name: &'static str| {
        let chitchat = a.handle.chitchat();
        async move {
            let c = chitchat.lock().await;
            c.node_states().keys().any(|id| &*id.node_id == name)
        }
    };
    assert!(
        holds_within(Duration::from_secs(10), || known("b")).await,
        "b never joined"
    );
    b.handle.shutdown().await.expect("b stops");
    // Seen dead after a few intervals, forgotten 4 s later: well within 30 s.
    let gone = || {
        let known = known("b");
        async move { !known.await }
    };
    assert!(
        holds_within(Duration::from_secs(30), gone).await,
        "b's state is still kept after 30 s"
    );
    let _ = a.handle.shutdown().await;
}

/// `len` printable characters from a xorshift generator at state `x`: text zstd cannot
/// shrink.
fn random_text(x: &mut u64, len: usize) -> String {
    (0..len)
        .map(|_| {
            *x ^= *x << 13;
            *x ^= *x >> 7;
            *x ^= *x << 17;
            char::from(b'!' + (*x % 94) as u8)
        })
        .collect()
}

/// A member's settings for `mesh::start`: 100 ms gossip, full digests.
fn mesh_settings(listen: SocketAddr, seeds: Vec<String>) -> mesh::MeshSettings {
    mesh::MeshSettings {
        cluster_id: "test-cluster".into(),
        listen,
        advertise: None,
        aliases: Vec::new(),
        send_format: mesh::SendFormat::Bound,
        seeds,
        gossip_interval: Duration::from_millis(100),
        keys: KeyRing::new(KEY, None).expect("key"),
        dead_node_grace: mesh::DEAD_NODE_GRACE,
        max_datagram: None,
        tier: mesh::Tier::Core,
    }
}

/// A prober in WEU named `name`.
fn identity(name: &str) -> mesh::NodeIdentity {
    mesh::NodeIdentity {
        node_id: name.into(),
        role: mesh::Role::Prober,
        region: "WEU".into(),
        datacenter: name.into(),
        config_hash: "x".into(),
        config_loaded_at: 0,
    }
}

/// Whether `ok` holds within `within` (checked every 50 ms).
async fn holds_within<F: std::future::Future<Output = bool>>(
    within: Duration,
    mut ok: impl FnMut() -> F,
) -> bool {
    let start = Instant::now();
    while start.elapsed() < within {
        if ok().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// A gossip message whose delta stream would decompress to gigabytes (blocks of 64 KiB of
/// zeros, ~20 bytes each compressed) is refused once it passes 8 MiB
/// (vendor/chitchat/PATCHES.md, patch 4), rather than allocated.
#[test]
fn a_decompression_bomb_is_refused() {
    use chitchat::{ChitchatEnvelope, ChitchatMessage, ProtocolVersion};
    let zeros = vec![0u8; u16::MAX as usize];
    let block = zstd::bulk::compress(&zeros, 19).expect("compress");
    assert!(block.len() < 100, "{}", block.len());
    let mut bytes = ChitchatEnvelope {
        version: ProtocolVersion::V0,
        message: ChitchatMessage::BadCluster,
        peers: Vec::new(),
    }
    .serialize_to_vec();
    bytes.truncate(3); // magic and protocol version
    bytes.push(2); // an Ack: a delta follows
    for _ in 0..2_000 {
        bytes.push(1); // a compressed block
        bytes.extend_from_slice(&(block.len() as u16).to_le_bytes());
        bytes.extend_from_slice(&block);
    }
    bytes.push(0); // no more blocks
    assert!(
        bytes.len() < 200_000,
        "two datagrams' worth: {}",
        bytes.len()
    );
    let err = ChitchatEnvelope::deserialize(&mut bytes.as_slice()).expect_err("refused");
    assert!(
        format!("{err:#}").contains("decompresses to more than"),
        "{err:#}"
    );
}

/// An Ack from a key holder whose delta names a key version above its own `max_version`
/// (upstream chitchat applies it and trips an `assert!`, panicking the gossip task) is
/// refused and counted, and the node goes on gossiping (vendor/chitchat/PATCHES.md, patch 3).
#[tokio::test]
async fn a_malformed_delta_is_refused_and_the_node_keeps_gossiping() {
    let (a, _, a_addr) = node("a", KEY, &[]).await;
    let id = a.chitchat_id().clone();
    // The delta's ops (chitchat's wire format, serialize.rs and delta.rs): this node, then a
    // key at version 200,000, then a max_version of 100,000 below it.
    let mut ops = vec![0u8]; // Node
    ops.extend_from_slice(&(id.node_id.len() as u16).to_le_bytes());
    ops.extend_from_slice(id.node_id.as_bytes());
    ops.extend_from_slice(&id.generation_id.to_le_bytes());
    match id.gossip_advertise_addr {
        SocketAddr::V4(v4) => {
            ops.push(4);
            ops.extend_from_slice(&v4.ip().octets());
        }
        SocketAddr::V6(v6) => {
            ops.push(6);
            ops.extend_from_slice(&v6.ip().octets());
        }
    }
    ops.extend_from_slice(&id.gossip_advertise_addr.port().to_le_bytes());
    ops.extend_from_slice(&0u64.to_le_bytes()); // last_gc_version
    ops.extend_from_slice(&0u64.to_le_bytes()); // from_version_excluded
    ops.push(1); // KeyValue
    for s in ["forged", "value"] {
        ops.extend_from_slice(&(s.len() as u16).to_le_bytes());
        ops.extend_from_slice(s.as_bytes());
    }
    ops.extend_from_slice(&200_000u64.to_le_bytes());
    ops.push(0); // Set
    ops.push(2); // SetMaxVersion
    ops.extend_from_slice(&100_000u64.to_le_bytes());
    let mut envelope = chitchat::ChitchatEnvelope {
        version: ProtocolVersion::V0,
        message: chitchat::ChitchatMessage::BadCluster,
        peers: Vec::new(),
    }
    .serialize_to_vec();
    envelope.truncate(3);
    envelope.push(2); // Ack
    envelope.push(2); // an uncompressed block
    envelope.extend_from_slice(&(ops.len() as u16).to_le_bytes());
    envelope.extend_from_slice(&ops);
    envelope.push(0); // no more blocks
    assert!(chitchat::ChitchatEnvelope::deserialize(&mut envelope.as_slice()).is_ok());
    let before = chitchat::MALFORMED_DELTAS.load(Ordering::Relaxed);
    let ring = KeyRing::new(KEY, None).expect("key");
    let insider = tokio::net::UdpSocket::bind("127.0.0.1:0")
        .await
        .expect("udp");
    let now = lb_core::clock::unix_ms();
    for d in mesh::seal::seal_datagrams(&ring, "test-cluster", now, &envelope, 9, Some(a_addr)) {
        insider.send_to(&d, a_addr).await.expect("send");
    }
    assert!(
        holds_within(Duration::from_secs(5), || async {
            chitchat::MALFORMED_DELTAS.load(Ordering::Relaxed) > before
        })
        .await,
        "the delta was not refused as malformed"
    );
    // Still alive: a new member joins and is seen.
    let (b, _, _) = node("b", KEY, &[a_addr]).await;
    assert!(
        holds_within(Duration::from_secs(10), || sees(&a, "b", "role", "b")).await,
        "a stopped gossiping"
    );
    assert!(
        !sees(&a, "a", "forged", "value").await,
        "the forged key was not applied"
    );
    for h in [a, b] {
        let _ = h.shutdown().await;
    }
}

/// The live-nodes watcher is only fed while someone holds it (vendor/chitchat/PATCHES.md,
/// patch 5), and one taken after the mesh formed still learns the members and a key change.
#[tokio::test]
async fn a_live_nodes_watcher_taken_late_still_sees_members_and_changes() {
    let (a, _, a_addr) = node("a", KEY, &[]).await;
    let (b, _, _) = node("b", KEY, &[a_addr]).await;
    assert!(
        holds_within(Duration::from_secs(10), || sees(&a, "b", "role", "b")).await,
        "the mesh forms"
    );
    let mut watcher = a.chitchat().lock().await.live_nodes_watcher();
    b.with_chitchat(|c| c.self_node_state().set("pool/x", "changed"))
        .await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = false;
    while !seen && Instant::now() < deadline {
        seen = watcher
            .borrow_and_update()
            .iter()
            .any(|(id, s)| &*id.node_id == "b" && s.get("pool/x") == Some("changed"));
        if !seen {
            let _ = tokio::time::timeout(Duration::from_millis(500), watcher.changed()).await;
        }
    }
    assert!(seen, "the watcher shows b's change");
    let _ = b.shutdown().await;
    let _ = a.shutdown().await;
}

/// Bounded gossip (`MeshSettings::max_datagram`, vendor/chitchat/PATCHES.md patch 6) over
/// real UDP: a state far larger than the bound reaches the peer, in datagrams none of which
/// is over it.
#[tokio::test]
async fn bounded_gossip_carries_a_large_state_in_datagrams_within_the_bound() {
    const BOUND: usize = 600;
    let settings = |listen: SocketAddr, seeds: Vec<String>| mesh::MeshSettings {
        gossip_interval: Duration::from_millis(50),
        max_datagram: Some(BOUND),
        tier: mesh::Tier::Core,
        ..mesh_settings(listen, seeds)
    };
    let a_addr = free_udp();
    let a = mesh::start(&identity("a"), &settings(a_addr, vec![]))
        .await
        .expect("a");
    let b = mesh::start(
        &identity("b"),
        &settings(free_udp(), vec![a_addr.to_string()]),
    )
    .await
    .expect("b");
    // 300 incompressible values of 40 bytes: ~15 KB, 25 times the bound.
    b.handle
        .with_chitchat(|cc| {
            let mut x: u64 = 0x2545_f491_4f6c_dd1d;
            for i in 0..300 {
                cc.self_node_state()
                    .set(format!("k{i:03}"), random_text(&mut x, 40));
            }
        })
        .await;
    let count = || async {
        let chitchat = a.handle.chitchat();
        let c = chitchat.lock().await;
        c.node_states()
            .iter()
            .filter(|(id, _)| &*id.node_id == "b")
            .map(|(_, st)| st.key_values().filter(|(k, _)| k.starts_with('k')).count())
            .sum::<usize>()
    };
    holds_within(Duration::from_secs(20), || async { count().await == 300 }).await;
    assert_eq!(count().await, 300, "every value arrived");
    for stats in [&a.stats, &b.stats] {
        let largest = stats.max_datagram.load(Ordering::Relaxed);
        assert!(
            largest > 0 && largest <= BOUND as u64,
            "a datagram of {largest} bytes"
        );
    }
    let _ = a.handle.shutdown().await;
    let _ = b.handle.shutdown().await;
}

/// A bounded digest (protocol version 2) that claims more heartbeats than its bytes hold is
/// refused before anything is allocated for them.
#[test]
fn a_bounded_digest_claiming_more_heartbeats_than_it_holds_is_refused() {
    use chitchat::{ChitchatEnvelope, ChitchatMessage, ProtocolVersion};
    let mut bytes = ChitchatEnvelope {
        version: ProtocolVersion::V2,
        message: ChitchatMessage::BadCluster,
        peers: Vec::new(),
    }
    .serialize_to_vec();
    bytes.truncate(3); // magic and protocol version
    bytes.push(0); // a Syn: a digest follows
    bytes.push(1); // partial
    bytes.extend_from_slice(&0u16.to_le_bytes()); // no entries
    bytes.extend_from_slice(&u16::MAX.to_le_bytes()); // 65,535 heartbeats
    bytes.extend_from_slice(&[0; 32]); // room for two
    let err = ChitchatEnvelope::deserialize(&mut bytes.as_slice()).expect_err("refused");
    assert!(
        format!("{err:#}").contains("65535 heartbeats in 32 bytes"),
        "{err:#}"
    );
}
