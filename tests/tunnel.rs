//! A private endpoint through a tunnel, end to end: an aggregator with `--tunnel-listen` and
//! a proxy, a pool whose only endpoint is in a virtual network (an origin on 127.0.0.2), and
//! `meshlb tunnel run` with the token `meshlb tunnel token` printed. Without a connector the
//! proxy answers 530 (error 1033); with one it serves the origin through it; once the
//! connector is stopped, 530 again. A second aggregator without a tunnel listener serves the
//! same endpoint through the one that holds the tunnel (PoP to PoP).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::time::Duration;

use test_support::*;

const TUNNEL: &str = "f70ff985-a4ef-4643-bbbc-4a0ed4fc8415";
const NETWORK: &str = "a5624d4e-044a-4ff0-b3e1-e2465353d4b4";
const SECRET: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

fn config(origin_port: u16) -> String {
    format!(
        r#"
[[tunnels]]
id = "{TUNNEL}"
name = "office"
tunnel_secret = "{SECRET}"

[[virtual_networks]]
id = "{NETWORK}"
name = "office"
is_default_network = true

[[routes]]
network = "127.0.0.2/32"
tunnel_id = "{TUNNEL}"

[[pools]]
name = "office"
origins = [{{ name = "app", address = "127.0.0.2", port = {origin_port}, virtual_network_id = "{NETWORK}" }}]

[[load_balancers]]
name = "app.example.test"
proxied = true
default_pools = ["office"]
"#
    )
}

/// `GET /` for `app.example.test` through the proxy: the status and the body.
fn get(proxy: SocketAddr) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(proxy).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET / HTTP/1.1\r\nHost: app.example.test\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, text.split_once("\r\n\r\n")?.1.to_string()))
}

/// A PoP's tunnel certificate and key, written into `dir`.
fn pop_cert(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let cert = rcgen::generate_simple_self_signed(vec!["pop.test".into()]).expect("cert");
    let (cert_file, key_file) = (dir.join("pop.pem"), dir.join("pop.key"));
    std::fs::write(&cert_file, cert.cert.pem()).expect("cert");
    std::fs::write(&key_file, cert.signing_key.serialize_pem()).expect("key");
    (cert_file, key_file)
}

/// An aggregator with a proxy on `proxy` (and a tunnel listener on `tunnels` when given),
/// gossiping on `gossip` and seeded by `seed`.
fn aggregator(
    dir: &std::path::Path,
    key: &std::path::Path,
    gossip: (SocketAddr, SocketAddr),
    proxy: SocketAddr,
    tunnels: Option<SocketAddr>,
) -> std::process::Child {
    let serving = ["--proxy".into(), proxy.to_string()];
    aggregator_with(dir, key, (gossip, free_tcp()), &serving, tunnels)
}

/// The flags of a tunnel listener on `tunnels`, with a certificate made in `dir`.
fn tunnel_args(dir: &std::path::Path, tunnels: SocketAddr) -> Vec<String> {
    let (cert, cert_key) = pop_cert(dir);
    vec![
        "--tunnel-listen".into(),
        tunnels.to_string(),
        "--tunnel-cert".into(),
        cert.display().to_string(),
        "--tunnel-key".into(),
        cert_key.display().to_string(),
    ]
}

/// `aggregator` with `serving` as its frontends' arguments and its admin API on `admin`.
fn aggregator_with(
    dir: &std::path::Path,
    key: &std::path::Path,
    (gossip, admin): ((SocketAddr, SocketAddr), SocketAddr),
    serving: &[String],
    tunnels: Option<SocketAddr>,
) -> std::process::Child {
    let config = dir.join("meshlb.toml");
    let mut args: Vec<String> = serving.to_vec();
    if let Some(tunnels) = tunnels {
        args.extend(tunnel_args(dir, tunnels));
    }
    args.extend(admin_token_args(dir));
    spawn_logged(
        Command::new(meshlb_bin())
            .args(["aggregator", "--config", &config.display().to_string()])
            .args(["--region", "WEU", "--admin", &admin.to_string()])
            .args(args)
            .args(gossip_args(gossip.0, gossip.1, key)),
        "aggregator",
    )
}

/// `meshlb tunnel run` with the token `meshlb tunnel token` prints for the PoP on `tunnels`.
fn connector(dir: &std::path::Path, tunnels: SocketAddr) -> std::process::Child {
    let token = Command::new(meshlb_bin())
        .args(["tunnel", "token", "--config"])
        .arg(dir.join("meshlb.toml"))
        .args(["--tunnel", "office", "--pop", &tunnels.to_string()])
        .arg("--pop-cert")
        .arg(dir.join("pop.pem"))
        .output()
        .expect("meshlb tunnel token");
    assert!(
        token.status.success(),
        "{}",
        String::from_utf8_lossy(&token.stderr)
    );
    let token_file = dir.join("token");
    std::fs::write(&token_file, &token.stdout).expect("token file");
    spawn_logged(
        Command::new(meshlb_bin())
            .args(["tunnel", "run", "--token-file"])
            .arg(&token_file),
        "connector",
    )
}

fn served(proxy: SocketAddr) -> bool {
    get(proxy).is_some_and(|(status, body)| status == 200 && body == "ok")
}

#[test]
fn a_private_endpoint_is_served_through_a_connector_and_530_without_one() {
    let origin = origin_on("127.0.0.2");
    let (dir, key) = scratch_dir_with_key("tunnel");
    std::fs::write(dir.path().join("meshlb.toml"), config(origin.port)).expect("config");
    let (proxy, tunnels, gossip) = (free_tcp(), free_tcp(), free_udp());
    let _aggregator = Procs(vec![aggregator(
        dir.path(),
        &key,
        (gossip, gossip),
        proxy,
        Some(tunnels),
    )]);
    wait_for("the proxy", Duration::from_secs(20), || {
        get(proxy).is_some()
    });
    let (status, body) = get(proxy).expect("an answer");
    assert_eq!(status, 530, "{body}");
    assert!(
        body.contains("error 1033") && !body.contains("127.0.0.2"),
        "{body}"
    );

    let mut connector = Procs(vec![connector(dir.path(), tunnels)]);
    wait_for(
        "the origin through the tunnel",
        Duration::from_secs(20),
        || served(proxy),
    );

    // SIGTERM: the connector drains and ends; the endpoint is out of reach again.
    let pid = nix::unistd::Pid::from_raw(connector.0[0].id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("sigterm");
    let ended = connector.0[0].wait().expect("the connector ends");
    assert!(ended.success(), "{ended}");
    wait_for(
        "530 once the connector is gone",
        Duration::from_secs(20),
        || get(proxy).is_some_and(|(status, _)| status == 530),
    );
}

#[test]
fn a_pop_without_a_tunnel_connection_serves_the_endpoint_through_the_pop_that_holds_one() {
    let origin = origin_on("127.0.0.2");
    let (dir, key) = scratch_dir_with_key("tunnel-relay");
    std::fs::write(dir.path().join("meshlb.toml"), config(origin.port)).expect("config");
    let (holder_proxy, relaying_proxy, tunnels) = (free_tcp(), free_tcp(), free_tcp());
    let gossip = free_udp();
    let mut procs = Procs(vec![
        aggregator(
            dir.path(),
            &key,
            (gossip, gossip),
            holder_proxy,
            Some(tunnels),
        ),
        aggregator(dir.path(), &key, (free_udp(), gossip), relaying_proxy, None),
    ]);
    procs.0.push(connector(dir.path(), tunnels));
    wait_for(
        "the origin through the holder",
        Duration::from_secs(30),
        || served(relaying_proxy),
    );
    // The connector gone, the holder no longer holds: the relaying PoP answers 530 too.
    let connector = procs.0.pop().expect("the connector");
    drop(Procs(vec![connector]));
    wait_for(
        "530 once no PoP holds the tunnel",
        Duration::from_secs(30),
        || get(relaying_proxy).is_some_and(|(status, _)| status == 530),
    );
    assert!(get(holder_proxy).is_some_and(|(status, _)| status == 530));
}

/// The config with the private pool monitored (HTTP, interval 1 s, consecutive_down 2) and a
/// public fallback pool whose origin says `fallback`.
fn monitored_config(origin_port: u16, fallback_port: u16) -> String {
    config(origin_port)
        .replace(
            "[[pools]]\nname = \"office\"\n",
            "[[monitors]]\nname = \"m\"\ntype = \"http\"\npath = \"/\"\ninterval = 1\ntimeout = 1\nretries = 0\nconsecutive_down = 2\nconsecutive_up = 1\n\n[[pools]]\nname = \"office\"\nmonitor = \"m\"\n",
        )
        .replace(
            "default_pools = [\"office\"]",
            &format!("default_pools = [\"office\"]\nfallback_pool = \"public\"\n\n[[pools]]\nname = \"public\"\norigins = [{{ name = \"web\", address = \"127.0.0.3\", port = {fallback_port} }}]"),
        )
}

/// The verdict `/status` gives the private endpoint.
fn office_verdict(admin: SocketAddr) -> Option<String> {
    let status = test_support::get(admin, "/status")?;
    let pools = status["pools"].as_array()?;
    let office = pools.iter().find(|p| p["name"] == "office")?;
    Some(office["endpoints"][0]["verdict"].as_str()?.to_string())
}

#[test]
fn probes_reach_a_private_endpoint_through_its_tunnel_and_its_loss_fails_over_within_the_bound() {
    let origin = test_support::origin_saying("127.0.0.2", "office");
    let fallback = test_support::origin_saying("127.0.0.3", "fallback");
    let (dir, key) = scratch_dir_with_key("tunnel-health");
    let path = dir.path().join("meshlb.toml");
    std::fs::write(&path, monitored_config(origin.port, fallback.port)).expect("config");
    let (admin, proxy, tunnels) = (free_tcp(), free_tcp(), free_tcp());
    let mut args: Vec<String> = vec!["--proxy".into(), proxy.to_string()];
    args.extend(tunnel_args(dir.path(), tunnels));
    args.extend(admin_token_args(dir.path()));
    let mut procs = start_mesh(&path, &key, admin, &args);
    procs.0.push(connector(dir.path(), tunnels));
    // The probers' votes, probed through the PoP holding the tunnel, make it healthy.
    wait_for(
        "the private endpoint healthy",
        Duration::from_secs(30),
        || office_verdict(admin).as_deref() == Some("healthy"),
    );
    let body = |p| get(p).map(|(_, body)| body);
    assert_eq!(body(proxy).as_deref(), Some("office"));
    // Every connection dropped: unhealthy within interval x consecutive_down + 1 s = 3 s
    // (asserted with a margin for a loaded machine), the proxy on the fallback pool.
    let connector = procs.0.pop().expect("the connector");
    let killed = std::time::Instant::now();
    drop(Procs(vec![connector]));
    wait_for(
        "the private endpoint unhealthy",
        Duration::from_secs(15),
        || office_verdict(admin).as_deref() == Some("unhealthy"),
    );
    let took = killed.elapsed();
    eprintln!("private endpoint unhealthy {took:?} after its connector was killed");
    assert!(took < Duration::from_secs(8), "took {took:?}");
    assert_eq!(body(proxy).as_deref(), Some("fallback"));
}

/// A TCP server on 127.0.0.2 that greets each connection with `office\n` and echoes.
fn private_echo() -> u16 {
    let listener = TcpListener::bind("127.0.0.2:0").expect("bind 127.0.0.2");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut conn = conn;
                if conn.write_all(b"office\n").is_err() {
                    return;
                }
                let mut buf = [0u8; 4096];
                while let Ok(n) = conn.read(&mut buf) {
                    if n == 0 || conn.write_all(&buf[..n]).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// Connects to the layer-4 port, reads the greeting, and echoes `text`: the greeting and the
/// echo, or `None` when the connection fails or closes first.
fn l4_round_trip(listen: u16, text: &[u8]) -> Option<(String, Vec<u8>)> {
    let mut s = TcpStream::connect(("127.0.0.1", listen)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut greeting = [0u8; 7];
    s.read_exact(&mut greeting).ok()?;
    s.write_all(text).ok()?;
    let mut back = vec![0u8; text.len()];
    s.read_exact(&mut back).ok()?;
    Some((String::from_utf8_lossy(&greeting).into_owned(), back))
}

#[test]
fn a_layer_4_load_balancer_reaches_a_private_endpoint_through_the_tunnel() {
    let port = private_echo();
    let (dir, key) = scratch_dir_with_key("tunnel-l4");
    let listen = free_tcp().port();
    let config = config(port).replace(
        "[[load_balancers]]\nname = \"app.example.test\"\nproxied = true\n",
        &format!("[[load_balancers]]\nname = \"db.example.test\"\nprotocol = \"tcp\"\nlisten = [{listen}]\n"),
    );
    std::fs::write(dir.path().join("meshlb.toml"), config).expect("config");
    let (tunnels, gossip) = (free_tcp(), free_udp());
    let mut procs = Procs(vec![aggregator_with(
        dir.path(),
        &key,
        ((gossip, gossip), free_tcp()),
        &["--l4".into(), "127.0.0.1".into()],
        Some(tunnels),
    )]);
    procs.0.push(connector(dir.path(), tunnels));
    wait_for(
        "a layer-4 connection through the tunnel",
        Duration::from_secs(20),
        || l4_round_trip(listen, b"ping").is_some(),
    );
    // Within what loopback's socket buffers hold: the client writes it all before reading.
    let big = vec![b'x'; 256 << 10];
    let (greeting, back) = l4_round_trip(listen, &big).expect("256 KiB both ways");
    assert_eq!(greeting, "office\n");
    assert!(back == big, "the echo differs");
}

/// The tunnel's connections at the aggregator whose admin API is `admin`, as the API lists them.
fn connections(admin: SocketAddr) -> usize {
    test_support::get(admin, &format!("/accounts/a/cfd_tunnel/{TUNNEL}"))
        .and_then(|t| t["result"]["connections"].as_array().map(Vec::len))
        .unwrap_or(0)
}

#[test]
fn a_replica_killed_under_load_loses_no_request() {
    let origin = origin_on("127.0.0.2");
    let (dir, key) = scratch_dir_with_key("tunnel-replicas");
    std::fs::write(dir.path().join("meshlb.toml"), config(origin.port)).expect("config");
    let (admin, proxy, tunnels, gossip) = (free_tcp(), free_tcp(), free_tcp(), free_udp());
    let serving = ["--proxy".into(), proxy.to_string()];
    let _aggregator = Procs(vec![aggregator_with(
        dir.path(),
        &key,
        ((gossip, gossip), admin),
        &serving,
        Some(tunnels),
    )]);
    wait_for("the proxy", Duration::from_secs(20), || {
        get(proxy).is_some()
    });
    let mut replicas = Procs(vec![
        connector(dir.path(), tunnels),
        connector(dir.path(), tunnels),
    ]);
    wait_for(
        "both replicas' four connections",
        Duration::from_secs(20),
        || connections(admin) == 4,
    );
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    let (stop, served) = (
        std::sync::Arc::new(AtomicBool::new(false)),
        std::sync::Arc::new(AtomicU32::new(0)),
    );
    let load = {
        let (stop, served) = (std::sync::Arc::clone(&stop), std::sync::Arc::clone(&served));
        std::thread::spawn(move || {
            let mut failed = Vec::new();
            // Bounded: 30 s at most, whatever happens to `stop`.
            let until = std::time::Instant::now() + Duration::from_secs(30);
            while !stop.load(Ordering::Relaxed) && std::time::Instant::now() < until {
                match get(proxy) {
                    Some((200, body)) if body == "ok" => {
                        served.fetch_add(1, Ordering::Relaxed);
                    }
                    other => failed.push(format!("{other:?}")),
                }
            }
            failed
        })
    };
    let served_by = |n: u32| served.load(Ordering::Relaxed) >= n;
    wait_for(
        "requests through both replicas",
        Duration::from_secs(10),
        || served_by(50),
    );
    let killed = replicas.0.remove(0);
    drop(Procs(vec![killed]));
    wait_for(
        "the killed replica's connections dropped",
        Duration::from_secs(20),
        || connections(admin) == 2,
    );
    // The load goes on through the replica that remains.
    let after = served.load(Ordering::Relaxed);
    wait_for(
        "requests through the replica left",
        Duration::from_secs(10),
        || served_by(after + 50),
    );
    stop.store(true, Ordering::Relaxed);
    let failed = load.join().expect("the load");
    let served = served.load(Ordering::Relaxed);
    assert!(
        failed.is_empty(),
        "{} of {} failed: {:?}",
        failed.len(),
        served as usize + failed.len(),
        &failed[..failed.len().min(5)]
    );
}
