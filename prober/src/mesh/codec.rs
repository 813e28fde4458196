//! Encoding chitchat envelopes to bytes and back.
//!
//! chitchat 0.13 keeps its envelope codec crate-private (a custom `Transport` receives
//! `ChitchatEnvelope` values, not bytes), but its own `UdpSocket` is public. So each direction
//! runs one of chitchat's sockets on loopback as a codec: to encode, that socket sends the
//! envelope to a capture socket and we read the bytes; to decode, the capture socket sends the
//! (already authenticated) bytes to it and it hands back the envelope. Each codec lives in its
//! own task, so a caller that is cancelled mid-way (chitchat cancels `recv` when it needs to
//! send) cannot leave a half-finished exchange behind for the next caller. Loopback round trips
//! cost tens of microseconds; gossip sends a few messages per round.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{anyhow, Context};
use chitchat::transport::{Socket, UdpSocket as ChitchatUdp};
use chitchat::ChitchatEnvelope;
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, oneshot};

use super::seal::MAX_DATAGRAM;

/// A decode that does not come back in this long was not a chitchat message after all.
const DECODE_TIMEOUT: Duration = Duration::from_millis(500);

enum Job {
    Encode(ChitchatEnvelope, oneshot::Sender<Vec<u8>>),
    Decode(Vec<u8>, oneshot::Sender<Option<ChitchatEnvelope>>),
}

/// Handle to the codec task.
#[derive(Clone)]
pub struct EnvelopeCodec {
    jobs: mpsc::UnboundedSender<Job>,
}

impl EnvelopeCodec {
    pub async fn start() -> anyhow::Result<Self> {
        let loopback: SocketAddr = "127.0.0.1:0".parse().map_err(|e| anyhow!("{e}"))?;
        let mut chitchat_side = ChitchatUdp::open(loopback).await?;
        let capture = UdpSocket::bind(loopback)
            .await
            .context("codec capture socket")?;
        let chitchat_addr = chitchat_side.local_addr()?;
        let capture_addr = capture.local_addr()?;
        let (jobs, mut rx) = mpsc::unbounded_channel::<Job>();
        tokio::spawn(async move {
            let mut buf = vec![0u8; MAX_DATAGRAM + 1];
            while let Some(job) = rx.recv().await {
                match job {
                    Job::Encode(envelope, reply) => {
                        if chitchat_side.send(capture_addr, envelope).await.is_err() {
                            continue;
                        }
                        // The bytes come back over loopback; skip anything that is not ours.
                        loop {
                            match tokio::time::timeout(DECODE_TIMEOUT, capture.recv_from(&mut buf))
                                .await
                            {
                                Ok(Ok((n, from))) if from == chitchat_addr => {
                                    let _ = reply.send(buf[..n].to_vec());
                                    break;
                                }
                                Ok(Ok(_)) => continue,
                                _ => break,
                            }
                        }
                    }
                    Job::Decode(bytes, reply) => {
                        if capture.send_to(&bytes, chitchat_addr).await.is_err() {
                            let _ = reply.send(None);
                            continue;
                        }
                        let out = tokio::time::timeout(DECODE_TIMEOUT, chitchat_side.recv()).await;
                        let _ = reply.send(out.ok().and_then(Result::ok).map(|r| r.envelope));
                    }
                }
            }
        });
        Ok(EnvelopeCodec { jobs })
    }

    pub async fn encode(&self, envelope: ChitchatEnvelope) -> anyhow::Result<Vec<u8>> {
        let (tx, rx) = oneshot::channel();
        self.jobs
            .send(Job::Encode(envelope, tx))
            .map_err(|_| anyhow!("codec task ended"))?;
        rx.await
            .map_err(|_| anyhow!("envelope could not be encoded"))
    }

    /// `None` when the bytes are not a chitchat message.
    pub async fn decode(&self, bytes: Vec<u8>) -> anyhow::Result<Option<ChitchatEnvelope>> {
        let (tx, rx) = oneshot::channel();
        self.jobs
            .send(Job::Decode(bytes, tx))
            .map_err(|_| anyhow!("codec task ended"))?;
        rx.await.map_err(|_| anyhow!("codec task ended"))
    }
}
