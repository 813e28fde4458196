//! The first bytes on a tunnel connection, before HTTP/2: the connector says which tunnel it
//! is, which connection of it, and which routes it serves, and proves it holds the tunnel's
//! secret; the PoP accepts it or says why not.
//!
//! The proof is HMAC-SHA256 under the tunnel secret of everything the hello says and of a
//! value exported from this TLS session (RFC 5705, RFC 8446 section 7.5): a hello recorded on
//! one connection proves nothing on another, and a PoP that relayed it could not reuse it. The
//! PoP compares it in constant time (`hmac`'s `verify_slice`). Every field is bounded, so a
//! hello is at most [`MAX_HELLO_BYTES`].

use std::net::IpAddr;

use hmac::{Hmac, Mac};
use ipnet::IpNet;
use sha2::Sha256;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::token::{TunnelId, TunnelSecret};

/// The first bytes of a connector's hello.
pub const MAGIC: &[u8; 4] = b"MLT1";
/// The label of the exported keying material the proof covers.
pub const EXPORTER_LABEL: &[u8] = b"EXPORTER-meshlb-tunnel-hello";
/// The longest version string a hello carries.
pub const MAX_VERSION_BYTES: usize = 64;
/// The most routes one connector may serve.
pub const MAX_ROUTES: usize = 64;
/// The longest reason a refusal carries.
pub const MAX_REASON_BYTES: usize = 200;
/// The largest hello: magic, id, index, client, version, routes (family, address, prefix),
/// proof.
pub const MAX_HELLO_BYTES: usize =
    4 + 16 + 1 + 16 + 1 + MAX_VERSION_BYTES + 1 + MAX_ROUTES * 18 + 32;

type HmacSha256 = Hmac<Sha256>;

/// What a connector says of itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    pub tunnel: TunnelId,
    /// Which of this replica's connections (0, 1, …): a PoP holds one per index and replica.
    pub conn_index: u8,
    /// This connector process (a replica), random at its start.
    pub client: [u8; 16],
    pub version: String,
    /// The private subnets this connector serves; the PoP refuses any its tunnel is not
    /// granted.
    pub routes: Vec<IpNet>,
}

/// Why a hello could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HelloError {
    #[error("not a meshlb tunnel hello")]
    Magic,
    #[error("the version string is not UTF-8 or longer than {MAX_VERSION_BYTES} bytes")]
    Version,
    #[error("more than {MAX_ROUTES} routes")]
    TooManyRoutes,
    #[error("a route is not an IPv4 or IPv6 prefix")]
    Route,
    #[error("the refusal's reason is not UTF-8")]
    Reason,
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// The PoP's answer to a hello.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Accepted,
    Refused(String),
}

impl Hello {
    fn body(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(128);
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&self.tunnel.0);
        b.push(self.conn_index);
        b.extend_from_slice(&self.client);
        let version = self.version.as_bytes();
        let version = &version[..version.len().min(MAX_VERSION_BYTES)];
        b.push(version.len() as u8);
        b.extend_from_slice(version);
        let routes = &self.routes[..self.routes.len().min(MAX_ROUTES)];
        b.push(routes.len() as u8);
        for route in routes {
            match route.addr() {
                IpAddr::V4(a) => {
                    b.push(4);
                    b.extend_from_slice(&a.octets());
                }
                IpAddr::V6(a) => {
                    b.push(6);
                    b.extend_from_slice(&a.octets());
                }
            }
            b.push(route.prefix_len());
        }
        b
    }

    /// The proof of this hello on the session whose exported value is `exporter`.
    pub fn proof(&self, secret: &TunnelSecret, exporter: &[u8]) -> [u8; 32] {
        let mut mac = keyed(secret);
        mac.update(exporter);
        mac.update(&self.body());
        mac.finalize().into_bytes().into()
    }

    /// Whether `proof` is this hello's under `secret`, compared in constant time.
    pub fn verify(&self, proof: &[u8; 32], secret: &TunnelSecret, exporter: &[u8]) -> bool {
        let mut mac = keyed(secret);
        mac.update(exporter);
        mac.update(&self.body());
        mac.verify_slice(proof).is_ok()
    }

    pub async fn write<W: AsyncWrite + Unpin>(
        &self,
        w: &mut W,
        secret: &TunnelSecret,
        exporter: &[u8],
    ) -> std::io::Result<()> {
        let mut bytes = self.body();
        bytes.extend_from_slice(&self.proof(secret, exporter));
        w.write_all(&bytes).await?;
        w.flush().await
    }

    /// Reads a hello and the proof after it.
    pub async fn read<R: AsyncRead + Unpin>(r: &mut R) -> Result<(Hello, [u8; 32]), HelloError> {
        let mut magic = [0u8; 4];
        r.read_exact(&mut magic).await?;
        if &magic != MAGIC {
            return Err(HelloError::Magic);
        }
        Hello::read_after_magic(r).await
    }

    /// Reads a hello whose [`MAGIC`] was read already, and the proof after it.
    pub async fn read_after_magic<R: AsyncRead + Unpin>(
        r: &mut R,
    ) -> Result<(Hello, [u8; 32]), HelloError> {
        let mut tunnel = [0u8; 16];
        r.read_exact(&mut tunnel).await?;
        let conn_index = r.read_u8().await?;
        let mut client = [0u8; 16];
        r.read_exact(&mut client).await?;
        let len = usize::from(r.read_u8().await?);
        if len > MAX_VERSION_BYTES {
            return Err(HelloError::Version);
        }
        let mut version = vec![0u8; len];
        r.read_exact(&mut version).await?;
        let version = String::from_utf8(version).map_err(|_| HelloError::Version)?;
        let count = usize::from(r.read_u8().await?);
        if count > MAX_ROUTES {
            return Err(HelloError::TooManyRoutes);
        }
        let mut routes = Vec::with_capacity(count);
        for _ in 0..count {
            let addr: IpAddr = match r.read_u8().await? {
                4 => {
                    let mut a = [0u8; 4];
                    r.read_exact(&mut a).await?;
                    a.into()
                }
                6 => {
                    let mut a = [0u8; 16];
                    r.read_exact(&mut a).await?;
                    a.into()
                }
                _ => return Err(HelloError::Route),
            };
            let prefix = r.read_u8().await?;
            routes.push(IpNet::new(addr, prefix).map_err(|_| HelloError::Route)?);
        }
        let mut proof = [0u8; 32];
        r.read_exact(&mut proof).await?;
        let hello = Hello {
            tunnel: TunnelId(tunnel),
            conn_index,
            client,
            version,
            routes,
        };
        Ok((hello, proof))
    }
}

fn keyed(secret: &TunnelSecret) -> HmacSha256 {
    let mut mac = <HmacSha256 as Mac>::new_from_slice(&secret.0)
        .unwrap_or_else(|_| unreachable!("HMAC takes a key of any length"));
    mac.update(b"meshlb tunnel hello v1");
    mac
}

impl Answer {
    pub async fn write<W: AsyncWrite + Unpin>(&self, w: &mut W) -> std::io::Result<()> {
        match self {
            Answer::Accepted => w.write_all(&[0]).await?,
            Answer::Refused(reason) => {
                let reason = reason.as_bytes();
                let mut end = reason.len().min(MAX_REASON_BYTES);
                while std::str::from_utf8(&reason[..end]).is_err() {
                    end -= 1;
                }
                w.write_all(&[1, end as u8]).await?;
                w.write_all(&reason[..end]).await?;
            }
        }
        w.flush().await
    }

    pub async fn read<R: AsyncRead + Unpin>(r: &mut R) -> Result<Answer, HelloError> {
        if r.read_u8().await? == 0 {
            return Ok(Answer::Accepted);
        }
        let len = usize::from(r.read_u8().await?).min(MAX_REASON_BYTES);
        let mut reason = vec![0u8; len];
        r.read_exact(&mut reason).await?;
        String::from_utf8(reason)
            .map(Answer::Refused)
            .map_err(|_| HelloError::Reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello() -> Hello {
        Hello {
            tunnel: TunnelId([1; 16]),
            conn_index: 1,
            client: [2; 16],
            version: "meshlb 0.1.0".into(),
            routes: vec!["10.0.0.0/24".parse().unwrap(), "fd00::/64".parse().unwrap()],
        }
    }

    #[tokio::test]
    async fn a_hello_reads_back_and_its_proof_verifies_only_on_its_session_and_secret() {
        let secret = TunnelSecret([9; 32]);
        let mut wire = Vec::new();
        hello()
            .write(&mut wire, &secret, b"session-one")
            .await
            .unwrap();
        assert!(wire.len() <= MAX_HELLO_BYTES);
        let (read, proof) = Hello::read(&mut wire.as_slice()).await.unwrap();
        assert_eq!(read, hello());
        assert!(read.verify(&proof, &secret, b"session-one"));
        assert!(!read.verify(&proof, &secret, b"session-two"), "replayed");
        assert!(!read.verify(&proof, &TunnelSecret([8; 32]), b"session-one"));
        let mut claimed = read.clone();
        claimed.routes.push("192.168.0.0/16".parse().unwrap());
        assert!(!claimed.verify(&proof, &secret, b"session-one"), "altered");
    }

    #[tokio::test]
    async fn a_hello_claiming_more_routes_than_the_cap_is_refused() {
        let mut wire = hello().body();
        let routes_at = 4 + 16 + 1 + 16 + 1 + "meshlb 0.1.0".len();
        wire[routes_at] = (MAX_ROUTES + 1) as u8;
        assert!(matches!(
            Hello::read(&mut wire.as_slice()).await,
            Err(HelloError::TooManyRoutes)
        ));
        assert!(matches!(
            Hello::read(&mut &b"GET / HTTP/1.1\r\n"[..]).await,
            Err(HelloError::Magic)
        ));
    }

    #[tokio::test]
    async fn a_refusal_carries_its_reason_cut_at_the_cap() {
        let mut wire = Vec::new();
        Answer::Refused("é".repeat(150))
            .write(&mut wire)
            .await
            .unwrap();
        let Answer::Refused(reason) = Answer::read(&mut wire.as_slice()).await.unwrap() else {
            panic!("accepted");
        };
        assert!(reason.len() <= MAX_REASON_BYTES && reason.starts_with('é'));
    }
}
