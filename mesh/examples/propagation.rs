//! Gossip propagation benchmark for `bench/propagation.sh`: N chitchat nodes on loopback with
//! the sealed transport, in one process; one node changes a key, we time until every node has
//! seen it. Prints p50/p99/max over the rounds, and bytes sent per node per second.
//!
//! `propagation --nodes 39 --interval-ms 100 --rounds 30 [--keys 100]`

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use mesh::{KeyRing, MeshSettings, NodeIdentity};

mod support;
use support::{arg, cpu_seconds};

fn free() -> SocketAddr {
    UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("port")
}

fn main() {
    let nodes: usize = arg("--nodes", "39").parse().unwrap_or(39);
    let interval = Duration::from_millis(arg("--interval-ms", "100").parse().unwrap_or(100));
    let rounds: usize = arg("--rounds", "30").parse().unwrap_or(30);
    let keys: usize = arg("--keys", "100").parse().unwrap_or(100);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let ring = KeyRing::new("propagation benchmark cluster key", None).expect("key");
        let first = free();
        let mut members = Vec::new();
        for i in 0..nodes {
            let listen = if i == 0 { first } else { free() };
            let settings = MeshSettings {
                cluster_id: "bench".into(),
                listen,
                advertise: None,
                aliases: Vec::new(),
                send_format: mesh::SendFormat::Bound,
                seeds: if i == 0 { vec![] } else { vec![first.to_string()] },
                gossip_interval: interval,
                keys: ring.clone(),
                dead_node_grace: mesh::DEAD_NODE_GRACE,
                max_datagram: None,
                tier: mesh::Tier::Core,
            };
            let identity = NodeIdentity { node_id: format!("n{i:03}"), role: mesh::Role::Prober, region: "WEU".into(), datacenter: format!("dc{i}"), config_hash: "x".into(), config_loaded_at: 0 };
            let node = mesh::start(&identity, &settings).await.expect("node");
            // A realistic state: `keys` pool values of ~2 KB per node.
            node.handle
                .with_chitchat(|c| {
                    for k in 0..keys {
                        c.self_node_state().set(format!("pool/p{k}"), "e\tH\t12.5\t200\t\n".repeat(80));
                    }
                })
                .await;
            members.push(node);
        }
        // Wait (bounded) for the mesh to converge: every node sees every node's keys.
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let mut ok = true;
            for m in &members {
                let c = m.handle.chitchat();
                let c = c.lock().await;
                if c.node_states().len() < nodes || c.live_nodes().count() < nodes || c.node_states().values().any(|s| s.key_values().count() < keys) {
                    ok = false;
                    break;
                }
            }
            if ok || Instant::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let bytes0: u64 = members.iter().map(|m| m.stats.bytes_sent.load(Ordering::Relaxed)).sum();
        let cpu0 = cpu_seconds("self");
        let t0 = Instant::now();
        let mut times = Vec::new();
        for round in 0..rounds {
            let writer = &members[round % nodes];
            let value = format!("round-{round}");
            let started = Instant::now();
            writer.handle.with_chitchat(|c| c.self_node_state().set("pool/p0", value.clone())).await;
            let writer_id = writer.handle.chitchat_id().node_id.to_string();
            let deadline = started + Duration::from_secs(10);
            loop {
                let mut all = true;
                for m in &members {
                    let c = m.handle.chitchat();
                    let c = c.lock().await;
                    let seen = c.node_states().iter().any(|(id, s)| *id.node_id == *writer_id && s.get("pool/p0") == Some(value.as_str()));
                    if !seen {
                        all = false;
                        break;
                    }
                }
                if all || Instant::now() > deadline {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            times.push(started.elapsed().as_secs_f64() * 1000.0);
            if std::env::var_os("PROPAGATION_TRACE").is_some() {
                let late: Vec<String> = {
                    let mut late = Vec::new();
                    for m in &members {
                        let c = m.handle.chitchat();
                        let c = c.lock().await;
                        if !c.node_states().iter().any(|(id, s)| *id.node_id == *writer_id && s.get("pool/p0") == Some(value.as_str())) {
                            late.push(format!("{} (live {})", m.handle.chitchat_id().node_id, c.live_nodes().count()));
                        }
                    }
                    late
                };
                eprintln!("round {round} writer {writer_id}: {:.0} ms, not reached: {late:?}", times[times.len() - 1]);
            }
            tokio::time::sleep(interval * 2).await;
        }
        let secs = t0.elapsed().as_secs_f64();
        // The whole process: every node's gossip, plus this loop's polling (the same in every run).
        let cpu = cpu_seconds("self") - cpu0;
        // The first change after a cold start races the tail of the bulk state transfer (each
        // exchange carries at most one datagram of deltas), so it is reported on its own.
        let first = times.remove(0);
        let bytes: u64 = members.iter().map(|m| m.stats.bytes_sent.load(Ordering::Relaxed)).sum::<u64>() - bytes0;
        let rejected: u64 = members.iter().map(|m| m.stats.rejected.load(Ordering::Relaxed)).sum();
        times.sort_by(|a, b| a.total_cmp(b));
        let pct = |p: f64| times[((times.len() as f64 - 1.0) * p).round() as usize];
        println!(
            "{{\"nodes\":{nodes},\"keys_per_node\":{keys},\"interval_ms\":{},\"rounds\":{rounds},\"first_after_sync_ms\":{first:.0},\"p50_ms\":{:.0},\"p99_ms\":{:.0},\"max_ms\":{:.0},\"kib_sent_per_node_per_s\":{:.1},\"cpu_ms_per_node_per_s\":{:.1},\"rejected\":{rejected}}}",
            interval.as_millis(),
            pct(0.5),
            pct(0.99),
            times.last().copied().unwrap_or(0.0),
            bytes as f64 / 1024.0 / nodes as f64 / secs,
            cpu * 1000.0 / nodes as f64 / secs,
        );
        for m in members {
            let _ = m.handle.shutdown().await;
        }
    });
}
