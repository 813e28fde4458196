//! The simulated world: Linux network namespaces joined by veth pairs to a bridge that lives
//! in a hub namespace of its own (nothing is added to the host's network), one namespace per
//! region holding its three probers, one per continent holding its origins, one per
//! aggregator and one for clients. Addresses are 10.77.0.0/24, inside these namespaces only.
//! Dropping the world kills every process and deletes every namespace, also after a failure.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

/// Runs `ip` with `args`; panics with its stderr on failure (setup errors are test errors).
pub fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .expect("ip (package iproute2)");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One namespace attached to the bridge.
#[derive(Debug, Clone)]
pub struct Site {
    pub netns: String,
    /// The hub-side end of its veth pair: taking it down cuts the site off.
    hub_end: String,
}

/// A process started in a site, restartable with the same arguments.
pub struct Node {
    pub name: String,
    netns: String,
    args: Vec<String>,
    log: PathBuf,
    child: Option<Child>,
}

impl Node {
    fn spawn(&mut self) {
        let log = std::fs::File::create(&self.log).expect("log file");
        let child = Command::new("ip")
            .args(["netns", "exec", &self.netns])
            .arg(env!("CARGO_BIN_EXE_meshlb"))
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("meshlb in a namespace");
        self.child = Some(child);
    }

    /// kill -9.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again unless it is running (killed, or exited by itself).
    pub fn start(&mut self) {
        if let Some(c) = &mut self.child {
            if matches!(c.try_wait(), Ok(Some(_))) {
                self.child = None;
            }
        }
        if self.child.is_none() {
            self.spawn();
        }
    }

    /// SIGHUP: reload the config. `ip netns exec` runs the command in its own process (it
    /// execs), so the child is meshlb itself.
    pub fn hangup(&self) {
        if let Some(c) = &self.child {
            if let Ok(pid) = i32::try_from(c.id()) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGHUP,
                );
            }
        }
    }
}

pub struct World {
    prefix: String,
    hub: String,
    pub sites: BTreeMap<String, Site>,
    pub nodes: Vec<Node>,
    pub dir: PathBuf,
    next: u8,
    /// How the admin APIs are reached: over TLS, trusting the suite's CA (`build.rs`).
    pub admin_tls: Option<Arc<rustls::ClientConfig>>,
}

impl World {
    /// An empty world: the hub namespace with its bridge.
    pub fn new() -> World {
        remove_stale();
        let prefix = format!("mlbc{}", std::process::id());
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("chaos-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("logs")).expect("chaos dir");
        // Leftovers of an earlier run of this pid are removed first.
        let _ = Command::new("ip")
            .args(["netns", "del", &format!("{prefix}-hub")])
            .output();
        let hub = format!("{prefix}-hub");
        ip(&["netns", "add", &hub]);
        let world = World {
            prefix,
            hub: hub.clone(),
            sites: BTreeMap::new(),
            nodes: Vec::new(),
            dir,
            next: 1,
            admin_tls: None,
        };
        ip(&["-n", &hub, "link", "add", "br0", "type", "bridge"]);
        ip(&["-n", &hub, "link", "set", "br0", "up"]);
        world
    }

    /// A namespace named `name` on the bridge, with `extra` more addresses.
    pub fn site(&mut self, name: &str, extra: usize) -> Vec<Ipv4Addr> {
        let netns = format!("{}-{name}", self.prefix);
        let _ = Command::new("ip").args(["netns", "del", &netns]).output();
        ip(&["netns", "add", &netns]);
        let i = self.next;
        self.next += 1 + u8::try_from(extra).expect("few addresses");
        let hub_end = format!("h{i}");
        ip(&[
            "-n", &self.hub, "link", "add", &hub_end, "type", "veth", "peer", "name", "eth0",
            "netns", &netns,
        ]);
        ip(&[
            "-n", &self.hub, "link", "set", &hub_end, "master", "br0", "up",
        ]);
        ip(&["-n", &netns, "link", "set", "lo", "up"]);
        let mut addrs = Vec::new();
        for k in 0..=extra {
            let a = Ipv4Addr::new(10, 77, 0, i + u8::try_from(k).expect("few"));
            ip(&[
                "-n",
                &netns,
                "addr",
                "add",
                &format!("{a}/24"),
                "dev",
                "eth0",
            ]);
            addrs.push(a);
        }
        ip(&["-n", &netns, "link", "set", "eth0", "up"]);
        self.sites.insert(name.to_string(), Site { netns, hub_end });
        addrs
    }

    pub fn netns(&self, site: &str) -> &str {
        &self.sites[site].netns
    }

    /// Starts `meshlb ARGS` in `site`; returns its index in `nodes`.
    pub fn run(&mut self, name: &str, site: &str, args: Vec<String>) -> usize {
        let mut node = Node {
            name: name.to_string(),
            netns: self.netns(site).to_string(),
            args,
            log: self
                .dir
                .join("logs")
                .join(format!("{}.log", name.replace('/', "-"))),
            child: None,
        };
        node.spawn();
        self.nodes.push(node);
        self.nodes.len() - 1
    }

    pub fn node(&mut self, name: &str) -> &mut Node {
        self.nodes
            .iter_mut()
            .find(|n| n.name == name)
            .unwrap_or_else(|| panic!("no node {name}"))
    }

    /// Cuts a site off the bridge (every packet in or out is lost), or heals it.
    pub fn link(&self, site: &str, up: bool) {
        let s = &self.sites[site];
        ip(&[
            "-n",
            &self.hub,
            "link",
            "set",
            &s.hub_end,
            if up { "up" } else { "down" },
        ]);
    }

    /// Runs a command in a site and returns its stdout.
    pub fn exec(&self, site: &str, cmd: &[&str]) -> String {
        let out = Command::new("ip")
            .args(["netns", "exec", self.netns(site)])
            .args(cmd)
            .output()
            .expect("ip netns exec");
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    /// `GET path` (HTTP/1.0) to `addr` from inside `site`: (status code, body); (0, "") when
    /// nothing answered. In-process, from a thread that joins the site's namespace — much
    /// cheaper than a curl process, so polls measure the mesh rather than process starts.
    pub fn http(&self, site: &str, addr: SocketAddr, path: &str, host: &str) -> (u16, String) {
        let request = format!("GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n");
        let (code, _, body) = self.exchange(site, addr, request, None, Duration::from_secs(3));
        (code, body)
    }

    /// `GET path` on the admin API at `addr` (over TLS, with the token) from inside `site`.
    pub fn admin_get(&self, site: &str, addr: SocketAddr, path: &str) -> (u16, String) {
        // The token: the primary's admin API wants it; the others ignore it.
        let request =
            format!("GET {path} HTTP/1.0\r\nHost: admin\r\nAuthorization: Bearer {TOKEN}\r\n\r\n");
        let tls = self.admin_tls.clone();
        let (code, _, body) = self.exchange(site, addr, request, tls, Duration::from_secs(3));
        (code, body)
    }

    /// One API call from inside `site` with the admin token: (status, ETag, body).
    pub fn call(
        &self,
        site: &str,
        addr: SocketAddr,
        method: &str,
        path: &str,
        body: &str,
    ) -> (u16, String, String) {
        let request = format!(
            "{method} {path} HTTP/1.0\r\nHost: admin\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let tls = self.admin_tls.clone();
        self.exchange(site, addr, request, tls, Duration::from_secs(30))
    }

    /// Sends `request` to `addr` from inside `site` (over TLS with `tls`) and reads the
    /// answer to its end: (status, ETag, body); (0, "", "") when nothing answered.
    fn exchange(
        &self,
        site: &str,
        addr: SocketAddr,
        request: String,
        tls: Option<Arc<rustls::ClientConfig>>,
        wait: Duration,
    ) -> (u16, String, String) {
        in_netns(self.netns(site), move || {
            let text = match send(addr, &request, tls, wait) {
                Ok(text) => text,
                Err(_) => return (0, String::new(), String::new()),
            };
            let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
            let code = head
                .split_whitespace()
                .nth(1)
                .and_then(|c| c.parse().ok())
                .unwrap_or(0);
            let etag = head
                .lines()
                .find_map(|l| {
                    l.strip_prefix("etag: ")
                        .or_else(|| l.strip_prefix("ETag: "))
                })
                .unwrap_or("")
                .trim_matches('"')
                .to_string();
            (code, etag, body.to_string())
        })
    }

    /// JSON from an admin API.
    pub fn json(&self, site: &str, addr: SocketAddr, path: &str) -> Option<serde_json::Value> {
        let (code, body) = self.admin_get(site, addr, path);
        (code == 200)
            .then(|| serde_json::from_str(&body).ok())
            .flatten()
    }
}

/// Runs `f` on a thread inside namespace `netns` (sockets it makes stay there).
/// The config primary's admin token (`World::call` sends it).
pub const TOKEN: &str = "the chaos suite admin token";

/// Writes `request` to `addr`, over TLS when `tls` is given (the server's name is its IP), and
/// reads until the server closes.
fn send(
    addr: SocketAddr,
    request: &str,
    tls: Option<Arc<rustls::ClientConfig>>,
    wait: Duration,
) -> std::io::Result<String> {
    use std::io::{Read, Write};
    let tcp = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    tcp.set_read_timeout(Some(wait))?;
    let mut bytes = Vec::new();
    match tls {
        None => {
            let mut s = tcp;
            s.write_all(request.as_bytes())?;
            s.read_to_end(&mut bytes)?;
        }
        Some(config) => {
            let name = rustls::pki_types::ServerName::IpAddress(addr.ip().into());
            let conn =
                rustls::ClientConnection::new(config, name).map_err(std::io::Error::other)?;
            let mut s = rustls::StreamOwned::new(conn, tcp);
            s.write_all(request.as_bytes())?;
            // A server that closes without close_notify has still sent its whole answer
            // (HTTP/1.0: the close ends it).
            match s.read_to_end(&mut bytes) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !bytes.is_empty() => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

pub fn in_netns<T: Send + 'static>(netns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/run/netns/{netns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).expect("namespace file");
        nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
        f()
    })
    .join()
    .expect("namespace thread")
}

/// Deletes namespaces left by runs that died without cleaning up (their pid is gone).
pub fn remove_stale() {
    let out = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(pid) = name
            .strip_prefix("mlbc")
            .and_then(|r| r.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = Command::new("ip").args(["netns", "del", name]).output();
        }
    }
}

impl Drop for World {
    fn drop(&mut self) {
        for n in &mut self.nodes {
            n.kill();
        }
        for s in self.sites.values() {
            let _ = Command::new("ip").args(["netns", "del", &s.netns]).output();
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &self.hub])
            .output();
    }
}
