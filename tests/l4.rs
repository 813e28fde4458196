//! Layer-4 load balancers against a real aggregator (`--l4`): TCP echo origins, a real Redis
//! through a TCP load balancer, HAProxy reading PROXY v1 and v2 headers, a real Unbound
//! through a UDP load balancer with `dig`, and test origins that show what reached them.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use test_support::config::{Config, Endpoint, Lb, Pool};
use test_support::*;

/// A layer-4 load balancer `name` (`protocol` `tcp` or `udp`) listening on `port`, over `pool`.
fn layer4(name: &str, protocol: &str, port: u16, pool: &str) -> Lb {
    Lb::new(name)
        .protocol(protocol)
        .listen(&[port])
        .pools(&[pool])
}

/// Pool `pool` of one endpoint `a` on 127.0.0.1 `port`, behind a TCP load balancer `name`
/// listening on `listen`.
fn one_tcp(name: &str, listen: u16, pool: &str, port: u16) -> String {
    Config::new()
        .pool(Pool::new(pool).origin("a", ("127.0.0.1", port)))
        .load_balancer(layer4(name, "tcp", listen, pool))
        .render()
}

/// A TCP origin that greets each connection with `name\n`, echoes what it reads, and on the
/// client's half-close closes its side.
fn echo_origin(name: &'static str) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut conn = conn;
                if conn.write_all(format!("{name}\n").as_bytes()).is_err() {
                    return;
                }
                let mut buf = [0u8; 4096];
                while let Ok(n) = conn.read(&mut buf) {
                    if n == 0 || conn.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                let _ = conn.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    port
}

/// A port nothing listens on (connections are refused).
fn closed_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// A port free now for both TCP and UDP (a layer-4 listener may take either).
fn free_port() -> u16 {
    free_tcp_and_udp().port()
}

struct Node {
    _procs: Procs,
    admin: SocketAddr,
    /// Holds the config and key for the node's life.
    _dir: tempfile::TempDir,
    config: std::path::PathBuf,
}

/// An aggregator serving layer 4 on 127.0.0.1 with `config`.
fn aggregator(name: &str, config: &str, extra: &[&str]) -> Node {
    let (dir, key) = scratch_dir_with_key(name);
    let path = dir.path().join("meshlb.toml");
    std::fs::write(&path, config).expect("config");
    let admin = free_tcp();
    let mut args: Vec<String> = vec!["--l4".into(), "127.0.0.1".into()];
    args.extend(admin_token_args(dir.path()));
    args.extend(extra.iter().map(|s| s.to_string()));
    let procs = Procs(vec![start_aggregator(
        &path,
        &key,
        "WEU",
        admin,
        free_udp(),
        &args,
    )]);
    wait_for("the admin API", Duration::from_secs(20), || {
        scrape(admin).contains("meshlb_")
    });
    Node {
        _procs: procs,
        admin,
        _dir: dir,
        config: path,
    }
}

/// `POST /-/reload` on the node: whether it reloaded, and the errors it gave.
fn reload(node: &Node) -> (bool, String) {
    let out = Command::new("curl")
        .args([
            "-s",
            "-X",
            "POST",
            "-H",
            "Authorization: Bearer secret-token",
        ])
        .arg(format!("http://{}/-/reload", node.admin))
        .output()
        .expect("curl");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    (v["reloaded"] == true, v["errors"].to_string())
}

/// Connects to the load balancer on `port` from `source` (a loopback address).
fn connect_from(source: &str, port: u16) -> std::io::Result<TcpStream> {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    let src: SocketAddr = format!("{source}:0").parse().expect("source");
    socket.bind(&src.into())?;
    let to: SocketAddr = format!("127.0.0.1:{port}").parse().expect("to");
    socket.connect_timeout(&to.into(), Duration::from_secs(5))?;
    let s: TcpStream = socket.into();
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    Ok(s)
}

/// The greeting line of a connection through the load balancer: the origin's name.
fn greeting(s: &mut TcpStream) -> Option<String> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while !line.ends_with(b"\n") {
        match s.read(&mut byte) {
            Ok(1) => line.push(byte[0]),
            _ => return None,
        }
    }
    Some(String::from_utf8_lossy(&line).trim().to_string())
}

fn which(source: &str, port: u16) -> Option<String> {
    let mut s = connect_from(source, port).ok()?;
    greeting(&mut s)
}

fn wait_serving(port: u16) {
    wait_for("the layer-4 port", Duration::from_secs(20), || {
        which("127.0.0.1", port).is_some()
    });
}

fn metric_sum(admin: SocketAddr, name: &str) -> f64 {
    scrape(admin)
        .lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[test]
fn tcp_is_steered_by_weight_fails_over_passes_half_closes_and_idles_out() {
    let (a, b) = (echo_origin("a"), echo_origin("b"));
    let dead = closed_port();
    let (port, failover) = (free_port(), free_port());
    let config = Config::new()
        .pool(
            Pool::new("weighted")
                .endpoint(Endpoint::new("a", ("127.0.0.1", a)).weight(0.8))
                .endpoint(Endpoint::new("b", ("127.0.0.1", b)).weight(0.2)),
        )
        .pool(
            Pool::new("half-dead")
                .origin("dead", ("127.0.0.1", dead))
                .origin("a", ("127.0.0.1", a)),
        )
        .load_balancer(layer4("tcp.l4.test", "tcp", port, "weighted"))
        .load_balancer(layer4("failover.l4.test", "tcp", failover, "half-dead"))
        .render();
    let node = aggregator("l4-tcp", &config, &["--l4-idle-timeout-ms", "1000"]);
    wait_serving(port);
    // Weights over many connections: 0.8 / 0.2 (400 draws: a's share within 0.65..0.92).
    let mut to_a = 0;
    for _ in 0..400 {
        match which("127.0.0.1", port).as_deref() {
            Some("a") => to_a += 1,
            Some("b") => {}
            other => panic!("a connection failed: {other:?}"),
        }
    }
    let share = f64::from(to_a) / 400.0;
    assert!((0.65..=0.92).contains(&share), "a's share {share}");
    // Half of the draws hit a refused endpoint: each is retried on the other, none fails.
    for i in 0..60 {
        assert_eq!(
            which("127.0.0.1", failover).as_deref(),
            Some("a"),
            "connection {i} through the failover load balancer"
        );
    }
    assert!(metric_sum(node.admin, "meshlb_l4_retries_total") >= 1.0);
    assert!(metric_sum(node.admin, "meshlb_l4_connect_failures_total") >= 1.0);
    // Half-close: the client's FIN reaches the origin, the echo and the origin's FIN come back.
    let mut s = connect_from("127.0.0.1", port).expect("connect");
    let name = greeting(&mut s).expect("greeting");
    s.write_all(b"through and back").expect("write");
    s.shutdown(std::net::Shutdown::Write).expect("half-close");
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).expect("the echo, then the end");
    assert_eq!(rest, b"through and back", "via {name}");
    // Idle: a connection that says nothing is closed at the idle timeout (1 s).
    let mut quiet = connect_from("127.0.0.1", port).expect("connect");
    greeting(&mut quiet).expect("greeting");
    quiet
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let start = Instant::now();
    let mut buf = [0u8; 16];
    assert_eq!(quiet.read(&mut buf).ok(), Some(0), "closed, not held");
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(800) && took < Duration::from_secs(8),
        "{took:?}"
    );
    // Live counts: every connection above has ended.
    wait_for("no connection left open", Duration::from_secs(10), || {
        metric_sum(node.admin, "meshlb_l4_endpoint_open") == 0.0
    });
    assert!(metric_sum(node.admin, "meshlb_l4_accepted_total") >= 460.0);
}

#[test]
fn client_ip_hash_keeps_each_client_on_one_endpoint() {
    let origins = [echo_origin("a"), echo_origin("b"), echo_origin("c")];
    let port = free_port();
    let hashed = ["a", "b", "c"]
        .iter()
        .zip(origins)
        .fold(Pool::new("hashed").steering("hash"), |p, (n, o)| {
            p.origin(n, ("127.0.0.1", o))
        });
    let config = Config::new()
        .pool(hashed)
        .load_balancer(layer4("sticky.l4.test", "tcp", port, "hashed"))
        .render();
    let _node = aggregator("l4-hash", &config, &[]);
    wait_serving(port);
    let mut seen = std::collections::BTreeSet::new();
    for i in 2..14 {
        let source = format!("127.0.0.{i}");
        let first = which(&source, port).expect("connect");
        for _ in 0..8 {
            assert_eq!(
                which(&source, port).as_deref(),
                Some(first.as_str()),
                "{source}"
            );
        }
        seen.insert(first);
    }
    assert!(seen.len() >= 2, "12 clients all on {seen:?}");
}

/// `redis-server` on a free port, without persistence.
fn redis(dir: &std::path::Path) -> (Child, u16) {
    let port = free_port();
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no", "--dir"])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server (package redis-server)");
    (child, port)
}

fn redis_cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .output()
        .expect("redis-cli (package redis-tools)");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn a_real_redis_through_a_tcp_load_balancer() {
    let scratch = tempfile::tempdir().expect("dir");
    let (child, redis_port) = redis(scratch.path());
    let _redis = Procs(vec![child]);
    let port = free_port();
    let config = Config::new()
        .pool(Pool::new("redis").origin("r", "127.0.0.1"))
        .load_balancer(layer4("redis.l4.test", "tcp", port, "redis").origin_port(redis_port))
        .render();
    let _node = aggregator("l4-redis", &config, &[]);
    wait_for("redis through meshlb", Duration::from_secs(20), || {
        redis_cli(port, &["PING"]) == "PONG"
    });
    assert_eq!(redis_cli(port, &["SET", "meshlb", "layer 4"]), "OK");
    assert_eq!(redis_cli(port, &["GET", "meshlb"]), "layer 4");
    // Read straight from the server: the write went through.
    assert_eq!(redis_cli(redis_port, &["GET", "meshlb"]), "layer 4");
    // A value larger than a relay buffer, both ways.
    let big = "x".repeat(100_000);
    assert_eq!(redis_cli(port, &["SET", "big", &big]), "OK");
    assert_eq!(redis_cli(port, &["STRLEN", "big"]), "100000");
}

/// HAProxy in HTTP mode that takes PROXY headers (`accept-proxy`, v1 and v2 alike) and answers
/// every request with the client address it was told.
fn haproxy(dir: &std::path::Path, port: u16) -> Child {
    let conf = dir.join("haproxy.cfg");
    std::fs::write(
        &conf,
        format!(
            "global\n  pidfile {dir}/haproxy.pid\ndefaults\n  mode http\n  timeout client 5s\n  timeout server 5s\n  timeout connect 5s\nfrontend f\n  bind 127.0.0.1:{port} accept-proxy\n  http-request return status 200 content-type text/plain lf-string \"%[src] %[src_port]\\n\"\n",
            dir = dir.display()
        ),
    )
    .expect("haproxy.cfg");
    Command::new("haproxy")
        .args(["-db", "-f"])
        .arg(&conf)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("haproxy (package haproxy)")
}

/// `GET /` from `source` to the load balancer on `port`: the body.
fn http_from(source: &str, port: u16) -> Option<String> {
    let mut s = connect_from(source, port).ok()?;
    s.write_all(b"GET / HTTP/1.1\r\nHost: pp.l4.test\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut answer = String::new();
    s.read_to_string(&mut answer).ok()?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200")
        .then(|| body.trim().to_string())
}

#[test]
fn haproxy_reads_the_client_address_from_proxy_v1_and_v2() {
    let scratch = tempfile::tempdir().expect("dir");
    let origin_port = free_port();
    let _haproxy = Procs(vec![haproxy(scratch.path(), origin_port)]);
    let (v1, v2, none) = (free_port(), free_port(), free_port());
    let lb = |name: &str, port: u16, pp: &str| {
        layer4(name, "tcp", port, "h")
            .origin_port(origin_port)
            .proxy_protocol(pp)
    };
    let config = Config::new()
        .pool(Pool::new("h").origin("haproxy", "127.0.0.1"))
        .load_balancer(lb("v1.l4.test", v1, "v1"))
        .load_balancer(lb("v2.l4.test", v2, "v2"))
        .load_balancer(lb("none.l4.test", none, "off"))
        .render();
    let _node = aggregator("l4-pp", &config, &[]);
    wait_for("HAProxy through meshlb", Duration::from_secs(20), || {
        http_from("127.0.0.1", v1).is_some()
    });
    for port in [v1, v2] {
        let mut s = connect_from("127.0.0.7", port).expect("connect");
        let client_port = s.local_addr().expect("addr").port();
        s.write_all(b"GET / HTTP/1.1\r\nHost: pp.l4.test\r\nConnection: close\r\n\r\n")
            .expect("request");
        let mut answer = String::new();
        s.read_to_string(&mut answer).expect("answer");
        assert!(
            answer.ends_with(&format!("127.0.0.7 {client_port}\n")),
            "HAProxy was told another client: {answer}"
        );
    }
    // Without a header HAProxy's accept-proxy refuses the connection.
    assert_eq!(http_from("127.0.0.7", none), None);
}

/// Unbound on `port` answering `dns.l4.test` from local data.
fn unbound(dir: &std::path::Path, port: u16) -> Child {
    test_support::unbound(
        dir,
        SocketAddr::from(([127, 0, 0, 1], port)),
        "  local-zone: \"l4.test.\" static\n  local-data: \"dns.l4.test. 60 IN A 192.0.2.53\"\n",
        "",
    )
}

fn dig(port: u16) -> String {
    let out = Command::new("dig")
        .args([
            "@127.0.0.1",
            "-p",
            &port.to_string(),
            "+short",
            "+tries=1",
            "+time=2",
        ])
        .args(["dns.l4.test", "A"])
        .output()
        .expect("dig");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn dig_through_a_udp_load_balancer_to_unbound_and_flows_expire() {
    let scratch = tempfile::tempdir().expect("dir");
    let unbound_port = free_udp().port();
    let _unbound = Procs(vec![unbound(scratch.path(), unbound_port)]);
    wait_for("unbound", Duration::from_secs(20), || {
        dig(unbound_port) == "192.0.2.53"
    });
    let port = free_udp().port();
    let config = Config::new()
        .pool(Pool::new("resolvers").origin("unbound", ("127.0.0.1", unbound_port)))
        .load_balancer(layer4("udp.l4.test", "udp", port, "resolvers"))
        .render();
    let node = aggregator("l4-udp", &config, &["--l4-udp-idle-timeout-ms", "500"]);
    wait_for("dig through meshlb", Duration::from_secs(20), || {
        dig(port) == "192.0.2.53"
    });
    // Each dig is a new flow (a new source port); every one ends half a second after its
    // answer.
    for _ in 0..5 {
        assert_eq!(dig(port), "192.0.2.53");
    }
    wait_for("every flow expired", Duration::from_secs(10), || {
        metric_sum(node.admin, "meshlb_l4_endpoint_open") == 0.0
    });
    assert!(metric_sum(node.admin, "meshlb_l4_endpoint_opened_total") >= 6.0);
}

#[test]
fn udp_flows_carry_the_simple_proxy_protocol_and_replies_lose_it() {
    // An origin that answers each datagram with its header (echoed, as SPP origins do), then
    // the client address the header named.
    let origin = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let origin_port = origin.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while let Ok((n, from)) = origin.recv_from(&mut buf) {
            let header = &buf[..38.min(n)];
            let told = lb_l4::proxy_header::simple_client(header)
                .map_or_else(|| "no header".to_string(), |a| a.to_string());
            let mut reply = header.to_vec();
            reply.extend_from_slice(told.as_bytes());
            let _ = origin.send_to(&reply, from);
        }
    });
    let port = free_udp().port();
    let config = Config::new()
        .pool(Pool::new("spp").origin("o", ("127.0.0.1", origin_port)))
        .load_balancer(layer4("spp.l4.test", "udp", port, "spp").proxy_protocol("simple"))
        .render();
    let _node = aggregator("l4-spp", &config, &[]);
    let client = UdpSocket::bind("127.0.0.9:0").expect("bind");
    client
        .set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    let me = client.local_addr().expect("addr");
    let mut buf = [0u8; 2048];
    let got = wait_until(Duration::from_secs(20), || {
        client.send_to(b"hello", ("127.0.0.1", port)).is_ok()
            && client
                .recv(&mut buf)
                .is_ok_and(|n| buf[..n] == *me.to_string().as_bytes())
    });
    assert!(
        got.is_some(),
        "the origin was told {me}, and its reply came back bare"
    );
}

#[test]
fn reloads_open_new_ports_close_old_ones_and_refuse_a_port_in_use() {
    let a = echo_origin("a");
    let (first, second) = (free_port(), free_port());
    let lb = |port: u16| one_tcp("reload.l4.test", port, "p", a);
    let node = aggregator("l4-reload", &lb(first), &[]);
    wait_serving(first);
    // A connection open across the reload goes on.
    let mut held = connect_from("127.0.0.1", first).expect("connect");
    assert_eq!(greeting(&mut held).as_deref(), Some("a"));
    std::fs::write(&node.config, lb(second)).expect("config");
    let (reloaded, errors) = reload(&node);
    assert!(reloaded, "{errors}");
    wait_serving(second);
    // Each worker drops its old listener on its own thread, soon after the reload.
    wait_for("the old port closed", Duration::from_secs(10), || {
        TcpStream::connect(("127.0.0.1", first)).is_err()
    });
    held.write_all(b"still here").expect("write");
    let mut echo = [0u8; 10];
    held.read_exact(&mut echo).expect("echo");
    assert_eq!(&echo, b"still here");
    // A port another program holds: the reload is refused, naming it; the old port serves on.
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
    let busy = taken.local_addr().expect("addr").port();
    std::fs::write(&node.config, lb(busy)).expect("config");
    let (reloaded, errors) = reload(&node);
    assert!(
        !reloaded && errors.contains(&format!("127.0.0.1:{busy}/tcp")),
        "{errors}"
    );
    assert_eq!(which("127.0.0.1", second).as_deref(), Some("a"));
}

#[test]
fn a_layer4_name_resolves_to_the_pops_and_is_not_the_http_proxys() {
    let a = echo_origin("a");
    let (port, dns, proxy) = (free_port(), free_tcp_and_udp(), free_tcp());
    let config = one_tcp("ssh.l4.test", port, "p", a);
    let dns_arg = dns.to_string();
    let proxy_arg = proxy.to_string();
    let node = aggregator(
        "l4-dns",
        &config,
        &[
            "--dns",
            &dns_arg,
            "--proxy",
            &proxy_arg,
            "--advertise-proxy",
            "127.0.0.77",
        ],
    );
    wait_serving(port);
    // DNS answers with the PoP (this aggregator's advertised address), never the origin.
    wait_for("the PoP's address", Duration::from_secs(20), || {
        let out = Command::new("dig")
            .args(["@127.0.0.1", "-p", &dns.port().to_string(), "+short"])
            .args(["+tries=1", "+time=2", "ssh.l4.test", "A"])
            .output()
            .expect("dig");
        String::from_utf8_lossy(&out.stdout).trim() == "127.0.0.77"
    });
    // The HTTP proxy does not serve the name.
    let out = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}"])
        .args(["-H", "Host: ssh.l4.test"])
        .arg(format!("http://{proxy}/"))
        .output()
        .expect("curl");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "404");
    // /status says what it is.
    let status = get(node.admin, "/status").expect("status");
    let lb = &status["load_balancers"][0];
    assert_eq!(lb["protocol"], "tcp");
    assert_eq!(lb["listen"][0], port);
    assert_eq!(lb["proxied"], true);
    // /explain steers a layer-4 load balancer as the proxy does: to one endpoint.
    let explained = get(node.admin, "/explain?lb=ssh.l4.test&client=192.0.2.9").expect("explain");
    assert_eq!(explained["mode"], "proxy");
    assert!(
        explained["outcome"]
            .as_str()
            .is_some_and(|o| o.contains("p/a")),
        "{explained}"
    );
}

#[test]
fn connections_beyond_the_limit_are_closed_and_flows_beyond_the_table_evict_the_oldest() {
    let a = echo_origin("a");
    let udp_origin = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let udp_port = udp_origin.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        while let Ok((n, from)) = udp_origin.recv_from(&mut buf) {
            let _ = udp_origin.send_to(&buf[..n], from);
        }
    });
    let (tcp, udp) = (free_port(), free_udp().port());
    let config = Config::new()
        .pool(Pool::new("t").origin("a", ("127.0.0.1", a)))
        .pool(Pool::new("u").origin("echo", ("127.0.0.1", udp_port)))
        .load_balancer(layer4("tcp.l4.test", "tcp", tcp, "t"))
        .load_balancer(layer4("udp.l4.test", "udp", udp, "u"))
        .render();
    let node = aggregator(
        "l4-limits",
        &config,
        &[
            "--l4-workers",
            "1",
            "--l4-max-connections",
            "2",
            "--l4-udp-max-flows",
            "2",
        ],
    );
    wait_serving(tcp);
    // Two held connections fill the node; a third is closed at accept, and counted.
    let mut held = Vec::new();
    wait_for("two connections held", Duration::from_secs(10), || {
        held.clear();
        for _ in 0..2 {
            if let Ok(mut s) = connect_from("127.0.0.1", tcp) {
                if greeting(&mut s).is_some() {
                    held.push(s);
                }
            }
        }
        held.len() == 2
    });
    let mut third = connect_from("127.0.0.1", tcp).expect("connect");
    assert_eq!(greeting(&mut third), None, "the third was served");
    assert!(metric_sum(node.admin, "meshlb_l4_refused_total") >= 1.0);
    drop(held);
    wait_for("a place free again", Duration::from_secs(10), || {
        which("127.0.0.1", tcp).is_some()
    });
    // Three clients, two flows: the least recently active is pushed out, and counted; its
    // next datagram begins a new flow.
    let clients: Vec<UdpSocket> = (0..3)
        .map(|_| {
            let c = UdpSocket::bind("127.0.0.1:0").expect("bind");
            c.set_read_timeout(Some(Duration::from_millis(500)))
                .expect("timeout");
            c
        })
        .collect();
    let echo = |c: &UdpSocket, msg: &[u8]| {
        let mut buf = [0u8; 64];
        c.send_to(msg, ("127.0.0.1", udp)).is_ok()
            && c.recv(&mut buf).is_ok_and(|n| &buf[..n] == msg)
    };
    wait_for("the UDP load balancer", Duration::from_secs(10), || {
        echo(&clients[0], b"first")
    });
    assert!(echo(&clients[1], b"second"));
    assert!(echo(&clients[2], b"third"));
    assert!(metric_sum(node.admin, "meshlb_l4_flows_evicted_total") >= 1.0);
    assert!(
        echo(&clients[0], b"first again"),
        "the evicted client is served anew"
    );
}

/// The tunnel, virtual network and route a private endpoint on 127.0.0.1 needs.
const PRIVATE_NETWORK: &str = r#"
[[tunnels]]
id = "f70ff985-a4ef-4643-bbbc-4a0ed4fc8415"
name = "office"
tunnel_secret = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="

[[virtual_networks]]
id = "a5624d4e-044a-4ff0-b3e1-e2465353d4b4"
name = "office"
is_default_network = true

[[routes]]
network = "127.0.0.0/8"
tunnel_id = "f70ff985-a4ef-4643-bbbc-4a0ed4fc8415"
"#;

/// With no connection of its tunnel anywhere in the mesh, a private endpoint is never dialed
/// (not on the public side either), and its connections go to the pool's other endpoint.
/// Through a tunnel: tests/tunnel.rs.
#[test]
fn a_private_endpoint_is_never_dialed_and_its_connections_go_elsewhere() {
    let public = echo_origin("public");
    let private = TcpListener::bind("127.0.0.1:0").expect("bind");
    private.set_nonblocking(true).expect("nonblocking");
    let private_port = private.local_addr().expect("addr").port();
    let listen = free_port();
    let config = Config::new()
        .pool(
            Pool::new("p")
                .origin("public", ("127.0.0.1", public))
                .endpoint(Endpoint::new("private", ("127.0.0.1", private_port)).set(
                    "virtual_network_id",
                    "\"a5624d4e-044a-4ff0-b3e1-e2465353d4b4\"",
                )),
        )
        .load_balancer(layer4("private.example.test", "tcp", listen, "p"))
        .render();
    let node = aggregator("l4-private", &format!("{config}{PRIVATE_NETWORK}"), &[]);
    wait_serving(listen);
    for _ in 0..20 {
        assert_eq!(which("127.0.0.1", listen).as_deref(), Some("public"));
    }
    assert!(
        matches!(private.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the private endpoint was dialed"
    );
    drop(node);
}
