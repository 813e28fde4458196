//! The aggregator's config task: the one owner of the node's config. It takes reloads (SIGHUP,
//! the watched file, `POST /-/reload`, the library's caller), the API's writes on the primary
//! and the follower's generations, one at a time, through the config protocol
//! (`meshlb_node::control::protocol`); and it stops the node when asked or when a vital task
//! ends.

use meshlb_node::control::follower::Fetched;
use meshlb_node::control::writes::WriteRequest;
use meshlb_node::control::ConfigProtocol;
use meshlb_node::reload::{self, Request, Triggers};
use meshlb_node::supervise::{Vital, VitalEnded};
use tokio::sync::{mpsc, oneshot};

use super::frontends::Frontends;

pub(super) struct ConfigTask {
    pub protocol: ConfigProtocol,
    pub frontends: Frontends,
    pub dns_server: Option<lb_dns::DnsServer>,
    pub proxies: Vec<lb_proxy::ProxyListener>,
    pub mesh: mesh::MeshNode,
    pub vital: Vital,
    pub requested: mpsc::Receiver<Request>,
    /// The API's writes (on the primary).
    pub writes: Option<mpsc::Receiver<WriteRequest>>,
    pub fetched: mpsc::Receiver<Fetched>,
    pub triggers: Triggers,
}

impl ConfigTask {
    /// Serves until `stop` fires (or its sender is dropped) or a vital task ends.
    pub async fn run(mut self, stop: oneshot::Receiver<()>) -> Result<(), VitalEnded> {
        self.watch_threads();
        reload::started();
        tokio::pin!(stop);
        let ended = loop {
            let writes = async {
                match self.writes.as_mut() {
                    Some(w) => w.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = &mut stop => break None,
                ended = self.vital.ended() => break Some(ended),
                trigger = self.triggers.next() => {
                    let _ = self.protocol.file_reload(&mut self.frontends, trigger.name()).await;
                }
                Some(request) = self.requested.recv() => {
                    let outcome = self.protocol.file_reload(&mut self.frontends, &request.why).await;
                    let _ = request.reply.send(outcome);
                }
                Some(write) = writes => {
                    self.protocol.write(&mut self.frontends, write).await;
                }
                Some(f) = self.fetched.recv() => {
                    self.protocol.follow(&mut self.frontends, f).await;
                }
            }
            self.protocol.publish(&self.mesh.handle).await;
        };
        self.shut_down().await;
        match ended {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }

    /// Watches the frontends' own threads and tasks with the vital ones.
    fn watch_threads(&mut self) {
        if let Some(server) = self.dns_server.as_mut() {
            self.vital.threads("DNS server", server.take_ended());
        }
        for p in &mut self.proxies {
            self.vital.threads("proxy", p.take_ended());
        }
        if let Some(mut ended) = self.frontends.l4_ended() {
            self.vital.future("layer-4 listener", async move {
                ended.recv().await.unwrap_or_else(|| "stopped".to_string())
            });
        }
    }

    async fn shut_down(self) {
        drop(self.proxies);
        if let Some(dns) = self.dns_server {
            dns.shutdown().await;
        }
        self.vital.stop().await; // the admin API and the tally loop
        drop(self.frontends);
        let _ = self.mesh.handle.shutdown().await;
    }
}
