//! Helpers shared by the end-to-end tests: child processes that die with the test, free
//! loopback ports, HTTP origins that can be stopped, the admin API, bounded waits.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::Child;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Kills its processes when dropped, so a failed test leaves nothing behind. When the test is
/// failing (the drop runs while it panics), each child spawned by `spawn_logged` has the end of
/// its standard error printed first, so the failure shows what the nodes said.
pub struct Procs(pub Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
            let Some(log) = take_log(c.id()) else {
                continue;
            };
            if std::thread::panicking() {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                let tail = &lines[lines.len().saturating_sub(40)..];
                eprintln!(
                    "--- child {} ({}), last lines of its stderr:",
                    c.id(),
                    log.display()
                );
                for line in tail {
                    eprintln!("{line}");
                }
            } else {
                let _ = std::fs::remove_file(&log);
            }
        }
    }
}

/// Where each child spawned by `spawn_logged` writes its standard error, by pid.
static CHILD_LOGS: Mutex<Vec<(u32, std::path::PathBuf)>> = Mutex::new(Vec::new());

fn take_log(pid: u32) -> Option<std::path::PathBuf> {
    let mut logs = CHILD_LOGS.lock().unwrap_or_else(|e| e.into_inner());
    let i = logs.iter().position(|(p, _)| *p == pid)?;
    Some(logs.swap_remove(i).1)
}

/// Spawns `command` with its standard output discarded and its standard error in a file under
/// the temporary directory, which `Procs` prints when the test fails and removes otherwise.
pub fn spawn_logged(command: &mut std::process::Command, what: &str) -> Child {
    let dir = std::env::temp_dir().join("meshlb-test-logs");
    let _ = std::fs::create_dir_all(&dir);
    let log = tempfile::Builder::new()
        .prefix(&format!("{what}-"))
        .suffix(".log")
        .tempfile_in(&dir)
        .and_then(|f| f.keep().map_err(|e| e.error));
    let (stderr, path) = match log {
        Ok((file, path)) => (std::process::Stdio::from(file), Some(path)),
        Err(_) => (std::process::Stdio::null(), None),
    };
    let child = command
        .stdout(std::process::Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    if let Some(path) = path {
        CHILD_LOGS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((child.id(), path));
    }
    child
}

/// A port below Linux's ephemeral range (32768 and up) that `bind` takes now, for a child's
/// listener: a port in that range that is free now can be handed to another process's outgoing
/// socket (a probe, a curl) before the child binds it, and the child then fails to start. Spread
/// by pid, and never the same twice within a test binary, whichever protocol asked.
fn free_port_below_ephemeral(what: &str, bind: impl Fn(u16) -> bool) -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    for _ in 0..2_000 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let offset = std::process::id().wrapping_mul(7_919).wrapping_add(n) % 12_000;
        let port = 20_000 + u16::try_from(offset).expect("below 12000");
        if bind(port) {
            return port;
        }
    }
    panic!("no free {what} port in 20000..32000");
}

/// A free UDP port on 127.0.0.1 for a child's gossip socket.
pub fn free_udp() -> SocketAddr {
    let port = free_port_below_ephemeral("UDP", |p| UdpSocket::bind(("127.0.0.1", p)).is_ok());
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// A free TCP port on 127.0.0.1 for a child's listener (admin, proxy, DNS over TCP).
pub fn free_tcp() -> SocketAddr {
    let port = free_port_below_ephemeral("TCP", |p| TcpListener::bind(("127.0.0.1", p)).is_ok());
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// A port on 127.0.0.1 free for both TCP and UDP (a DNS server or a layer-4 listener takes both).
pub fn free_tcp_and_udp() -> SocketAddr {
    let port = free_port_below_ephemeral("TCP and UDP", |p| {
        TcpListener::bind(("127.0.0.1", p)).is_ok() && UdpSocket::bind(("127.0.0.1", p)).is_ok()
    });
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// The same on ::1, for a child listening on IPv6 loopback.
pub fn free_tcp_and_udp_v6() -> SocketAddr {
    let port = free_port_below_ephemeral("IPv6 TCP and UDP", |p| {
        TcpListener::bind(("::1", p)).is_ok() && UdpSocket::bind(("::1", p)).is_ok()
    });
    SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, port))
}

/// Whether an origin's listener is open; `Stop` is asked for and `Closed` confirmed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Power {
    On,
    Stop,
    Closed,
}

/// A test origin: its port, and a switch that closes its listener (connections are then
/// refused) and opens it again on the same port.
#[derive(Clone)]
pub struct Origin {
    pub port: u16,
    addr: SocketAddr,
    power: Arc<(Mutex<Power>, Condvar)>,
}

impl Origin {
    /// Closes the listener; returns once it is closed.
    pub fn stop(&self) {
        let (lock, cv) = &*self.power;
        *lock.lock().unwrap() = Power::Stop;
        // Wake the accept loop, which then sees `Stop` and closes the listener.
        let _ = TcpStream::connect(self.addr);
        let mut p = lock.lock().unwrap();
        while *p != Power::Closed {
            p = cv.wait(p).unwrap();
        }
    }

    /// Opens the listener again.
    pub fn start(&self) {
        let (lock, cv) = &*self.power;
        *lock.lock().unwrap() = Power::On;
        cv.notify_all();
    }
}

/// Serves `ip` on a free port, one thread per connection running `handle`, until stopped.
fn serve(ip: &str, handle: impl Fn(TcpStream) + Send + Sync + 'static) -> Origin {
    let listener = TcpListener::bind((ip, 0)).expect("origin");
    let addr = listener.local_addr().expect("addr");
    let origin = Origin {
        port: addr.port(),
        addr,
        power: Arc::new((Mutex::new(Power::On), Condvar::new())),
    };
    let power = Arc::clone(&origin.power);
    let handle = Arc::new(handle);
    std::thread::spawn(move || {
        let mut listener = Some(listener);
        loop {
            let l = match listener.take() {
                Some(l) => l,
                None => TcpListener::bind(addr).expect("rebind"),
            };
            for conn in l.incoming() {
                if *power.0.lock().unwrap() != Power::On {
                    break;
                }
                if let Ok(s) = conn {
                    let handle = Arc::clone(&handle);
                    std::thread::spawn(move || handle(s));
                }
            }
            drop(l); // closed: connections are refused
            let (lock, cv) = &*power;
            let mut p = lock.lock().unwrap();
            *p = Power::Closed;
            cv.notify_all();
            while *p != Power::On {
                p = cv.wait(p).unwrap();
            }
        }
    });
    origin
}

/// A minimal HTTP origin on `ip` that answers 200 `ok`.
pub fn origin_on(ip: &str) -> Origin {
    serve(ip, |mut s| {
        let mut buf = [0u8; 1024];
        let _ = s.read(&mut buf);
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
    })
}

/// An origin on 127.0.0.1.
pub fn origin() -> Origin {
    origin_on("127.0.0.1")
}

/// The Prometheus text `/metrics` serves at `addr` (no token needed); empty while nothing
/// answers there (a node still starting).
pub fn scrape(addr: SocketAddr) -> String {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return String::new();
    };
    let mut text = String::new();
    if write!(s, "GET /metrics HTTP/1.0\r\n\r\n").is_err() || s.read_to_string(&mut text).is_err() {
        return String::new();
    }
    text
}

pub fn get(admin: SocketAddr, path: &str) -> Option<Value> {
    let mut s = TcpStream::connect(admin).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok();
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: admin\r\nAuthorization: Bearer secret-token\r\n\r\n"
    )
    .ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    let json = body.split_once("\r\n\r\n")?.1;
    serde_json::from_str(json).ok()
}

/// A fresh scratch directory `meshlb-{name}-*` under the temp dir, holding a cluster key
/// file; returns (directory, key file). The directory goes when the guard drops.
pub fn scratch_dir_with_key(name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix(&format!("meshlb-{name}-"))
        .tempdir()
        .expect("scratch dir");
    let key = dir.path().join("key");
    std::fs::write(&key, format!("the meshlb {name} test cluster key")).expect("key");
    (dir, key)
}

/// Arguments that give an aggregator (or a prober's metrics listener) the admin token `get`
/// sends, `secret-token`, written to a file in `dir`.
pub fn admin_token_args(dir: &std::path::Path) -> Vec<String> {
    let file = dir.join("admin-token");
    std::fs::write(&file, "secret-token").expect("token file");
    vec!["--admin-token-file".into(), file.display().to_string()]
}

/// How long until `ok` held, checked every 50 ms; `None` if it did not within `within`.
pub fn wait_until(within: Duration, mut ok: impl FnMut() -> bool) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < within {
        if ok() {
            return Some(start.elapsed());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

pub fn wait_for(what: &str, within: Duration, ok: impl FnMut() -> bool) -> Duration {
    wait_until(within, ok)
        .unwrap_or_else(|| panic!("timed out after {within:?} waiting for {what}"))
}

/// An HTTP origin on `ip` that answers with its `name` and what it received (`Host`,
/// `X-Forwarded-For`, `X-Forwarded-Proto`, one per line). `GET /hold` waits `hold` before
/// answering; a request with `Upgrade: echo` gets `101` and then every byte echoed back (a
/// protocol switch like WebSocket's, without the framing). `Connection: close` on every answer.
/// A chunked request body, decoded, and its trailer fields (`name: value`, as sent); `None`
/// when it breaks off.
fn read_chunked(s: &mut TcpStream) -> Option<(Vec<u8>, Vec<String>)> {
    use std::io::BufRead;
    let mut r = std::io::BufReader::new(s);
    let mut body = Vec::new();
    let mut trailers = Vec::new();
    loop {
        let mut line = String::new();
        r.read_line(&mut line).ok()?;
        let size = line.trim().split(';').next()?;
        let size = usize::from_str_radix(size, 16).ok()?;
        if size == 0 {
            // Trailer fields, up to the empty line.
            loop {
                line.clear();
                if r.read_line(&mut line).ok()? == 0 || line.trim().is_empty() {
                    return Some((body, trailers));
                }
                trailers.push(line.trim().to_string());
            }
        }
        let start = body.len();
        body.resize(start + size + 2, 0);
        r.read_exact(&mut body[start..]).ok()?;
        body.truncate(start + size);
    }
}

/// A connection whose request head was already read: the head again, then the connection.
/// (tungstenite's server handshake reads the head itself.)
struct Replay {
    head: std::io::Cursor<Vec<u8>>,
    s: TcpStream,
}

impl Read for Replay {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self.head.read(buf)? {
            0 => self.s.read(buf),
            n => Ok(n),
        }
    }
}

impl Write for Replay {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.s.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.s.flush()
    }
}

/// A real WebSocket server (tungstenite): every text and binary message echoed, pings
/// answered, the closing handshake completed.
fn websocket_echo(stream: Replay) {
    let Ok(mut ws) = tungstenite::accept(stream) else {
        return;
    };
    while let Ok(message) = ws.read() {
        if (message.is_text() || message.is_binary()) && ws.send(message).is_err() {
            return;
        }
    }
}

pub fn named_origin(ip: &str, name: &str, hold: Duration) -> Origin {
    let name = name.to_string();
    serve(ip, move |s| serve_named(s, &name, hold))
}

fn serve_named(mut s: TcpStream, name: &str, hold: Duration) {
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 65536 {
        match s.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let text = String::from_utf8_lossy(&head).to_string();
    let header = |n: &str| {
        text.lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.trim()
                    .eq_ignore_ascii_case(n)
                    .then(|| v.trim().to_string())
            })
            .unwrap_or_default()
    };
    let path = text.split_whitespace().nth(1).unwrap_or("/").to_string();
    let (body, trailers) = if header("transfer-encoding").eq_ignore_ascii_case("chunked") {
        match read_chunked(&mut s) {
            Some(b) => b,
            None => return,
        }
    } else {
        let length: usize = header("content-length").parse().unwrap_or(0);
        let mut body = vec![0u8; length];
        if s.read_exact(&mut body).is_err() {
            return;
        }
        (body, Vec::new())
    };
    if header("upgrade").eq_ignore_ascii_case("websocket") {
        websocket_echo(Replay {
            head: std::io::Cursor::new(head),
            s,
        });
        return;
    }
    if header("upgrade").eq_ignore_ascii_case("echo") {
        let _ = s.write_all(
            b"HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: echo\r\n\r\n",
        );
        let mut buf = [0u8; 4096];
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 || s.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        return;
    }
    if path == "/hold" {
        std::thread::sleep(hold);
    }
    // A slow download: 80 chunks of 1 KiB of `d`, one every 100 ms (8 s in all).
    if path == "/drip" {
        let chunk = format!("400\r\n{}\r\n", "d".repeat(0x400));
        let _ = s.write_all(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
        );
        for _ in 0..80 {
            if s.write_all(chunk.as_bytes()).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = s.write_all(b"0\r\n\r\n");
        return;
    }
    // A 1 MiB answer of 64 chunks of `x`.
    if path == "/big" {
        let chunk = format!("4000\r\n{}\r\n", "x".repeat(0x4000));
        let _ = s.write_all(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
        );
        for _ in 0..64 {
            if s.write_all(chunk.as_bytes()).is_err() {
                return;
            }
        }
        let _ = s.write_all(b"0\r\n\r\n");
        return;
    }
    // A chunked answer with a trailer field it announces.
    if path == "/trailers" {
        let _ = s.write_all(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Checksum\r\n\
              Connection: close\r\n\r\n5\r\nhello\r\n0\r\nX-Checksum: sha256=2cf2\r\n\r\n",
        );
        return;
    }
    // What an upload brought: its length, the sum of its bytes and its trailer fields.
    if path == "/upload" {
        let sum: u64 = body.iter().map(|&b| u64::from(b)).sum();
        let reply = format!(
            "{name}\nreceived={}\nsum={sum}\ntrailers={}\n",
            body.len(),
            trailers.join("; ")
        );
        let _ = write!(
            s,
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
            reply.len()
        );
        return;
    }
    let reply = format!(
        "{name}\nhost={}\nxff={}\nproto={}\nte={}\nbody={}\n",
        header("host"),
        header("x-forwarded-for"),
        header("x-forwarded-proto"),
        header("te"),
        String::from_utf8_lossy(&body)
    );
    let _ = write!(
        s,
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
        reply.len()
    );
}

/// A small mesh on loopback: one aggregator (region WEU, with `extra` arguments such as
/// `--dns` or `--proxy`) and three probers in WEU, gossiping with `key`.
pub fn start_mesh(
    config: &std::path::Path,
    key: &std::path::Path,
    admin: SocketAddr,
    extra: &[String],
) -> Procs {
    start_mesh_seeded(config, key, admin, extra).0
}

/// `start_mesh`, also returning the aggregator's gossip address (a seed for more members).
pub fn start_mesh_seeded(
    config: &std::path::Path,
    key: &std::path::Path,
    admin: SocketAddr,
    extra: &[String],
) -> (Procs, SocketAddr) {
    start_mesh_split(config, config, key, admin, extra)
}

/// `start_mesh_seeded` with one config file for the aggregator and another for the probers.
pub fn start_mesh_split(
    config: &std::path::Path,
    probers_config: &std::path::Path,
    key: &std::path::Path,
    admin: SocketAddr,
    extra: &[String],
) -> (Procs, SocketAddr) {
    let bin = env!("CARGO_BIN_EXE_meshlb");
    let gossip = free_udp();
    let mesh = |listen: SocketAddr| -> Vec<String> {
        vec![
            "--listen".into(),
            listen.to_string(),
            "--seed".into(),
            gossip.to_string(),
            "--key-file".into(),
            key.display().to_string(),
            "--gossip-interval-ms".into(),
            "100".into(),
        ]
    };
    let mut procs = Procs(Vec::new());
    procs.0.push(spawn_logged(
        std::process::Command::new(bin)
            .args(["aggregator", "--config", &config.display().to_string()])
            .args(["--region", "WEU", "--admin", &admin.to_string()])
            .args(extra)
            .args(mesh(gossip)),
        "aggregator",
    ));
    for dc in ["ams", "fra", "lhr"] {
        procs.0.push(spawn_logged(
            std::process::Command::new(bin)
                .args(["prober", "--config", &probers_config.display().to_string()])
                .args(["--region", "WEU", "--dc", dc])
                .args(mesh(free_udp())),
            "prober",
        ));
    }
    (procs, gossip)
}

/// One more aggregator (region `region`, `extra` arguments) joining a mesh through `seed`.
pub fn start_aggregator(
    config: &std::path::Path,
    key: &std::path::Path,
    region: &str,
    admin: SocketAddr,
    seed: SocketAddr,
    extra: &[String],
) -> Child {
    spawn_logged(
        std::process::Command::new(env!("CARGO_BIN_EXE_meshlb"))
            .args(["aggregator", "--config", &config.display().to_string()])
            .args(["--region", region, "--admin", &admin.to_string()])
            .args(extra)
            .args([
                "--listen",
                &free_udp().to_string(),
                "--seed",
                &seed.to_string(),
            ])
            .args([
                "--key-file",
                &key.display().to_string(),
                "--gossip-interval-ms",
                "100",
            ]),
        "aggregator",
    )
}

/// A real Unbound on `listen` (127.0.0.1 only, no IPv6, in the foreground, everything in
/// `dir`), with `server` lines added to its `server:` clause and `rest` after it.
#[allow(dead_code)]
pub fn unbound(dir: &std::path::Path, listen: SocketAddr, server: &str, rest: &str) -> Child {
    let conf = dir.join("unbound.conf");
    std::fs::write(
        &conf,
        format!(
            r#"server:
  interface: {ip}@{port}
  port: {port}
  do-daemonize: no
  use-syslog: no
  logfile: "{dir}/unbound.log"
  chroot: ""
  username: ""
  directory: "{dir}"
  pidfile: "{dir}/unbound.pid"
  num-threads: 1
  do-ip6: no
  access-control: 127.0.0.0/8 allow
{server}{rest}"#,
            ip = listen.ip(),
            port = listen.port(),
            dir = dir.display(),
        ),
    )
    .expect("unbound.conf");
    std::process::Command::new("unbound")
        .args(["-d", "-c"])
        .arg(&conf)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("unbound (package unbound)")
}

/// `dig +short` for `name`'s A records at `dns` (one try, 2 s), in answer order.
#[allow(dead_code)]
pub fn dig_short(dns: SocketAddr, name: &str) -> Vec<String> {
    let out = std::process::Command::new("dig")
        .arg(format!("@{}", dns.ip()))
        .args([
            "-p",
            &dns.port().to_string(),
            name,
            "A",
            "+short",
            "+tries=1",
            "+time=2",
        ])
        .output()
        .expect("dig (package bind9-dnsutils)");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}
