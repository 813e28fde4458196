//! A real etcd cluster on loopback (Debian's `etcd-server`): three members, each with its own
//! data directory, started, killed and restarted by the tests; which member leads is read
//! from etcd's own status answer (`/v3/maintenance/status`, through curl). A cluster may
//! speak TLS only, asking every client for a certificate of the test CA, and have etcd's users
//! on (`EtcdCluster::start_secured`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use crate::pki::{Issued, TestCa};
use crate::ports::free_tcp;
use crate::processes::spawn_logged;
use crate::waits::wait_for;

/// One member: its name, its client and peer addresses, its process while it runs.
pub struct Member {
    pub name: String,
    pub client: SocketAddr,
    pub peer: SocketAddr,
    data: PathBuf,
    child: Option<Child>,
}

pub struct EtcdCluster {
    pub members: Vec<Member>,
    initial: String,
    tls: Option<EtcdTls>,
}

/// A cluster's TLS: the CA that signs every certificate, each member's certificate (for the
/// members' own clients too: etcd's gateway calls its gRPC service with it), a client
/// certificate for the tests' curl, and etcd's `--auth-token-ttl`.
pub struct EtcdTls {
    pub ca: PathBuf,
    member: Issued,
    client: Issued,
    token_ttl_s: u32,
}

/// The base64 of `text`, as etcd's JSON gateway takes keys and values.
fn b64(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for m in &mut self.members {
            if let Some(mut c) = m.child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

impl EtcdCluster {
    /// `n` members with their data under `dir`; returns once every member answers.
    pub fn start(dir: &Path, n: usize) -> EtcdCluster {
        EtcdCluster::start_with(dir, n, None)
    }

    /// One member that speaks TLS alone (its certificate from `ca`, whose file is `ca_file`),
    /// asks every client for a certificate `ca` signed (`--client-cert-auth`), and expires an
    /// unused auth token after `token_ttl_s` seconds. Its users are off until `enable_auth`.
    pub fn start_secured(dir: &Path, ca: &TestCa, ca_file: &Path, token_ttl_s: u32) -> EtcdCluster {
        let tls = EtcdTls {
            ca: ca_file.to_path_buf(),
            member: ca.server_and_client(&["127.0.0.1"], dir, "etcd-member"),
            client: ca.client_without_common_name(dir, "etcd-test-client"),
            token_ttl_s,
        };
        EtcdCluster::start_with(dir, 1, Some(tls))
    }

    fn start_with(dir: &Path, n: usize, tls: Option<EtcdTls>) -> EtcdCluster {
        let members: Vec<Member> = (0..n)
            .map(|i| Member {
                name: format!("e{i}"),
                client: free_tcp(),
                peer: free_tcp(),
                data: dir.join(format!("etcd-e{i}")),
                child: None,
            })
            .collect();
        let initial = members
            .iter()
            .map(|m| format!("{}=http://{}", m.name, m.peer))
            .collect::<Vec<_>>()
            .join(",");
        let mut cluster = EtcdCluster {
            members,
            initial,
            tls,
        };
        for i in 0..n {
            cluster.run(i);
        }
        for i in 0..n {
            cluster.wait_answers(i);
        }
        cluster
    }

    /// `http` or, for a secured cluster, `https`.
    fn scheme(&self) -> &'static str {
        if self.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }

    fn run(&mut self, i: usize) {
        let m = &self.members[i];
        let client_url = format!("{}://{}", self.scheme(), m.client);
        let mut command = Command::new("etcd");
        if let Some(tls) = &self.tls {
            command
                .arg("--cert-file")
                .arg(&tls.member.cert)
                .arg("--key-file")
                .arg(&tls.member.key)
                .arg("--trusted-ca-file")
                .arg(&tls.ca)
                .arg("--client-cert-auth")
                .args(["--auth-token-ttl", &tls.token_ttl_s.to_string()]);
        }
        let child = spawn_logged(
            command
                .args([
                    "--name",
                    &m.name,
                    "--data-dir",
                    &m.data.display().to_string(),
                ])
                .args(["--listen-client-urls", &client_url])
                .args(["--advertise-client-urls", &client_url])
                .args(["--listen-peer-urls", &format!("http://{}", m.peer)])
                .args([
                    "--initial-advertise-peer-urls",
                    &format!("http://{}", m.peer),
                ])
                .args(["--initial-cluster", &self.initial])
                .args(["--initial-cluster-state", "new"])
                .args(["--initial-cluster-token", "meshlb-tests"])
                // Elections in a fraction of a second, as a fast LAN would have them.
                .args(["--heartbeat-interval", "50", "--election-timeout", "500"]),
            &format!("etcd-{}", m.name),
        );
        self.members[i].child = Some(child);
    }

    fn wait_answers(&self, i: usize) {
        let m = &self.members[i];
        wait_for(
            &format!("etcd member {}", m.name),
            Duration::from_secs(30),
            || {
                self.status(i)
                    .is_some_and(|s| s["leader"].as_str().is_some_and(|l| l != "0"))
            },
        );
    }

    /// Member `i`'s status answer, if it answers.
    fn status(&self, i: usize) -> Option<serde_json::Value> {
        self.call(i, "/v3/maintenance/status", &serde_json::json!({}), None)
    }

    /// POSTs `body` to member `i`'s gateway at `path` through curl (with the test client's
    /// certificate on a secured cluster, and `token` when given); its JSON answer.
    fn call(
        &self,
        i: usize,
        path: &str,
        body: &serde_json::Value,
        token: Option<&str>,
    ) -> Option<serde_json::Value> {
        let mut curl = Command::new("curl");
        curl.args(["-s", "--max-time", "2", "-X", "POST"])
            .arg("-d")
            .arg(body.to_string());
        if let Some(tls) = &self.tls {
            curl.arg("--cacert")
                .arg(&tls.ca)
                .arg("--cert")
                .arg(&tls.client.cert)
                .arg("--key")
                .arg(&tls.client.key);
        }
        if let Some(token) = token {
            curl.args(["-H", &format!("Authorization: {token}")]);
        }
        let url = format!("{}://{}{path}", self.scheme(), self.members[i].client);
        let out = curl.arg(url).output().ok()?;
        serde_json::from_slice(&out.stdout).ok()
    }

    /// Turns etcd's users on: `root`, and `user` with `password` allowed to read and write the
    /// keys under `prefix` alone (etcd's `/v3/auth/...` calls, as `etcdctl user add`,
    /// `role grant-permission --prefix` and `auth enable` make them).
    pub fn enable_auth(&self, prefix: &str, user: &str, password: &str) {
        use serde_json::json;
        let mut end = prefix.as_bytes().to_vec();
        if let Some(last) = end.last_mut() {
            *last += 1;
        }
        let end = String::from_utf8(end).expect("an ASCII prefix");
        let steps = [
            (
                "/v3/auth/user/add",
                json!({ "name": "root", "password": "root-password" }),
            ),
            ("/v3/auth/role/add", json!({ "name": "root" })),
            (
                "/v3/auth/user/grant",
                json!({ "user": "root", "role": "root" }),
            ),
            (
                "/v3/auth/user/add",
                json!({ "name": user, "password": password }),
            ),
            ("/v3/auth/role/add", json!({ "name": user })),
            (
                "/v3/auth/role/grant",
                json!({ "name": user, "perm": { "permType": "READWRITE", "key": b64(prefix), "range_end": b64(&end) } }),
            ),
            ("/v3/auth/user/grant", json!({ "user": user, "role": user })),
            ("/v3/auth/enable", json!({})),
        ];
        for (path, body) in steps {
            let answer = self.call(0, path, &body, None);
            assert!(
                answer.as_ref().is_some_and(|a| a.get("error").is_none()),
                "etcd {path}: {answer:?}"
            );
        }
    }

    /// The value at `key` and its revision, read as `user` (member 0).
    pub fn read_as(&self, user: &str, password: &str, key: &str) -> Option<(String, u64)> {
        use base64::Engine;
        let auth = serde_json::json!({ "name": user, "password": password });
        let answer = self.call(0, "/v3/auth/authenticate", &auth, None)?;
        let token = answer["token"].as_str()?;
        let range = self.call(
            0,
            "/v3/kv/range",
            &serde_json::json!({ "key": b64(key) }),
            Some(token),
        )?;
        let kv = &range["kvs"][0];
        let value = base64::engine::general_purpose::STANDARD
            .decode(kv["value"].as_str()?)
            .ok()?;
        let revision = kv["mod_revision"].as_str()?.parse().ok()?;
        Some((String::from_utf8(value).ok()?, revision))
    }

    /// The member that leads now (asked of the running members).
    pub fn leader(&self) -> Option<usize> {
        for i in 0..self.members.len() {
            if self.members[i].child.is_none() {
                continue;
            }
            if let Some(s) = self.status(i) {
                let me = s["header"]["member_id"].as_str()?;
                if s["leader"].as_str() == Some(me) {
                    return Some(i);
                }
            }
        }
        None
    }

    /// Kills member `i` (SIGKILL, as a crash).
    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.members[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts `members` again on their data directories; returns once each answers with a
    /// leader (a member alone has none: restart enough of them at once for a quorum).
    pub fn restart(&mut self, members: &[usize]) {
        for &i in members {
            if self.members[i].child.is_none() {
                self.run(i);
            }
        }
        for &i in members {
            self.wait_answers(i);
        }
    }

    /// `etcd://` (`etcds://` for a secured cluster) with every member, and `prefix`.
    pub fn url(&self, prefix: &str) -> String {
        let hosts: Vec<String> = self.members.iter().map(|m| m.client.to_string()).collect();
        let scheme = if self.tls.is_some() { "etcds" } else { "etcd" };
        format!("{scheme}://{}/{prefix}", hosts.join(","))
    }
}
