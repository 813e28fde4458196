//! Relays and forgeries: a follower that cannot reach the primary takes each generation from
//! a relay; a node holding only the cluster key cannot make one, nor pass for the primary; a
//! follower one generation behind takes a delta.

use std::time::Duration;

use test_support::*;

use super::world::{counter, node, RelayMesh};

pub fn a_follower_that_cannot_reach_the_primary_takes_the_generation_from_a_relay(
    m: &mut RelayMesh,
) {
    let generation = m.write_pool("relayed");
    wait_for("the prober at the write", Duration::from_secs(30), || {
        m.generation_of("prober") >= generation
    });
    let relay = scrape(m.relay);
    assert!(
        counter(&relay, "meshlb_config_fetches_served_total", "sent=") >= 1.0,
        "the relay served nothing: {relay}"
    );
    let prober = scrape(m.prober_metrics);
    assert!(counter(&prober, "meshlb_config_fetches_total", "result=\"success\"") >= 1.0);
}

/// Starts a node with the cluster key and no writer key, announcing itself primary as `id` at
/// generation 1000.
fn rogue(m: &RelayMesh, id: &str) -> Procs {
    let dir = m.dir.path();
    let file = dir.join(format!("{id}.toml"));
    let text =
        "[[pools]]\nname = \"forged\"\norigins = [{ name = \"o\", address = \"127.0.5.9\" }]\n";
    std::fs::write(&file, text).expect("config");
    let sha = {
        use std::io::Write;
        let mut c = std::process::Command::new("sha256sum")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("sha256sum");
        c.stdin
            .take()
            .expect("stdin")
            .write_all(text.as_bytes())
            .expect("write");
        let out = c.wait_with_output().expect("sha256sum");
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_string()
    };
    std::fs::write(
        dir.join(format!("{id}.toml.generation")),
        format!("{{\"generation\": 1000, \"sha256\": \"{sha}\"}}"),
    )
    .expect("sidecar");
    let mut args: Vec<String> = ["aggregator", "--config", &file.display().to_string()]
        .into_iter()
        .chain(["--region", "WEU", "--node-id", id, "--config-primary"])
        .chain(["--admin", &free_tcp().to_string()])
        .map(String::from)
        .collect();
    args.extend(gossip_args(free_udp(), m.seed, &m.key));
    Procs(vec![node(&args, id)])
}

pub fn a_generation_announced_by_a_node_holding_only_the_cluster_key_is_refused(m: &mut RelayMesh) {
    let _rogue = rogue(m, "rogue");
    wait_for(
        "the forged announcement refused",
        Duration::from_secs(30),
        || {
            counter(
                &scrape(m.prober_metrics),
                "meshlb_config_documents_forged_total",
                "what=\"announcement\"",
            ) >= 1.0
        },
    );
    assert!(
        m.generation_of("prober") < 1000,
        "the prober took the forged generation"
    );
    assert!(
        m.generation_of("relay") < 1000,
        "the relay took the forged generation"
    );
}

pub fn a_node_holding_only_the_cluster_key_is_not_taken_for_the_primary(m: &mut RelayMesh) {
    let forged = || {
        counter(
            &scrape(m.relay),
            "meshlb_config_documents_forged_total",
            "what=\"announcement\"",
        )
    };
    let before = forged();
    let _rogue = rogue(m, "rogue-primary");
    // The relay's follower loop names the primary, then refuses the announcements, in one
    // round: once it counted the rogue's, the primary it names has seen the rogue too.
    wait_for(
        "the rogue's announcement refused by the relay",
        Duration::from_secs(30),
        || forged() > before,
    );
    let config = get(m.relay, "/config").expect("the relay's /config");
    assert_eq!(
        config["result"]["primary"]["node_id"], "primary",
        "{config}"
    );
}

pub fn a_follower_one_generation_behind_takes_a_delta(m: &mut RelayMesh) {
    let first = m.write_pool("before-the-delta");
    wait_for(
        "the relay at the first write",
        Duration::from_secs(30),
        || m.generation_of("relay") >= first,
    );
    let (_, before) = m.primary_call("GET", "/metrics", None);
    let deltas = counter(
        &before,
        "meshlb_config_fetches_served_total",
        "sent=\"delta\"",
    );
    let second = m.write_pool("after-the-delta");
    wait_for(
        "the relay at the second write",
        Duration::from_secs(30),
        || m.generation_of("relay") >= second,
    );
    let (_, after) = m.primary_call("GET", "/metrics", None);
    assert!(
        counter(
            &after,
            "meshlb_config_fetches_served_total",
            "sent=\"delta\""
        ) > deltas,
        "no delta served: {}",
        after
            .lines()
            .filter(|l| l.contains("config"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}
