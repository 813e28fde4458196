//! Small meshes of real `meshlb` processes on loopback.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command};

use crate::ports::free_udp;
use crate::processes::{meshlb_bin, spawn_logged, Procs};

/// A small mesh on loopback: one aggregator (region WEU, with `extra` arguments such as
/// `--dns` or `--proxy`) and three probers in WEU, gossiping with `key`.
pub fn start_mesh(config: &Path, key: &Path, admin: SocketAddr, extra: &[String]) -> Procs {
    start_mesh_seeded(config, key, admin, extra).0
}

/// `start_mesh`, also returning the aggregator's gossip address (a seed for more members).
pub fn start_mesh_seeded(
    config: &Path,
    key: &Path,
    admin: SocketAddr,
    extra: &[String],
) -> (Procs, SocketAddr) {
    start_mesh_split(config, config, key, admin, extra)
}

/// The gossip arguments of a member listening on `listen`, seeded by `seed`.
/// The gossip arguments of a node listening on `listen`, seeded by `seed`, with the cluster key
/// in `key` and a 100 ms gossip interval.
pub fn gossip_args(listen: SocketAddr, seed: SocketAddr, key: &Path) -> Vec<String> {
    vec![
        "--listen".into(),
        listen.to_string(),
        "--seed".into(),
        seed.to_string(),
        "--key-file".into(),
        key.display().to_string(),
        "--gossip-interval-ms".into(),
        "100".into(),
    ]
}

/// `start_mesh_seeded` with one config file for the aggregator and another for the probers.
pub fn start_mesh_split(
    config: &Path,
    probers_config: &Path,
    key: &Path,
    admin: SocketAddr,
    extra: &[String],
) -> (Procs, SocketAddr) {
    let bin = meshlb_bin();
    let gossip = free_udp();
    let mut procs = Procs(Vec::new());
    procs.0.push(spawn_logged(
        Command::new(&bin)
            .args(["aggregator", "--config", &config.display().to_string()])
            .args(["--region", "WEU", "--admin", &admin.to_string()])
            .args(extra)
            .args(gossip_args(gossip, gossip, key)),
        "aggregator",
    ));
    for dc in ["ams", "fra", "lhr"] {
        procs.0.push(spawn_logged(
            Command::new(&bin)
                .args(["prober", "--config", &probers_config.display().to_string()])
                .args(["--region", "WEU", "--dc", dc])
                .args(gossip_args(free_udp(), gossip, key)),
            "prober",
        ));
    }
    (procs, gossip)
}

/// One more aggregator (region `region`, `extra` arguments) joining a mesh through `seed`.
pub fn start_aggregator(
    config: &Path,
    key: &Path,
    region: &str,
    admin: SocketAddr,
    seed: SocketAddr,
    extra: &[String],
) -> Child {
    spawn_logged(
        Command::new(meshlb_bin())
            .args(["aggregator", "--config", &config.display().to_string()])
            .args(["--region", region, "--admin", &admin.to_string()])
            .args(extra)
            .args(gossip_args(free_udp(), seed, key)),
        "aggregator",
    )
}
