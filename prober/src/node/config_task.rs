//! The prober's config task: the one owner of its probe targets. It takes reloads (SIGHUP, the
//! watched file, `POST /-/reload`, the library's caller) and the follower's generations, one
//! at a time, through the config protocol (`meshlb_node::control::protocol`); and it stops the
//! node when asked, or when a vital task or the scheduler ends.

use meshlb_node::control::follower::Fetched;
use meshlb_node::control::ConfigProtocol;
use meshlb_node::reload::{self, Request, Triggers};
use meshlb_node::supervise::{Vital, VitalEnded};
use tokio::sync::{mpsc, oneshot};

use super::probing::Probing;

pub(super) struct ConfigTask {
    pub protocol: ConfigProtocol,
    pub probing: Probing,
    pub mesh: mesh::MeshNode,
    pub vital: Vital,
    pub requested: mpsc::Receiver<Request>,
    pub fetched: mpsc::Receiver<Fetched>,
    pub triggers: Triggers,
}

impl ConfigTask {
    /// Serves until `stop` fires (or its sender is dropped) or a vital task ends.
    pub async fn run(mut self, stop: oneshot::Receiver<()>) -> Result<(), VitalEnded> {
        reload::started();
        tokio::pin!(stop);
        let ended = loop {
            tokio::select! {
                _ = &mut stop => break None,
                ended = self.vital.ended() => break Some(ended),
                why = self.probing.scheduler.ended() => break Some(VitalEnded { name: "scheduler", why }),
                trigger = self.triggers.next() => {
                    let _ = self.protocol.file_reload(&mut self.probing, trigger.name()).await;
                }
                Some(request) = self.requested.recv() => {
                    let outcome = self.protocol.file_reload(&mut self.probing, &request.why).await;
                    let _ = request.reply.send(outcome);
                }
                Some(f) = self.fetched.recv() => {
                    self.protocol.follow(&mut self.probing, f).await;
                }
            }
            self.protocol.publish(&self.mesh.handle).await;
        };
        self.probing.scheduler.shutdown().await;
        self.vital.stop().await;
        let _ = self.mesh.handle.shutdown().await;
        match ended {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }
}
