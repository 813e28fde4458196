//! The config fetch over https: a follower trusting the CA, a prober pinning the primary's
//! key, and a prober trusting another CA, which refuses the primary.

use std::time::Duration;

use test_support::*;

use super::admin::cli;
use super::world::{curl, Mesh};

/// A write on the primary over mTLS; the generation it made.
fn write_pool(mesh: &Mesh, name: &str) -> u64 {
    let file = mesh.dir.path().join(format!("{name}.json"));
    std::fs::write(
        &file,
        format!(r#"{{"name": "{name}", "origins": [{{"name": "a", "address": "127.0.0.3"}}]}}"#),
    )
    .expect("pool file");
    let (ok, out, err) = cli(mesh, &["pools", "apply", "-f", &file.display().to_string()]);
    assert!(ok, "{out}{err}");
    // The primary's own word (gossip may not carry the new generation yet).
    let (_, config) = curl(
        &mesh.curl_mtls(),
        &format!("https://{}/config", mesh.primary),
    );
    let config: serde_json::Value = serde_json::from_str(&config).unwrap_or_default();
    config["result"]["generation"]
        .as_u64()
        .expect("the primary's generation")
}

fn generation_of(mesh: &Mesh, node: &str) -> Option<u64> {
    mesh.generations()
        .into_iter()
        .find(|(id, _)| id == node)
        .and_then(|(_, g)| g)
}

pub fn a_follower_fetches_over_https_with_the_ca_and_a_client_certificate(mesh: &mut Mesh) {
    let generation = write_pool(mesh, "for-the-follower");
    wait_for("the follower at the write", Duration::from_secs(20), || {
        generation_of(mesh, "follower").is_some_and(|g| g >= generation)
    });
}

pub fn a_follower_pinning_the_primarys_key_fetches_without_a_ca(mesh: &mut Mesh) {
    let generation = write_pool(mesh, "for-the-pinned");
    wait_for(
        "the pinning prober at the write",
        Duration::from_secs(20),
        || generation_of(mesh, "pinned").is_some_and(|g| g >= generation),
    );
}

pub fn a_follower_refuses_a_primary_whose_certificate_does_not_verify(mesh: &mut Mesh) {
    write_pool(mesh, "for-the-rogue");
    // The rogue prober's own listener is signed by the CA it trusts.
    let rogue_ca = mesh.dir.path().join("rogue-ca.pem");
    let args = ["--cacert".to_string(), rogue_ca.display().to_string()];
    let url = format!("https://{}/metrics", mesh.rogue_metrics);
    let count = |result: &str| -> f64 {
        let (_, text) = curl(&args, &url);
        text.lines()
            .find(|l| {
                l.starts_with("meshlb_config_fetches_total")
                    && l.contains(&format!("result=\"{result}\""))
            })
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    };
    wait_for(
        "a failed fetch on the rogue prober",
        Duration::from_secs(20),
        || count("failure") >= 1.0,
    );
    assert_eq!(
        count("success"),
        0.0,
        "it fetched from an unverified primary"
    );
    assert_eq!(
        generation_of(mesh, "rogue"),
        Some(0),
        "it runs a fetched generation"
    );
}
