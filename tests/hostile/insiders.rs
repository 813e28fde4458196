//! Insiders holding the cluster key: a prober claiming a datacenter the aggregators' regions
//! table lacks (its votes do not count), and drains forged by a prober or stamped in the
//! future (neither is in force; the operator's still are).

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use test_support::config::{Config, Lb, Monitor, Pool};
use test_support::*;

use super::world::{call, two_endpoints, wait_healthz};

/// A prober in WEU with `--dc`, its regions table `regions` (none: the embedded one).
pub fn prober(
    config: &std::path::Path,
    key: &std::path::Path,
    dc: &str,
    regions: Option<&std::path::Path>,
    seed: SocketAddr,
) -> std::process::Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_meshlb"));
    if let Some(r) = regions {
        cmd.arg("--regions").arg(r);
    }
    cmd.args(["prober", "--config", &config.display().to_string()])
        .args(["--region", "WEU", "--dc", dc])
        .args([
            "--listen",
            &free_udp().to_string(),
            "--seed",
            &seed.to_string(),
        ])
        .args(["--gossip-interval-ms", "100", "--key-file"])
        .arg(key)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("prober")
}

pub fn votes_count_only_from_datacenters_the_regions_table_lists() {
    let (scratch, key) = scratch_dir_with_key("hostile-roster");
    let dir = scratch.path();
    let origin = origin();
    let config = dir.join("meshlb.toml");
    Config::new()
        .monitor(Monitor::tcp("tcp").interval(1).timeout(1))
        .pool(
            Pool::new("web")
                .monitor("tcp")
                .regions(&["WEU"])
                .origin("a", ("127.0.0.1", origin.port)),
        )
        .load_balancer(Lb::new("www.hostile.test").pools(&["web"]))
        .write(&config);
    // The embedded table refuses an unknown datacenter at start, with the ones it knows.
    let out = Command::new(env!("CARGO_BIN_EXE_meshlb"))
        .args(["prober", "--config", &config.display().to_string()])
        .args(["--region", "WEU", "--dc", "rogue", "--key-file"])
        .arg(&key)
        .args(["--listen", &free_udp().to_string()])
        .output()
        .expect("prober");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--dc rogue: not a datacenter of WEU") && stderr.contains("ams, fra, lhr"),
        "{stderr}"
    );
    // An insider with its own regions table claims a datacenter the aggregators' table lacks.
    let rogue_table = dir.join("regions.toml");
    let embedded = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/regions.toml"))
        .expect("regions.toml");
    std::fs::write(
        &rogue_table,
        embedded.replacen("code = \"ams\"", "code = \"rogue\"", 1),
    )
    .expect("rogue table");
    let admin = free_tcp();
    let seed = free_udp();
    let mut procs = Procs(vec![start_aggregator(
        &config,
        &key,
        "WEU",
        admin,
        seed,
        &[],
    )]);
    // Probers join the aggregator at the gossip address it tells in /members.
    wait_healthz(admin);
    let mut agg_gossip: Option<SocketAddr> = None;
    wait_for(
        "the aggregator in /members",
        Duration::from_secs(10),
        || {
            agg_gossip = get(admin, "/members")
                .and_then(|m| m[0]["address"].as_str().map(str::to_string))
                .and_then(|a| a.parse::<SocketAddr>().ok());
            agg_gossip.is_some()
        },
    );
    let agg_gossip = agg_gossip.expect("aggregator gossip address");
    procs.0.push(prober(
        &config,
        &key,
        "rogue",
        Some(&rogue_table),
        agg_gossip,
    ));
    wait_for(
        "the rogue prober is a live member",
        Duration::from_secs(20),
        || {
            get(admin, "/members").is_some_and(|m| {
                m.as_array().is_some_and(|a| {
                    a.iter()
                        .any(|n| n["datacenter"] == "rogue" && n["alive"] == true)
                })
            })
        },
    );
    wait_for("the off-roster gauge", Duration::from_secs(10), || {
        scrape(admin)
            .lines()
            .any(|l| l.starts_with("meshlb_off_roster_probers{") && l.ends_with(" 1"))
    });
    let verdict = || {
        get(admin, "/status").and_then(|s| {
            s["pools"][0]["endpoints"][0]["verdict"]
                .as_str()
                .map(str::to_string)
        })
    };
    assert_eq!(
        verdict().as_deref(),
        Some("unknown"),
        "the rogue's votes do not count"
    );
    // An honest prober in a listed datacenter: its vote counts.
    procs.0.push(prober(&config, &key, "fra", None, agg_gossip));
    wait_for(
        "a verdict from the honest prober",
        Duration::from_secs(20),
        || verdict().as_deref() == Some("healthy"),
    );
    let status = get(admin, "/status").expect("status");
    let dcs = &status["pools"][0]["endpoints"][0]["regions"][0];
    assert_eq!(
        (dcs["healthy_dcs"].as_u64(), dcs["silent_dcs"].as_u64()),
        (Some(1), Some(0)),
        "{dcs:#}"
    );
}

pub fn drains_forged_by_a_prober_or_stamped_in_the_future_change_nothing() {
    use mesh::keys::{encode_drains, DrainDecision, DRAINS};
    let (scratch, key) = scratch_dir_with_key("hostile-drains");
    let config = scratch.path().join("meshlb.toml");
    std::fs::write(
        &config,
        two_endpoints("192.0.2.1", "192.0.2.2", "www.hostile.test"),
    )
    .expect("config");
    let admin = free_tcp();
    let _p = Procs(vec![start_aggregator(
        &config,
        &key,
        "WEU",
        admin,
        free_udp(),
        &admin_token_args(scratch.path()),
    )]);
    wait_healthz(admin);
    let mut seed = String::new();
    wait_for(
        "the aggregator in /members",
        Duration::from_secs(10),
        || {
            seed = get(admin, "/members")
                .and_then(|m| m[0]["address"].as_str().map(str::to_string))
                .unwrap_or_default();
            !seed.is_empty()
        },
    );
    let now_ms = lb_core::clock::unix_ms();
    let decision = |endpoint: &str, at_ms: u64| DrainDecision {
        pool: "web".into(),
        endpoint: endpoint.into(),
        draining: true,
        since: now_ms / 1000,
        at_ms,
    };
    let passphrase = std::fs::read_to_string(&key).expect("key");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let _insiders = runtime.block_on(async {
        let mut nodes = Vec::new();
        // A prober drains a; a node claiming to be an aggregator drains b for ever.
        for (name, role, d) in [
            ("insider-prober", mesh::Role::Prober, decision("a", now_ms)),
            (
                "insider-aggregator",
                mesh::Role::Aggregator,
                decision("b", u64::MAX),
            ),
        ] {
            let node = mesh::start(
                &mesh::NodeIdentity {
                    node_id: name.into(),
                    role,
                    region: "WEU".into(),
                    datacenter: "fra".into(),
                    config_hash: String::new(),
                    config_loaded_at: 0,
                },
                &mesh::MeshSettings {
                    cluster_id: "meshlb".into(),
                    listen: free_udp(),
                    advertise: None,
                    aliases: Vec::new(),
                    send_format: mesh::SendFormat::Bound,
                    seeds: vec![seed.clone()],
                    gossip_interval: Duration::from_millis(100),
                    keys: mesh::KeyRing::new(passphrase.trim(), None).expect("key"),
                    dead_node_grace: Duration::from_secs(60),
                    max_datagram: None,
                    tier: mesh::Tier::Core,
                },
            )
            .await
            .expect("insider");
            let value = encode_drains(&[d]);
            node.handle
                .with_chitchat(|c| c.self_node_state().set(DRAINS, &value))
                .await;
            nodes.push(node);
        }
        nodes
    });
    wait_for("both insiders live", Duration::from_secs(20), || {
        get(admin, "/members").is_some_and(|m| {
            m.as_array().is_some_and(|a| {
                a.iter()
                    .filter(|n| {
                        n["node_id"]
                            .as_str()
                            .is_some_and(|id| id.starts_with("insider"))
                    })
                    .filter(|n| n["alive"] == true)
                    .count()
                    == 2
            })
        })
    });
    wait_for(
        "the future-stamped decision refused",
        Duration::from_secs(10),
        || {
            scrape(admin).lines().any(|l| {
                l.starts_with("meshlb_drain_decisions_refused_total") && !l.ends_with(" 0")
            })
        },
    );
    let drained = || {
        get(admin, "/drain")
            .and_then(|v| v.as_array().map(|a| a.len()))
            .unwrap_or(usize::MAX)
    };
    assert_eq!(drained(), 0, "neither forged drain is in force");
    // The operator still drains and undrains.
    let bearer = "Authorization: Bearer secret-token";
    assert_eq!(
        call(admin, "POST", "/drain?pool=web&endpoint=b", &[bearer]),
        200
    );
    assert_eq!(drained(), 1);
    assert_eq!(
        call(admin, "DELETE", "/drain?pool=web&endpoint=b", &[bearer]),
        200
    );
    assert_eq!(drained(), 0);
}
