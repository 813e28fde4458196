//! Gossip propagation across separate processes, for `bench/propagation.sh` (`PROCESSES=1`):
//! this program starts N copies of itself, each one sealed chitchat node on loopback holding
//! `keys` pool values of ~2 KB, waits until every node sees every other's state, then has one
//! node after another change a pool value and times until the last node has seen it. Each
//! child notes the wall-clock time at which chitchat applied the change (its key-change
//! listener), so the figure is not slowed by polling. Prints one JSON line: p50/p99/max over
//! the rounds, KiB sent and CPU ms per node-second (the children's own /proc accounting).
//!
//! `propagation_processes --nodes 100 --interval-ms 300 --rounds 31 --keys 100`
//! (`--max-datagram 1400`: bounded gossip, `MeshSettings::max_datagram`).

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, UdpSocket};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mesh::{KeyRing, MeshSettings, NodeIdentity};

mod support;
use support::{arg, cpu_seconds};

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// A pool value of ~2 KB, as a prober publishes for a pool of ~100 endpoints.
fn pool_value(tag: &str) -> String {
    format!("{tag}\n{}", "e\tH\t12.5\t200\t\n".repeat(80))
}

fn main() {
    if let Ok(i) = arg("--child", "").parse::<usize>() {
        child(i);
    } else {
        parent();
    }
}

/// One node: commands on stdin (`write TAG`, `stats`), events on stdout.
fn child(i: usize) {
    let nodes: usize = arg("--nodes", "39").parse().unwrap_or(39);
    let keys: usize = arg("--keys", "100").parse().unwrap_or(100);
    let interval = Duration::from_millis(arg("--interval-ms", "100").parse().unwrap_or(100));
    let listen: SocketAddr = arg("--listen", "").parse().expect("--listen");
    let seed = arg("--seed", "");
    // 0: full digests (the default wire); else bounded gossip at this many bytes.
    let max_datagram: usize = arg("--max-datagram", "0").parse().unwrap_or(0);
    let (out, lines) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        let stdout = std::io::stdout();
        for line in lines {
            let mut o = stdout.lock();
            if writeln!(o, "{line}").and_then(|_| o.flush()).is_err() {
                std::process::exit(0);
            }
        }
    });
    let (commands, mut command_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if commands.send(line).is_err() {
                break;
            }
        }
        std::process::exit(0);
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let settings = MeshSettings {
            cluster_id: "bench".into(),
            listen,
            advertise: None,
            aliases: Vec::new(),
            send_format: mesh::SendFormat::Bound,
            seeds: if seed.is_empty() { vec![] } else { vec![seed] },
            gossip_interval: interval,
            keys: KeyRing::new("propagation benchmark cluster key", None).expect("key"),
            dead_node_grace: mesh::DEAD_NODE_GRACE,
            max_datagram: (max_datagram > 0).then_some(max_datagram),
            tier: mesh::Tier::Core,
        };
        let identity = NodeIdentity {
            node_id: format!("n{i:03}"),
            role: mesh::Role::Prober,
            region: "WEU".into(),
            datacenter: format!("dc{i}"),
            config_hash: "x".into(),
            config_loaded_at: 0,
        };
        let node = mesh::start(&identity, &settings).await.expect("node");
        let seen = out.clone();
        let _listener = node
            .handle
            .with_chitchat(|c| {
                for k in 0..keys {
                    c.self_node_state().set(format!("pool/p{k}"), pool_value("initial"));
                }
                let seen = seen.clone();
                c.subscribe_event("pool/p0", move |event| {
                    let tag = event.value.lines().next().unwrap_or("");
                    let _ = seen.send(format!("seen {} {tag} {}", event.node.node_id, now_ns()));
                })
            })
            .await;
        let mut ready = false;
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        loop {
            tokio::select! {
                _ = tick.tick(), if !ready => {
                    let c = node.handle.chitchat();
                    let c = c.lock().await;
                    ready = c.node_states().len() >= nodes
                        && c.live_nodes().count() >= nodes
                        && c.node_states().values().all(|s| s.key_values().count() >= keys);
                    if ready {
                        let _ = out.send("ready".into());
                    } else if std::env::var_os("PROPAGATION_TRACE").is_some() {
                        let keys_seen: usize = c.node_states().values().map(|s| s.key_values().count()).sum();
                        eprintln!("n{i:03}: {} states, {} live, {keys_seen} keys", c.node_states().len(), c.live_nodes().count());
                    }
                }
                command = command_rx.recv() => {
                    let Some(command) = command else { break };
                    if let Some(tag) = command.strip_prefix("write ") {
                        let value = pool_value(tag);
                        let at = now_ns();
                        node.handle.with_chitchat(|c| c.self_node_state().set("pool/p0", value.clone())).await;
                        let _ = out.send(format!("wrote {tag} {at}"));
                    } else if command == "stats" {
                        let _ = out.send(format!(
                            "stats {} {}",
                            node.stats.bytes_sent.load(Ordering::Relaxed),
                            node.stats.rejected.load(Ordering::Relaxed)
                        ));
                    }
                }
            }
        }
    });
}

/// `n` distinct free loopback ports (all held until all are picked, so none repeats).
fn free(n: usize) -> Vec<SocketAddr> {
    let held: Vec<UdpSocket> = (0..n)
        .map(|_| UdpSocket::bind("127.0.0.1:0").expect("port"))
        .collect();
    held.iter().map(|s| s.local_addr().expect("port")).collect()
}

struct Children {
    procs: Vec<Child>,
    stdins: Vec<ChildStdin>,
}

impl Drop for Children {
    fn drop(&mut self) {
        for p in &mut self.procs {
            let _ = p.kill();
            let _ = p.wait();
        }
    }
}

fn parent() {
    let nodes: usize = arg("--nodes", "39").parse().unwrap_or(39);
    let interval_ms: u64 = arg("--interval-ms", "100").parse().unwrap_or(100);
    let rounds: usize = arg("--rounds", "31").parse().unwrap_or(31);
    let keys: usize = arg("--keys", "100").parse().unwrap_or(100);
    let max_datagram = arg("--max-datagram", "0");
    let exe = std::env::current_exe().expect("own path");
    let addrs = free(nodes);
    let (events, rx) = mpsc::channel::<(usize, String)>();
    let mut children = Children {
        procs: Vec::new(),
        stdins: Vec::new(),
    };
    for (i, addr) in addrs.iter().enumerate() {
        let mut cmd = Command::new(&exe);
        cmd.args(["--child", &i.to_string(), "--nodes", &nodes.to_string()])
            .args([
                "--keys",
                &keys.to_string(),
                "--interval-ms",
                &interval_ms.to_string(),
            ])
            .args(["--listen", &addr.to_string()])
            .args(["--max-datagram", &max_datagram]);
        if i > 0 {
            cmd.args(["--seed", &addrs[0].to_string()]);
        }
        let mut p = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("child");
        let stdout = p.stdout.take().expect("stdout");
        children.stdins.push(p.stdin.take().expect("stdin"));
        children.procs.push(p);
        let events = events.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if events.send((i, line)).is_err() {
                    break;
                }
            }
            let _ = events.send((i, "exited".into()));
        });
    }
    // Every node ready: it sees every node live with all its keys (bounded).
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut ready = vec![false; nodes];
    while ready.iter().any(|r| !r) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((i, line)) if line == "ready" => ready[i] = true,
            Ok((i, line)) if line == "exited" => {
                eprintln!("node {i} exited before the mesh converged");
                std::process::exit(1);
            }
            Ok(_) => {}
            Err(_) => {
                eprintln!(
                    "{} of {nodes} nodes converged in 300 s",
                    ready.iter().filter(|r| **r).count()
                );
                std::process::exit(1);
            }
        }
    }
    let pids: Vec<u32> = children.procs.iter().map(Child::id).collect();
    let cpu0: f64 = pids.iter().map(|p| cpu_seconds(&p.to_string())).sum();
    let bytes0 = stats(&mut children, &rx, nodes).0;
    let t0 = Instant::now();
    let mut times = Vec::new();
    for round in 0..rounds {
        let writer = round % nodes;
        let tag = format!("round-{round}");
        writeln!(children.stdins[writer], "write {tag}").expect("command");
        let mut wrote = None;
        let mut seen = vec![None; nodes];
        seen[writer] = Some(0u128);
        let deadline = Instant::now() + Duration::from_secs(10);
        while wrote.is_none() || seen.iter().any(Option::is_none) {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok((i, line)) = rx.recv_timeout(left) else {
                break;
            };
            let f: Vec<&str> = line.split(' ').collect();
            match f.as_slice() {
                ["wrote", t, at] if *t == tag => wrote = at.parse::<u128>().ok(),
                ["seen", from, t, at] if *t == tag && *from == format!("n{writer:03}") => {
                    seen[i] = at.parse::<u128>().ok();
                }
                _ => {}
            }
        }
        let last = seen
            .iter()
            .map(|s| s.unwrap_or(u128::MAX))
            .max()
            .unwrap_or(0);
        let ms = match wrote {
            Some(w) if last != u128::MAX => last.saturating_sub(w) as f64 / 1e6,
            _ => 10_000.0,
        };
        times.push(ms);
        if std::env::var_os("PROPAGATION_TRACE").is_some() {
            eprintln!("round {round} writer n{writer:03}: {ms:.0} ms");
        }
        std::thread::sleep(Duration::from_millis(interval_ms * 2));
    }
    let secs = t0.elapsed().as_secs_f64();
    let cpu: f64 = pids
        .iter()
        .map(|p| cpu_seconds(&p.to_string()))
        .sum::<f64>()
        - cpu0;
    let (bytes1, rejected) = stats(&mut children, &rx, nodes);
    let first = times.remove(0);
    times.sort_by(|a, b| a.total_cmp(b));
    let pct = |p: f64| times[((times.len() as f64 - 1.0) * p).round() as usize];
    println!(
        "{{\"nodes\":{nodes},\"processes\":true,\"keys_per_node\":{keys},\"interval_ms\":{interval_ms},\"rounds\":{rounds},\"first_after_sync_ms\":{first:.0},\"p50_ms\":{:.0},\"p99_ms\":{:.0},\"max_ms\":{:.0},\"kib_sent_per_node_per_s\":{:.1},\"cpu_ms_per_node_per_s\":{:.1},\"rejected\":{rejected}}}",
        pct(0.5),
        pct(0.99),
        times.last().copied().unwrap_or(0.0),
        (bytes1 - bytes0) as f64 / 1024.0 / nodes as f64 / secs,
        cpu * 1000.0 / nodes as f64 / secs,
    );
}

/// Bytes sent and datagrams rejected, summed over every node.
fn stats(
    children: &mut Children,
    rx: &mpsc::Receiver<(usize, String)>,
    nodes: usize,
) -> (u64, u64) {
    for stdin in &mut children.stdins {
        let _ = writeln!(stdin, "stats");
    }
    let (mut bytes, mut rejected, mut got) = (0u64, 0u64, 0);
    let deadline = Instant::now() + Duration::from_secs(10);
    while got < nodes {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok((_, line)) = rx.recv_timeout(left) else {
            break;
        };
        if let Some(rest) = line.strip_prefix("stats ") {
            let mut f = rest.split(' ').map(|v| v.parse::<u64>().unwrap_or(0));
            bytes += f.next().unwrap_or(0);
            rejected += f.next().unwrap_or(0);
            got += 1;
        }
    }
    (bytes, rejected)
}
