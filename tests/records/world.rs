//! The aggregators whose records the trials read: one with every record on (JSON access log,
//! layer-4 log, dnstap to a file, JSON process logs); one with the combined access log and
//! dnstap to `fstrm_capture`; one whose dnstap collector never reads.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use test_support::config::{Config, Endpoint, Lb, Pool, Zone};
use test_support::*;

pub static WORLD: Shared<World> = Shared::new(World::start);
pub static COMBINED: Shared<Combined> = Shared::new(Combined::start);
pub static STALLED: Shared<Stalled> = Shared::new(Stalled::start);

/// The source address the regions table places in ENAM (`[geolocation] networks`).
pub const ENAM_CLIENT: &str = "127.0.0.77";

/// A running aggregator, its stderr in `stderr`, killed on drop.
pub struct Node {
    pub child: Child,
    pub admin: SocketAddr,
    pub proxy: SocketAddr,
    pub dns: SocketAddr,
    pub stderr: PathBuf,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let text = std::fs::read_to_string(&self.stderr).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(30).collect();
            eprintln!("--- aggregator's last log lines:");
            for l in tail.iter().rev() {
                eprintln!("{l}");
            }
        }
    }
}

/// Starts an aggregator on `config` with the proxy and DNS on fresh ports, and `extra`.
fn aggregator(
    dir: &std::path::Path,
    key: &std::path::Path,
    config: &str,
    extra: &[String],
) -> Node {
    let path = dir.join("meshlb.toml");
    std::fs::write(&path, config).expect("config");
    let (admin, proxy, dns, gossip) = (free_tcp(), free_tcp(), free_tcp_and_udp(), free_udp());
    let stderr = dir.join("stderr.log");
    let file = std::fs::File::create(&stderr).expect("stderr file");
    let child = Command::new(meshlb_bin())
        .args(["aggregator", "--config", &path.display().to_string()])
        .args(["--region", "WEU", "--admin", &admin.to_string()])
        .args(["--proxy", &proxy.to_string(), "--dns", &dns.to_string()])
        .args([
            "--listen",
            &gossip.to_string(),
            "--seed",
            &gossip.to_string(),
        ])
        .args(["--key-file", &key.display().to_string()])
        .args(admin_token_args(dir))
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::from(file))
        .spawn()
        .expect("meshlb aggregator");
    let node = Node {
        child,
        admin,
        proxy,
        dns,
        stderr,
    };
    wait_for("the admin API", Duration::from_secs(20), || {
        scrape(admin).contains("meshlb_")
    });
    node
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// A port nothing listens on at `ip` (connections are refused).
fn closed_port(ip: &str) -> u16 {
    let l = TcpListener::bind((ip, 0)).expect("bind");
    l.local_addr().expect("addr").port()
}

/// A TCP origin that echoes what it reads and closes its side at the client's half-close.
fn tcp_echo() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            std::thread::spawn(move || {
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

/// A UDP origin that echoes each datagram.
fn udp_echo() -> u16 {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let port = socket.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while let Ok((n, from)) = socket.recv_from(&mut buf) {
            let _ = socket.send_to(&buf[..n], from);
        }
    });
    port
}

pub struct World {
    pub node: Node,
    pub access_log: PathBuf,
    pub l4_log: PathBuf,
    pub dnstap: PathBuf,
    pub tcp_port: u16,
    pub udp_port: u16,
    _origins: Vec<Origin>,
    pub dir: tempfile::TempDir,
}

/// The zone every world serves, with a DNS-only load balancer in it.
fn zone_and_dns(config: Config) -> Config {
    config
        .zone(Zone::new("example.test").nameservers(&["ns1.example.test"]))
        .load_balancer(Lb::new("dns.example.test").pools(&["eu"]))
}

impl World {
    fn start() -> World {
        let (dir, key) = scratch_dir_with_key("records");
        let hold = Duration::ZERO;
        let origins = vec![
            named_origin("127.0.0.61", "eu1", hold),
            named_origin("127.0.0.62", "us1", hold),
            named_origin("127.0.0.63", "off1", hold),
            named_origin("127.0.0.64", "fb1", hold),
            named_origin("127.0.0.66", "z2", hold),
        ];
        const AT: [&str; 5] = [
            "127.0.0.61",
            "127.0.0.62",
            "127.0.0.63",
            "127.0.0.64",
            "127.0.0.66",
        ];
        let at = |i: usize| (AT[i], origins[i].port);
        let dead = ("127.0.0.65", closed_port("127.0.0.65"));
        let (tcp_port, udp_port) = (free_tcp_and_udp().port(), free_tcp_and_udp().port());
        let config = zone_and_dns(Config::new())
            .pool(Pool::new("eu").origin("eu1", at(0)))
            .pool(Pool::new("us").origin("us1", at(1)))
            .pool(Pool::new("off").origin("off1", at(2)).enabled(false))
            .pool(Pool::new("fb").origin("fb1", at(3)))
            .pool(Pool::new("dead").origin("gone", dead))
            .pool(
                Pool::new("zdt")
                    .endpoint(Endpoint::new("z1", dead))
                    .endpoint(Endpoint::new("z2", at(4))),
            )
            .pool(Pool::new("tcp").origin("echo", ("127.0.0.1", tcp_echo())))
            .pool(Pool::new("udp").origin("echo", ("127.0.0.1", udp_echo())))
            .network_in_region(&format!("{ENAM_CLIENT}/32"), "ENAM")
            .load_balancer(
                Lb::new("geo.example.test")
                    .proxied()
                    .pools(&["eu"])
                    .region_pools(&[("ENAM", &["us"])])
                    .steering("geo")
                    .set(
                        "location_strategy",
                        "{ mode = \"resolver_ip\", prefer_ecs = \"never\" }",
                    ),
            )
            .load_balancer(
                Lb::new("sticky.example.test")
                    .proxied()
                    .pools(&["eu"])
                    .affinity("cookie"),
            )
            .load_balancer(
                Lb::new("fallback.example.test")
                    .proxied()
                    .pools(&["off"])
                    .fallback("fb"),
            )
            .load_balancer(Lb::new("dead.example.test").proxied().pools(&["dead"]))
            .load_balancer(
                Lb::new("zdt.example.test")
                    .proxied()
                    .pools(&["zdt"])
                    .zero_downtime_failover("temporary"),
            )
            .load_balancer(
                Lb::new("tcp.example.test")
                    .protocol("tcp")
                    .listen(&[tcp_port])
                    .pools(&["tcp"]),
            )
            .load_balancer(
                Lb::new("udp.example.test")
                    .protocol("udp")
                    .listen(&[udp_port])
                    .pools(&["udp"]),
            )
            .render();
        let (access_log, l4_log, dnstap) = (
            dir.path().join("access.log"),
            dir.path().join("l4.log"),
            dir.path().join("dnstap.fstrm"),
        );
        let extra = strings(&[
            "--log-format",
            "json",
            "--l4",
            "127.0.0.1",
            "--l4-udp-idle-timeout-ms",
            "300",
            "--access-log",
            &access_log.display().to_string(),
            "--l4-log",
            &l4_log.display().to_string(),
            "--dnstap",
            &dnstap.display().to_string(),
            "--records-flush-ms",
            "5",
        ]);
        let node = aggregator(dir.path(), &key, &config, &extra);
        World {
            node,
            access_log,
            l4_log,
            dnstap,
            tcp_port,
            udp_port,
            _origins: origins,
            dir,
        }
    }
}

/// Combined access log; dnstap to `fstrm_capture` on a socket.
pub struct Combined {
    pub node: Node,
    pub access_log: PathBuf,
    /// The collector running now, and the file it writes.
    capture: Child,
    captured: PathBuf,
    socket: PathBuf,
    /// Collectors started so far (each writes a file of its own).
    captures: usize,
    _origin: Origin,
    _dir: tempfile::TempDir,
}

/// `fstrm_capture` listening on `socket`, writing `file`, once its socket is there.
fn fstrm_capture(socket: &std::path::Path, file: &std::path::Path) -> Child {
    let _ = std::fs::remove_file(socket);
    let capture = Command::new("fstrm_capture")
        .args(["-t", "protobuf:dnstap.Dnstap", "-u"])
        .arg(socket)
        .arg("-w")
        .arg(file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("fstrm_capture (Debian's fstrm-bin) runs");
    wait_for("fstrm_capture's socket", Duration::from_secs(10), || {
        socket.exists()
    });
    capture
}

impl Combined {
    /// Stops the running collector (SIGINT: it writes out what it holds) and gives its file;
    /// none runs until `start_capture`.
    pub fn stop_capture(&mut self) -> PathBuf {
        let pid = self.capture.id().to_string();
        let _ = Command::new("kill").args(["-INT", &pid]).status();
        let _ = self.capture.wait();
        self.captured.clone()
    }

    /// A new collector on the same socket, writing a new file.
    pub fn start_capture(&mut self) {
        self.captures += 1;
        self.captured = self
            ._dir
            .path()
            .join(format!("captured-{}.fstrm", self.captures));
        self.capture = fstrm_capture(&self.socket, &self.captured);
    }
}

impl Drop for Combined {
    fn drop(&mut self) {
        let _ = self.capture.kill();
        let _ = self.capture.wait();
    }
}

impl Combined {
    fn start() -> Combined {
        let (dir, key) = scratch_dir_with_key("records-combined");
        let origin = named_origin("127.0.0.61", "eu1", Duration::ZERO);
        let config = zone_and_dns(Config::new())
            .pool(Pool::new("eu").origin("eu1", ("127.0.0.61", origin.port)))
            .load_balancer(Lb::new("www.example.test").proxied().pools(&["eu"]))
            .render();
        let socket = dir.path().join("dnstap.sock");
        let captured = dir.path().join("captured.fstrm");
        let capture = fstrm_capture(&socket, &captured);
        let access_log = dir.path().join("access.log");
        let extra = strings(&[
            "--access-log",
            &access_log.display().to_string(),
            "--access-log-format",
            "combined",
            "--access-log-query",
            "--dnstap-socket",
            &socket.display().to_string(),
            "--records-flush-ms",
            "5",
        ]);
        let node = aggregator(dir.path(), &key, &config, &extra);
        Combined {
            node,
            access_log,
            capture,
            captured,
            socket,
            captures: 0,
            _origin: origin,
            _dir: dir,
        }
    }
}

/// dnstap to a collector that accepts and then never reads nor answers: the writer waits in
/// the handshake, its queue of 8 fills.
pub struct Stalled {
    pub node: Node,
    _listener: UnixListener,
    _held: std::sync::Arc<std::sync::Mutex<Vec<std::os::unix::net::UnixStream>>>,
    _dir: tempfile::TempDir,
}

impl Stalled {
    fn start() -> Stalled {
        let (dir, key) = scratch_dir_with_key("records-stalled");
        let socket = dir.path().join("stalled.sock");
        let listener = UnixListener::bind(&socket).expect("bind");
        let held = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        {
            let (listener, held) = (
                listener.try_clone().expect("clone"),
                std::sync::Arc::clone(&held),
            );
            std::thread::spawn(move || {
                for conn in listener.incoming().flatten() {
                    held.lock().expect("held").push(conn);
                }
            });
        }
        let config = zone_and_dns(Config::new())
            .pool(Pool::new("eu").origin("eu1", ("127.0.0.61", 80)))
            .render();
        let extra = strings(&[
            "--dnstap-socket",
            &socket.display().to_string(),
            "--records-queue",
            "8",
            "--records-write-timeout-ms",
            "600000",
        ]);
        let node = aggregator(dir.path(), &key, &config, &extra);
        Stalled {
            node,
            _listener: listener,
            _held: held,
            _dir: dir,
        }
    }
}
