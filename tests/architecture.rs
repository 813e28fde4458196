//! The crate boundaries docs/design.md#the-crates promises, read from `cargo metadata`: the pure
//! core reaches no async runtime, socket, TLS or server crate, not even through another
//! dependency, and dependencies between meshlb's own crates flow one way.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

/// Crates that mean I/O: none of them may be reachable from `lb-core`'s normal dependencies.
const IO_CRATES: &[&str] = &[
    "tokio",
    "hyper",
    "hyper-util",
    "rustls",
    "tokio-rustls",
    "hickory-server",
    "hickory-proto",
    "nix",
    "socket2",
    "mio",
    "chitchat",
    "reqwest",
];

/// This machine's target triple (`rustc -vV`), so that metadata resolves for it alone and
/// needs no other platform's packages.
fn host_triple() -> String {
    let out = Command::new("rustc")
        .arg("-vV")
        .output()
        .expect("rustc -vV runs");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("rustc -vV names the host")
        .to_string()
}

/// Package name -> names of its normal (not dev, not build) dependencies, resolved once.
fn normal_dependencies() -> &'static BTreeMap<String, BTreeSet<String>> {
    static DEPS: OnceLock<BTreeMap<String, BTreeSet<String>>> = OnceLock::new();
    DEPS.get_or_init(read_metadata)
}

fn read_metadata() -> BTreeMap<String, BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--locked", "--offline"])
        .args(["--filter-platform", &host_triple()])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata is JSON");
    let name_of: BTreeMap<&str, &str> = meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|p| {
            (
                p["id"].as_str().expect("id"),
                p["name"].as_str().expect("name"),
            )
        })
        .collect();
    let mut deps = BTreeMap::new();
    for node in meta["resolve"]["nodes"].as_array().expect("resolve nodes") {
        let name = name_of[node["id"].as_str().expect("node id")];
        let normal: BTreeSet<String> = node["deps"]
            .as_array()
            .expect("deps")
            .iter()
            .filter(|d| {
                d["dep_kinds"]
                    .as_array()
                    .expect("dep_kinds")
                    .iter()
                    .any(|k| k["kind"].is_null())
            })
            .map(|d| name_of[d["pkg"].as_str().expect("pkg")].to_string())
            .collect();
        deps.entry(name.to_string())
            .or_insert_with(BTreeSet::new)
            .extend(normal);
    }
    deps
}

/// Everything `root` reaches through normal dependencies.
fn reachable(deps: &BTreeMap<String, BTreeSet<String>>, root: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![root.to_string()];
    while let Some(name) = todo.pop() {
        for dep in deps.get(&name).into_iter().flatten() {
            if seen.insert(dep.clone()) {
                todo.push(dep.clone());
            }
        }
    }
    seen
}

#[test]
fn the_core_reaches_no_runtime_socket_tls_or_server_crate() {
    let deps = normal_dependencies();
    let reached = reachable(deps, "lb-core");
    // The check sees I/O crates where they are: it is not vacuous.
    assert!(reachable(deps, "lb-dns").contains("tokio"));
    assert!(reachable(deps, "lb-proxy").contains("rustls"));
    let found: Vec<&str> = IO_CRATES
        .iter()
        .copied()
        .filter(|c| reached.contains(*c))
        .collect();
    assert!(
        found.is_empty(),
        "lb-core must stay pure, but reaches {found:?} (through {:?})",
        deps["lb-core"]
    );
}

#[test]
fn dependencies_between_meshlb_crates_flow_one_way() {
    let deps = normal_dependencies();
    // Each crate and the meshlb crates it may depend on (docs/design.md#the-crates).
    let allowed: &[(&str, &[&str])] = &[
        ("lb-core", &[]),
        ("lb-tls", &[]),
        ("lb-records", &["lb-core"]),
        ("lb-edge", &["lb-core"]),
        ("lb-dns", &["lb-core", "lb-edge", "lb-records"]),
        ("lb-proxy", &["lb-core", "lb-edge", "lb-tls", "lb-records"]),
        ("lb-l4", &["lb-core", "lb-edge", "lb-records"]),
        ("mesh", &["lb-core"]),
        // The simulator drives mesh nodes; nothing of meshlb's depends on it.
        ("mesh-sim", &["mesh"]),
        // The tunnel's connector and the PoP's side of it: nothing of meshlb's beneath it.
        ("tunnel", &["lb-core", "lb-edge", "lb-tls"]),
        (
            "meshlb-node",
            &["lb-core", "lb-edge", "lb-tls", "mesh", "tunnel"],
        ),
        // The prober never depends on the aggregator: what both roles share is meshlb-node.
        // It reaches private endpoints through the dialing seam (lb-edge) and tunnels.
        (
            "prober",
            &[
                "lb-core",
                "lb-edge",
                "lb-tls",
                "mesh",
                "meshlb-node",
                "tunnel",
            ],
        ),
        (
            "aggregator",
            &[
                "lb-core",
                "lb-edge",
                "lb-tls",
                "lb-dns",
                "lb-proxy",
                "lb-l4",
                "lb-records",
                "mesh",
                "meshlb-node",
                "tunnel",
            ],
        ),
    ];
    let ours: BTreeSet<&str> = allowed.iter().map(|(name, _)| *name).collect();
    for (name, may) in allowed {
        let uses: BTreeSet<&str> = deps[*name]
            .iter()
            .map(String::as_str)
            .filter(|d| ours.contains(d))
            .collect();
        let extra: Vec<&&str> = uses.iter().filter(|d| !may.contains(d)).collect();
        assert!(extra.is_empty(), "{name} must not depend on {extra:?}");
    }
}
