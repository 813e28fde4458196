//! The private network trials, one behaviour each. A trial that kills a replica or runs an
//! extra connector puts the world back before it ends (`Private::put_back`).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use test_support::wait_for;

use super::world::{Private, BOUND, L4_PORT, OFFICE_ADDR, ORIGIN_PORT, REPLICAS};
use crate::world;

/// Whether a TCP connection to the private origin can be made from `site`.
fn connects_from(p: &Private, site: &str) -> bool {
    let to = SocketAddr::new(OFFICE_ADDR.into(), ORIGIN_PORT);
    world::in_netns(p.world.netns(site), move || {
        TcpStream::connect_timeout(&to, Duration::from_secs(1)).is_ok()
    })
}

pub fn the_private_origin_answers_only_inside_its_network(p: &mut Private) {
    assert!(connects_from(p, "office"), "the origin is up in the office");
    for site in ["pop1", "pop2", "probers", "client"] {
        assert!(!connects_from(p, site), "{site} reached the private origin");
    }
}

pub fn the_pop_holding_the_tunnel_proxies_to_the_private_origin(p: &mut Private) {
    assert_eq!(p.proxied(0), (200, "office-1".to_string()));
}

pub fn a_pop_without_a_tunnel_connection_proxies_through_the_pop_that_holds_it(p: &mut Private) {
    assert_eq!(p.proxied(1), (200, "office-1".to_string()));
}

/// One HTTP exchange over a layer-4 connection to PoP `pop`: the origin's body.
fn over_layer4(p: &Private, pop: usize) -> Option<String> {
    let to = SocketAddr::new(p.pop[pop].into(), L4_PORT);
    world::in_netns(p.world.netns("client"), move || {
        let mut s = TcpStream::connect_timeout(&to, Duration::from_secs(2)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(3))).ok()?;
        s.write_all(b"GET / HTTP/1.0\r\nHost: office\r\n\r\n")
            .ok()?;
        let mut text = String::new();
        // The origin keeps the connection: read what one answer holds.
        let mut buf = [0u8; 512];
        while !text.ends_with("office-1\n") {
            let n = s.read(&mut buf).ok()?;
            if n == 0 {
                break;
            }
            text.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        Some(text.split_once("\r\n\r\n")?.1.trim().to_string())
    })
}

pub fn a_layer_4_load_balancer_reaches_the_private_origin_through_either_pop(p: &mut Private) {
    assert_eq!(over_layer4(p, 0).as_deref(), Some("office-1"), "pop1");
    assert_eq!(over_layer4(p, 1).as_deref(), Some("office-1"), "pop2");
}

pub fn a_replica_killed_under_load_loses_no_request(p: &mut Private) {
    let (stop, served) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU32::new(0)),
    );
    let load = {
        let (stop, served) = (Arc::clone(&stop), Arc::clone(&served));
        let (netns, to) = (
            p.world.netns("client").to_string(),
            SocketAddr::new(p.pop[0].into(), 8080),
        );
        std::thread::spawn(move || {
            world::in_netns(&netns, move || {
                let mut failed = Vec::new();
                // Bounded: 60 s at most, whatever happens to `stop`.
                let until = Instant::now() + Duration::from_secs(60);
                while !stop.load(Ordering::Relaxed) && Instant::now() < until {
                    match get_office(to) {
                        Some(body) if body == "office-1" => {
                            served.fetch_add(1, Ordering::Relaxed);
                        }
                        other => failed.push(format!("{other:?}")),
                    }
                }
                failed
            })
        })
    };
    let served_by = |n: u32| served.load(Ordering::Relaxed) >= n;
    wait_for(
        "requests through both replicas",
        Duration::from_secs(20),
        || served_by(50),
    );
    p.world.node(REPLICAS[0]).kill();
    p.wait_connections(2);
    let after = served.load(Ordering::Relaxed);
    wait_for(
        "requests through the replica left",
        Duration::from_secs(20),
        || served_by(after + 50),
    );
    stop.store(true, Ordering::Relaxed);
    let failed = load.join().expect("the load");
    p.put_back();
    let served = served.load(Ordering::Relaxed) as usize;
    assert!(
        failed.is_empty(),
        "{} of {} failed: {:?}",
        failed.len(),
        served + failed.len(),
        &failed[..failed.len().min(5)]
    );
}

/// `GET /` for office.private.test on `to`, from the calling thread's namespace: the body of
/// a 200.
fn get_office(to: SocketAddr) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&to, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"GET / HTTP/1.0\r\nHost: office.private.test\r\n\r\n")
        .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    (head.split_whitespace().nth(1) == Some("200")).then(|| body.trim().to_string())
}

/// PoP `pop`'s DNS answer for office-dns.private.test, from the client.
fn dns_answer(p: &Private, pop: usize) -> Vec<String> {
    let server = format!("@{}", p.pop[pop]);
    let out = p.world.exec(
        "client",
        &[
            "dig",
            &server,
            "office-dns.private.test",
            "A",
            "+short",
            "+tries=1",
            "+time=2",
        ],
    );
    out.lines().map(str::to_string).collect()
}

pub fn every_connection_dropped_fails_over_within_the_bound(p: &mut Private) {
    assert_eq!(dns_answer(p, 0), [OFFICE_ADDR.to_string()]);
    let killed = Instant::now();
    for replica in REPLICAS {
        p.world.node(replica).kill();
    }
    // The bound, with a margin for a loaded machine; the exact figure is printed.
    wait_for(
        "the private endpoint unhealthy on both PoPs",
        BOUND + Duration::from_secs(7),
        || (0..2).all(|pop| p.verdict(pop, "office-1").as_deref() == Some("unhealthy")),
    );
    let took = killed.elapsed();
    println!("office-1 unhealthy on both PoPs {took:?} after its connectors were killed (bound {BOUND:?})");
    let moved = (p.proxied(0), p.proxied(1), dns_answer(p, 0));
    // pop1 had the connections: the tunnel is down there since the last one ended.
    wait_for("the tunnel down at pop1", Duration::from_secs(10), || {
        p.tunnel(0).is_some_and(|t| t["status"] == "down")
    });
    let inactive_at = p.tunnel(0).map(|t| t["conns_inactive_at"].clone());
    p.put_back();
    assert!(
        inactive_at
            .as_ref()
            .is_some_and(serde_json::Value::is_string),
        "conns_inactive_at: {inactive_at:?}"
    );
    let healthy = p.tunnel(0).map(|t| t["status"].clone());
    assert_eq!(healthy, Some(serde_json::json!("healthy")));
    let fallback = (200, "static".to_string());
    assert_eq!(moved.0, fallback, "pop1's proxy");
    assert_eq!(moved.1, fallback, "pop2's proxy");
    assert_eq!(moved.2, [p.public.to_string()], "DNS");
}

/// Runs a connector named `name` in the office with `extra` arguments after `tunnel run
/// --token-file token`, waits until pop1 refused it for `reason`, and stops it.
fn refused_for(p: &mut Private, name: &str, token: &std::path::Path, extra: &[&str], reason: &str) {
    let before = p.refused(reason);
    let mut args: Vec<String> = [
        "tunnel",
        "run",
        "--token-file",
        &token.display().to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    p.world.run(name, "office", args);
    let waited = test_support::wait_until(Duration::from_secs(20), || p.refused(reason) > before);
    p.world.node(name).kill();
    assert!(waited.is_some(), "pop1 did not refuse {name} for {reason}");
    assert_eq!(
        p.connections(),
        4,
        "the refused connector holds a connection"
    );
}

pub fn a_connector_with_a_wrong_token_is_refused(p: &mut Private) {
    let token = p.wrong_token_file();
    refused_for(p, "connector-wrong-token", &token, &[], "bad_proof");
}

pub fn a_connector_claiming_a_foreign_route_is_refused(p: &mut Private) {
    let token = p.office_token();
    refused_for(
        p,
        "connector-foreign-route",
        &token,
        &["--route", "10.99.0.0/24"],
        "foreign_route",
    );
}

pub fn explain_tells_the_tunnel_a_private_endpoint_is_reached_through(p: &mut Private) {
    let path = "/explain?lb=office.private.test";
    let at = |pop| {
        p.world
            .json("client", p.admin(pop), path)
            .expect("/explain")
    };
    let (holder, relaying) = (at(0), at(1));
    let reach = |e: &serde_json::Value| e["private"][0].clone();
    assert_eq!(reach(&holder)["endpoint"], "office/office-1", "{holder}");
    assert_eq!(reach(&holder)["tunnel"], "office");
    assert_eq!(reach(&holder)["connections_here"], 4);
    // pop2 holds none: it names the holder it relays through.
    assert_eq!(reach(&relaying)["connections_here"], 0, "{relaying}");
    let holders = reach(&relaying)["holders"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(holders.len(), 1, "{relaying}");
    let steps = relaying["steps"].to_string();
    assert!(steps.contains("through a PoP holding it"), "{steps}");
}

pub fn the_console_pool_view_shows_a_private_endpoints_tunnel(p: &mut Private) {
    let view = p
        .world
        .json("client", p.admin(0), "/console/pool?name=office")
        .expect("/console/pool");
    let reach = &view["endpoints"][0]["private"];
    assert_eq!(reach["network"], "office", "{view}");
    assert_eq!(reach["tunnel"], "office");
    assert_eq!(reach["connections_here"], 4);
    let public = p
        .world
        .json("client", p.admin(0), "/console/pool?name=fallback")
        .expect("/console/pool");
    assert!(public["endpoints"][0]["private"].is_null(), "{public}");
}
