//! A real etcd cluster on loopback (Debian's `etcd-server`): three members, each with its own
//! data directory, started, killed and restarted by the tests; which member leads is read
//! from etcd's own status answer (`/v3/maintenance/status`, through curl).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

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
        let mut cluster = EtcdCluster { members, initial };
        for i in 0..n {
            cluster.run(i);
        }
        for i in 0..n {
            cluster.wait_answers(i);
        }
        cluster
    }

    fn run(&mut self, i: usize) {
        let m = &self.members[i];
        let child = spawn_logged(
            Command::new("etcd")
                .args([
                    "--name",
                    &m.name,
                    "--data-dir",
                    &m.data.display().to_string(),
                ])
                .args(["--listen-client-urls", &format!("http://{}", m.client)])
                .args(["--advertise-client-urls", &format!("http://{}", m.client)])
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
        let out = Command::new("curl")
            .args(["-s", "--max-time", "2", "-X", "POST", "-d", "{}"])
            .arg(format!(
                "http://{}/v3/maintenance/status",
                self.members[i].client
            ))
            .output()
            .ok()?;
        serde_json::from_slice(&out.stdout).ok()
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

    /// `etcd://` with every member, and `prefix`.
    pub fn url(&self, prefix: &str) -> String {
        let hosts: Vec<String> = self.members.iter().map(|m| m.client.to_string()).collect();
        format!("etcd://{}/{prefix}", hosts.join(","))
    }
}
