//! Nodes started in-process through the library (`aggregator::node::start`,
//! `prober::node::start`): a config primary, and an aggregator and a prober that follow it
//! through gossip. No process boundary is tested
//! here (the root crate's tests/ spawn the `meshlb` binary for that): what is tested is the
//! config protocol end to end — a reload of the primary's file and a write through its config
//! task each become a generation that the follower fetches, checks and serves.

use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use aggregator::node::{AdminSettings, RunningNode, Settings};
use meshlb_node::control::{ConfigRole, ControlKey, ControlSettings};
use meshlb_node::NodeSettings;

const KEY: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

/// A pool `name` with one origin, as the config file writes it.
fn pool(name: &str) -> String {
    format!(
        "[[monitors]]\nname = \"tcp\"\ntype = \"tcp\"\ninterval = 5\ntimeout = 1\n\
         [[pools]]\nname = \"{name}\"\nmonitor = \"tcp\"\ncheck_regions = [\"WEU\"]\n\
         origins = [{{ name = \"a\", address = \"127.0.0.1\", port = 9 }}]\n"
    )
}

fn free_udp() -> SocketAddr {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("a free UDP port");
    socket.local_addr().expect("its address")
}

/// What a node of this file's mesh starts with: `id` in WEU/`dc`, gossiping on `listen`.
fn node(
    config: &Path,
    role: ConfigRole,
    id: &str,
    dc: &str,
    listen: SocketAddr,
    seed: SocketAddr,
) -> NodeSettings {
    NodeSettings {
        config: config.to_path_buf(),
        regions: lb_core::RegionsTable::embedded().expect("the embedded regions table"),
        region: lb_core::Region::Weu,
        dc: dc.into(),
        node_id: format!("{id}-{}", listen.port()),
        mesh: mesh::MeshSettings {
            cluster_id: "in-process".into(),
            listen,
            advertise: None,
            aliases: Vec::new(),
            send_format: mesh::SendFormat::Bound,
            seeds: vec![seed.to_string()],
            gossip_interval: Duration::from_millis(50),
            keys: mesh::KeyRing::new(KEY, None).expect("the cluster key"),
            dead_node_grace: mesh::DEAD_NODE_GRACE,
            max_datagram: None,
            tier: mesh::Tier::Core,
        },
        control: ControlSettings {
            role,
            key: ControlKey::new(KEY, None),
            max_document_bytes: 1 << 20,
            fetch_timeout: Duration::from_secs(10),
            fetch_trust: lb_tls::ClientTrust::default(),
            store: None,
            documents: meshlb_node::control::DocumentSettings {
                serve_max: 4,
                ..Default::default()
            },
        },
        reloads: meshlb_node::reload::ReloadSettings {
            on_hangup: false,
            watch: None,
        },
    }
}

fn settings(config: &Path, role: ConfigRole, listen: SocketAddr, seed: SocketAddr) -> Settings {
    Settings {
        node: node(config, role, "aggregator", "pop", listen, seed),
        affinity_key: lb_core::affinity::AffinityKey::derive(KEY.as_bytes()),
        relay_key: tunnel::RelayKey::derive(KEY.as_bytes()),
        config_advertise_url: None,
        admin: AdminSettings {
            addr: "127.0.0.1:0".parse().expect("an address"),
            credentials: std::sync::Arc::new(meshlb_node::credentials::AdminCredentials::fixed(
                aggregator::admin::Tokens::default(),
            )),
            plain: None,
            limits: meshlb_node::guard::Limits {
                head_timeout: Duration::from_secs(10),
                send_timeout: Duration::from_secs(10),
                max_connections: 16,
            },
            body: aggregator::admin::BodyLimits {
                max_bytes: 1 << 20,
                timeout: Duration::from_secs(10),
            },
            previews: aggregator::previews::PreviewLimits::default(),
        },
        dns: None,
        proxy: None,
        advertise_proxy: Vec::new(),
        l4: None,
        tunnels: None,
        state_dir: None,
        warmup_timeout: Duration::from_secs(30),
        install_metrics: false,
    }
}

/// A prober in WEU/ams that runs the mesh's config.
fn prober_settings(config: &Path, listen: SocketAddr, seed: SocketAddr) -> prober::node::Settings {
    prober::node::Settings {
        node: node(config, ConfigRole::Follower, "prober", "ams", listen, seed),
        concurrency: 4,
        metrics: None,
        previews: prober::preview::PreviewSettings::default(),
        relay_key: tunnel::RelayKey::derive(KEY.as_bytes()),
    }
}

/// A primary and its followers, started once for every test of this file.
struct Mesh {
    runtime: tokio::runtime::Runtime,
    primary: RunningNode,
    follower: RunningNode,
    prober: prober::node::RunningNode,
    primary_config: std::path::PathBuf,
    follower_config: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

fn mesh() -> &'static Mesh {
    static MESH: OnceLock<Mesh> = OnceLock::new();
    MESH.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let primary_config = dir.path().join("primary.toml");
        std::fs::write(&primary_config, pool("first")).expect("the primary's config");
        let runtime = tokio::runtime::Runtime::new().expect("a runtime");
        let seed = free_udp();
        let (primary, follower, prober) = runtime.block_on(async {
            let primary =
                aggregator::node::start(settings(&primary_config, ConfigRole::Primary, seed, seed))
                    .await
                    .expect("the primary starts");
            let follower = aggregator::node::start(settings(
                &dir.path().join("follower.toml"),
                ConfigRole::Follower,
                free_udp(),
                seed,
            ))
            .await
            .expect("the follower starts");
            let prober = prober::node::start(prober_settings(
                &dir.path().join("prober.toml"),
                free_udp(),
                seed,
            ))
            .await
            .expect("the prober starts");
            (primary, follower, prober)
        });
        Mesh {
            runtime,
            primary,
            follower,
            prober,
            primary_config,
            follower_config: dir.path().join("follower.toml"),
            _dir: dir,
        }
    })
}

/// One test changes the primary's config at a time: each waits for the generation its own
/// change made.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Waits (at most 20 s) until the follower runs `generation` and serves a pool `name` (any
/// pools, for an empty name).
fn follower_serves(m: &Mesh, generation: u64, name: &str) -> bool {
    let shared = &m.follower.shared;
    test_support::wait_until(Duration::from_secs(20), || {
        let config = shared.config();
        let has_pool = name.is_empty() || config.pools.iter().any(|p| p.name == name);
        shared.control.generation() >= generation && has_pool
    })
    .is_some()
}

#[test]
fn the_follower_runs_the_primarys_document() {
    let _one = one_at_a_time();
    let m = mesh();
    let primary = m.primary.shared.control.document.load_full();
    assert!(
        primary.generation >= 1,
        "the primary holds generation {}",
        primary.generation
    );
    assert!(follower_serves(m, primary.generation, ""));
    let follower = m.follower.shared.control.document.load_full();
    assert_eq!(follower.sha256, primary.sha256);
    assert_eq!(
        m.follower.shared.config().pools.len(),
        m.primary.shared.config().pools.len()
    );
}

#[test]
fn a_reload_of_the_primarys_file_reaches_the_follower() {
    let _one = one_at_a_time();
    let m = mesh();
    let before = m.primary.shared.control.generation();
    std::fs::write(&m.primary_config, pool("reloaded")).expect("the new file");
    let outcome = m
        .runtime
        .block_on(m.primary.handle.reload("a test"))
        .expect("the reload runs");
    assert!(outcome.reloaded, "{outcome:?}");
    let after = m.primary.shared.control.generation();
    assert_eq!(after, before + 1, "a changed file is the next generation");
    assert!(follower_serves(m, after, "reloaded"));
    assert!(prober_runs(m, after));
}

#[test]
fn a_write_through_the_config_task_reaches_the_follower() {
    let _one = one_at_a_time();
    let m = mesh();
    let plane = &m.primary.shared.control;
    let before = plane.generation();
    let writes = plane.writes.as_ref().expect("the primary takes writes");
    let written = m
        .runtime
        .block_on(meshlb_node::control::writes::submit(
            writes,
            "a test's write".into(),
            before,
            pool("written"),
        ))
        .expect("the write lands");
    assert_eq!(written.generation, before + 1);
    assert!(written.changed);
    assert!(follower_serves(m, written.generation, "written"));
    assert!(prober_runs(m, written.generation));
}

/// Waits (at most 20 s) until the prober runs `generation`.
fn prober_runs(m: &Mesh, generation: u64) -> bool {
    test_support::wait_until(Duration::from_secs(20), || {
        m.prober.control.generation() >= generation
    })
    .is_some()
}

#[test]
fn a_write_based_on_an_old_generation_is_a_conflict() {
    let _one = one_at_a_time();
    let m = mesh();
    let plane = &m.primary.shared.control;
    let writes = plane.writes.as_ref().expect("the primary takes writes");
    let stale = plane.generation().saturating_sub(1);
    let refused = m
        .runtime
        .block_on(meshlb_node::control::writes::submit(
            writes,
            "a stale write".into(),
            stale,
            pool("never"),
        ))
        .expect_err("refused");
    assert_eq!(refused.status, http::StatusCode::CONFLICT);
}

#[test]
fn a_follower_refuses_a_reload_of_its_file_edited_by_hand() {
    let _one = one_at_a_time();
    let m = mesh();
    let generation = m.primary.shared.control.generation();
    assert!(follower_serves(m, generation, ""), "the follower caught up");
    let mesh_text = m.follower.shared.control.document.load().text.to_string();
    std::fs::write(&m.follower_config, pool("by hand")).expect("an edit by hand");
    let outcome = m
        .runtime
        .block_on(m.follower.handle.reload("a test"))
        .expect("the reload is answered");
    std::fs::write(&m.follower_config, mesh_text).expect("the mesh's file back");
    assert!(!outcome.reloaded);
    assert_eq!(
        outcome.errors,
        vec![meshlb_node::control::protocol::FOLLOWER_REFUSES_FILE.to_string()]
    );
    assert!(!m
        .follower
        .shared
        .config()
        .pools
        .iter()
        .any(|p| p.name == "by hand"));
}

#[test]
fn a_following_probers_reload_of_the_mesh_file_keeps_its_generation() {
    let _one = one_at_a_time();
    let m = mesh();
    let generation = m.primary.shared.control.generation();
    assert!(prober_runs(m, generation), "the prober caught up");
    let outcome = m
        .runtime
        .block_on(m.prober.handle.reload("a test"))
        .expect("the reload is answered");
    assert!(
        outcome.reloaded,
        "a prober rebuilds its targets: {outcome:?}"
    );
    assert_eq!(
        m.prober.control.generation(),
        generation,
        "the text in force reloaded is no new generation"
    );
}

#[test]
fn a_stopped_node_leaves_gossip_and_closes_its_admin_listener() {
    let dir = tempfile::tempdir().expect("a scratch directory");
    let config = dir.path().join("alone.toml");
    std::fs::write(&config, pool("alone")).expect("a config");
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let listen = free_udp();
    let admin = runtime.block_on(async {
        let node =
            aggregator::node::start(settings(&config, ConfigRole::Standalone, listen, listen))
                .await
                .expect("the node starts");
        let admin = node.admin;
        assert!(std::net::TcpStream::connect(admin).is_ok(), "serving");
        node.handle.stop().await.expect("a clean stop");
        admin
    });
    assert!(
        std::net::TcpStream::connect(admin).is_err(),
        "the admin listener is closed"
    );
    assert!(
        UdpSocket::bind(listen).is_ok(),
        "the gossip port is free again"
    );
}

/// The prober started before its first config (it follows the mesh's: no monitor at start),
/// yet the `progress` its votes are counted by keeps moving every
/// `prober::publisher::PROGRESS_ROUND` (1 s). It once moved at the shortest interval of the
/// config the prober started with (a minute when there was none), so an aggregator counted a
/// following prober's results for three intervals and then went fail static with every prober
/// alive (docs/design.md#fail-static).
#[test]
fn a_prober_started_before_its_first_config_keeps_its_votes_fresh() {
    let m = mesh();
    let generation = m.primary.shared.control.generation();
    assert!(prober_runs(m, generation), "the prober caught up");
    let shared = &m.follower.shared;
    let age = || {
        shared
            .in_force
            .load()
            .ballots
            .load()
            .iter()
            .find(|b| b.prober.node.starts_with("prober-"))
            .map(|b| b.age)
    };
    assert!(
        test_support::wait_until(Duration::from_secs(20), || age().is_some()).is_some(),
        "the follower holds the prober's ballot"
    );
    // Over six rounds, the progress never stands still for three: the aggregator would count
    // a result of a 1 s monitor no longer.
    let limit = prober::publisher::PROGRESS_ROUND * 3;
    let mut oldest = Duration::ZERO;
    for _ in 0..60 {
        oldest = oldest.max(age().unwrap_or(Duration::MAX));
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        oldest < limit,
        "the prober's progress stood still for {oldest:?} (at most {limit:?})"
    );
}
