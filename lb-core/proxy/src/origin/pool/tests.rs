//! The origin pool against real origins on loopback: plain HTTP (reuse, counting, a closed
//! idle connection), TLS with any certificate, with verified certificates (525/526 cases),
//! and connect failures.

use std::sync::atomic::AtomicUsize;

use std::sync::atomic::{AtomicU32, Ordering};

use http::{HeaderMap, Method};
use http_body_util::BodyExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;
use crate::origin::head::OriginHead;

/// Sends `GET /` with `Host: origin.test`; bodies above `buffer_up_to` bytes stream.
async fn get(
    up: &Arc<Upstream>,
    o: Origin<'_>,
    buffer_up_to: u64,
) -> Result<(OriginHead, Reply), UpstreamError> {
    let mut headers = HeaderMap::new();
    headers.insert(http::header::HOST, "origin.test".parse().expect("host"));
    let head = RequestHead {
        method: &Method::GET,
        target: "/",
        headers: &headers,
        forwarded: None,
        host: None,
        trailers: false,
    };
    up.send(o, &head, ProxyBody::Empty, buffer_up_to).await
}

/// An origin answering "ok" with keep-alive (or closing after each answer), counting the
/// connections it accepts; with TLS when a server config is given.
async fn origin(
    close_after_answer: bool,
    tls: Option<Arc<rustls::ServerConfig>>,
) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            let tls = tls.clone();
            tokio::spawn(async move {
                match tls {
                    Some(config) => {
                        if let Ok(s) = tokio_rustls::TlsAcceptor::from(config).accept(tcp).await {
                            answer(s, close_after_answer).await;
                        }
                    }
                    None => answer(tcp, close_after_answer).await,
                }
            });
        }
    });
    (addr, accepted)
}

async fn answer<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(mut s: S, close: bool) {
    let mut buf = vec![0u8; 4096];
    let mut have = Vec::new();
    loop {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => have.extend_from_slice(&buf[..n]),
        }
        while let Some(end) = have.windows(4).position(|w| w == b"\r\n\r\n") {
            have.drain(..end + 4);
            if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                .await
                .is_err()
            {
                return;
            }
            if close {
                // Ends the connection without saying so, as an origin's idle timeout does.
                return;
            }
        }
    }
}

fn pool() -> Arc<Upstream> {
    Upstream::new(
        Duration::from_secs(2),
        Duration::from_secs(90),
        Duration::from_secs(10),
        None,
    )
}

/// A private dialer that reaches every private address at one real origin, counting dials.
struct ToOrigin(SocketAddr, Arc<AtomicUsize>);

impl lb_edge::Dial for ToOrigin {
    fn dial<'a>(
        &'a self,
        _: &'a PrivateNetworks,
        _: NetworkIndex,
        _: SocketAddr,
    ) -> lb_edge::private_dial::PrivateDial<'a> {
        Box::pin(async move {
            self.1.fetch_add(1, Ordering::SeqCst);
            let tcp = TcpStream::connect(self.0)
                .await
                .map_err(|_| PrivateDialError::Unreachable)?;
            Ok(Box::new(tcp) as Box<dyn lb_edge::PrivateStream>)
        })
    }
}

async fn body(reply: Reply) -> Bytes {
    match reply {
        Reply::Whole(b) => b,
        Reply::Streamed(s) => s.collect().await.expect("body").to_bytes(),
        Reply::Upgraded(..) => panic!("an upgrade"),
    }
}

async fn until(what: &str, mut f: impl FnMut() -> bool) {
    for _ in 0..500 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test]
async fn idle_connections_are_reused_and_counted_while_open() {
    let (addr, accepted) = origin(false, None).await;
    let open = Arc::new(AtomicU32::new(0));
    let up = pool();
    let authority = addr.to_string();
    let o = Origin {
        authority: &authority,
        tls: None,
        opened: Some(&open),
        private: None,
    };
    for _ in 0..3 {
        let (_, reply) = get(&up, o, 1024).await.expect("sent");
        assert_eq!(body(reply).await, "ok");
    }
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "one connection for all three"
    );
    assert_eq!(open.load(Ordering::Relaxed), 1);
    // Two at once need two connections (bodies left streaming hold theirs).
    let (_, a) = get(&up, o, 0).await.expect("a");
    let (_, b) = get(&up, o, 0).await.expect("b");
    assert!(matches!((&a, &b), (Reply::Streamed(_), Reply::Streamed(_))));
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
    assert_eq!(open.load(Ordering::Relaxed), 2);
    // A streamed body read to its end gives its connection back; one dropped unread
    // closes it.
    assert_eq!(body(a).await, "ok");
    assert_eq!(up.idle_count(), 1);
    drop(b);
    assert_eq!(open.load(Ordering::Relaxed), 1);
    drop(up);
    until("both connections to close", || {
        open.load(Ordering::Relaxed) == 0
    })
    .await;
}

#[tokio::test]
async fn a_connection_the_origin_closed_is_not_used_again() {
    let (addr, accepted) = origin(true, None).await;
    let open = Arc::new(AtomicU32::new(0));
    let up = pool();
    let authority = addr.to_string();
    let o = Origin {
        authority: &authority,
        tls: None,
        opened: Some(&open),
        private: None,
    };
    let (_, reply) = get(&up, o, 1024).await.expect("first");
    assert_eq!(body(reply).await, "ok");
    assert_eq!(up.idle_count(), 1);
    // The sweep notices the origin's close and stops counting the connection.
    until("the origin's close to be seen", || {
        open.load(Ordering::Relaxed) == 0 && up.idle_count() == 0
    })
    .await;
    let (_, reply) = get(&up, o, 1024).await.expect("second");
    assert_eq!(body(reply).await, "ok");
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn refused_connections_are_connect_failures() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    let up = pool();
    let authority = addr.to_string();
    let o = Origin {
        authority: &authority,
        tls: None,
        opened: None,
        private: None,
    };
    let e = get(&up, o, 1024).await.err();
    assert_eq!(e, Some(UpstreamError::Connect(ConnectFailure::Refused)));
}

#[tokio::test]
async fn a_private_origin_is_never_dialed_and_fails_as_no_tunnel() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let authority = listener.local_addr().expect("addr").to_string();
    let up = pool();
    let networks = PrivateNetworks::default();
    let o = Origin {
        authority: &authority,
        tls: None,
        opened: None,
        private: Some((NetworkIndex(0), &networks)),
    };
    let e = get(&up, o, 1024).await.err();
    assert_eq!(e, Some(UpstreamError::Connect(ConnectFailure::NoTunnel)));
    let accepted = tokio::time::timeout(Duration::from_millis(200), listener.accept()).await;
    assert!(accepted.is_err(), "the private address was dialed");
}

#[tokio::test]
async fn a_private_origin_is_reached_through_the_dialer_and_its_connections_kept_apart() {
    let (at, accepted) = origin(false, None).await;
    let dials = Arc::new(AtomicUsize::new(0));
    let up = Upstream::new(
        Duration::from_secs(2),
        Duration::from_secs(90),
        Duration::from_secs(10),
        Some(lb_edge::PrivateDialer(Arc::new(ToOrigin(
            at,
            Arc::clone(&dials),
        )))),
    );
    let networks = PrivateNetworks::default();
    // A private address no packet on this machine could reach: only the dialer can.
    let private = Origin {
        authority: "10.255.0.7:80",
        tls: None,
        opened: None,
        private: Some((NetworkIndex(0), &networks)),
    };
    for _ in 0..3 {
        let (head, reply) = get(&up, private, 1024).await.expect("through the dialer");
        assert_eq!(head.status, 200);
        assert_eq!(body(reply).await, "ok");
    }
    assert_eq!(dials.load(Ordering::SeqCst), 1, "kept alive and reused");
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
    // The same address in another network is another origin: never handed the first's
    // connection.
    let other = Origin {
        private: Some((NetworkIndex(1), &networks)),
        ..private
    };
    get(&up, other, 1024).await.expect("through the dialer");
    assert_eq!(dials.load(Ordering::SeqCst), 2);
}

/// An origin whose first `drop_first` connections read a request and close without an
/// answer (as a tunnel connector killed mid-request leaves its streams), answering on the
/// rest; counting the connections it accepts.
async fn origin_dropping_first(drop_first: usize) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            if count.fetch_add(1, Ordering::SeqCst) < drop_first {
                let mut buf = [0u8; 4096];
                let _ = tcp.read(&mut buf).await;
                continue;
            }
            tokio::spawn(answer(tcp, false));
        }
    });
    (addr, accepted)
}

/// A pool reaching every private address at `at` through [`ToOrigin`].
fn pool_to(at: SocketAddr) -> Arc<Upstream> {
    Upstream::new(
        Duration::from_secs(2),
        Duration::from_secs(90),
        Duration::from_secs(10),
        Some(lb_edge::PrivateDialer(Arc::new(ToOrigin(
            at,
            Arc::new(AtomicUsize::new(0)),
        )))),
    )
}

#[tokio::test]
async fn a_private_origins_new_stream_closed_without_answer_is_resent_once() {
    let (at, accepted) = origin_dropping_first(1).await;
    let up = pool_to(at);
    let networks = PrivateNetworks::default();
    let o = Origin {
        authority: "10.255.0.7:80",
        tls: None,
        opened: None,
        private: Some((NetworkIndex(0), &networks)),
    };
    let (head, reply) = get(&up, o, 1024).await.expect("sent again");
    assert_eq!(head.status, 200);
    assert_eq!(body(reply).await, "ok");
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_private_origins_request_is_resent_at_most_once_on_a_new_stream() {
    let (at, accepted) = origin_dropping_first(2).await;
    let up = pool_to(at);
    let networks = PrivateNetworks::default();
    let o = Origin {
        authority: "10.255.0.7:80",
        tls: None,
        opened: None,
        private: Some((NetworkIndex(0), &networks)),
    };
    assert_eq!(get(&up, o, 1024).await.err(), Some(UpstreamError::Exchange));
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_public_origins_new_connection_closed_without_answer_is_not_resent() {
    let (addr, accepted) = origin_dropping_first(1).await;
    let up = pool();
    let authority = addr.to_string();
    let o = Origin {
        authority: &authority,
        tls: None,
        opened: None,
        private: None,
    };
    assert_eq!(get(&up, o, 1024).await.err(), Some(UpstreamError::Exchange));
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
}

struct Pki {
    ca_pem: String,
    server: Arc<rustls::ServerConfig>,
}

/// A CA and a certificate it signed for `origin.test`.
fn pki() -> Pki {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let mut ca_params = CertificateParams::new(Vec::new()).expect("ca params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca =
        CertifiedIssuer::self_signed(ca_params, KeyPair::generate().expect("ca key")).expect("ca");
    let leaf_key = KeyPair::generate().expect("leaf key");
    let leaf = CertificateParams::new(vec!["origin.test".to_string()])
        .expect("leaf params")
        .signed_by(&leaf_key, &ca)
        .expect("leaf");
    let key = rustls::pki_types::PrivateKeyDer::try_from(leaf_key.serialize_der()).expect("key");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(vec![leaf.der().clone()], key)
        .expect("server config");
    Pki {
        ca_pem: ca.pem(),
        server: Arc::new(server),
    }
}

#[tokio::test]
async fn tls_origins_full_strict_and_their_failures() {
    let pki = pki();
    let (addr, _) = origin(false, Some(Arc::clone(&pki.server))).await;
    let up = pool();
    let authority = addr.to_string();
    let dir = tempfile::Builder::new()
        .prefix("meshlb-upstream-")
        .tempdir()
        .expect("dir");
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, &pki.ca_pem).expect("ca file");

    // full: any certificate, the handshake still happens.
    let any = lb_tls::client_config(true, None).expect("full");
    let o = Origin {
        authority: &authority,
        tls: Some((&any, "origin.test")),
        opened: None,
        private: None,
    };
    let (_, reply) = get(&up, o, 1024).await.expect("full");
    assert_eq!(body(reply).await, "ok");

    // strict with the CA: valid for origin.test, not for another name.
    let verified = lb_tls::client_config(false, Some(&ca_file)).expect("strict");
    let o = Origin {
        authority: &authority,
        tls: Some((&verified, "origin.test")),
        opened: None,
        private: None,
    };
    let (_, reply) = get(&up, o, 1024).await.expect("strict");
    assert_eq!(body(reply).await, "ok");
    let o = Origin {
        authority: &authority,
        tls: Some((&verified, "elsewhere.test")),
        opened: None,
        private: None,
    };
    assert_eq!(
        get(&up, o, 1024).await.err(),
        Some(UpstreamError::TlsCertificate)
    );

    // strict with only the public roots: an unknown issuer is a 526 too.
    let public = lb_tls::client_config(false, None).expect("public");
    let o = Origin {
        authority: &authority,
        tls: Some((&public, "origin.test")),
        opened: None,
        private: None,
    };
    assert_eq!(
        get(&up, o, 1024).await.err(),
        Some(UpstreamError::TlsCertificate)
    );

    // TLS to an origin that speaks plain HTTP: the handshake fails (525).
    let (plain, _) = origin(false, None).await;
    let plain = plain.to_string();
    let o = Origin {
        authority: &plain,
        tls: Some((&any, "origin.test")),
        opened: None,
        private: None,
    };
    assert_eq!(
        get(&up, o, 1024).await.err(),
        Some(UpstreamError::TlsHandshake)
    );
}

/// However many server names requests bring, an origin address keeps a bounded number of
/// pooled TLS variants; the plain variant and the first ones keep their places.
#[test]
fn tls_variants_per_origin_are_bounded() {
    let any = lb_tls::client_config(true, None).expect("tls");
    let mut pools = Pools::default();
    let names: Vec<String> = (0..20).map(|i| format!("name-{i}.test")).collect();
    let placed: Vec<Option<Place>> = names
        .iter()
        .map(|n| {
            pools.place(&Origin {
                authority: "192.0.2.1:443",
                tls: Some((&any, n)),
                opened: None,
                private: None,
            })
        })
        .collect();
    assert_eq!(
        placed.iter().filter(|p| p.is_some()).count(),
        MAX_TLS_VARIANTS_PER_ORIGIN
    );
    assert!(placed[MAX_TLS_VARIANTS_PER_ORIGIN..]
        .iter()
        .all(Option::is_none));
    // A variant already placed is found again; another address has its own room.
    let again = pools.place(&Origin {
        authority: "192.0.2.1:443",
        tls: Some((&any, &names[0])),
        opened: None,
        private: None,
    });
    assert_eq!(again, placed[0]);
    assert!(pools
        .place(&Origin {
            authority: "192.0.2.2:443",
            tls: Some((&any, &names[19])),
            opened: None,
            private: None,
        })
        .is_some());
}
