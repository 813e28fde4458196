//! The tunnel on loopback: a PoP's hub with a self-signed certificate, connectors pinning its
//! key, and a TCP echo server as the private endpoint. Every wait is bounded.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use lb_tls::pin::SpkiPin;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tunnel::{Connector, ConnectorSettings, Grant, Hub, HubLimits, OpenError, Refusal};
use tunnel::{Holder, HolderList, RelayKey, TunnelDialer, TunnelId, TunnelSecret};

const TUNNEL: TunnelId = TunnelId([0x5a; 16]);
const CLUSTER_KEY: &[u8] = b"the cluster key of the test mesh";

/// The test tunnel's grant: 127.0.0.0/8 routed, its endpoints on 127.0.0.1 and 127.0.0.2.
fn grant() -> Grant {
    Grant {
        secret: TunnelSecret([1; 32]),
        routes: vec!["127.0.0.0/8".parse().expect("net")],
        targets: ["127.0.0.1", "127.0.0.2"]
            .iter()
            .map(|a| a.parse().expect("ip"))
            .collect(),
    }
}

struct Pop {
    hub: Arc<Hub>,
    addr: SocketAddr,
    pin: SpkiPin,
}

/// A PoP's TLS server config with a self-signed certificate for `pop.test`, and that
/// certificate.
fn self_signed_pop() -> (
    rustls::ServerConfig,
    rustls::pki_types::CertificateDer<'static>,
) {
    let cert = rcgen::generate_simple_self_signed(vec!["pop.test".into()]).expect("cert");
    let der = cert.cert.der().clone();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.signing_key.serialize_der().into());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(vec![der.clone()], key)
        .expect("server config");
    (config, der)
}

async fn pop(limits: HubLimits) -> Pop {
    let (config, der) = self_signed_pop();
    let grants = HashMap::from([(TUNNEL, grant())]);
    let hub = Hub::new(grants, limits);
    hub.relay_for(RelayKey::derive(CLUSTER_KEY));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    tokio::spawn(Arc::clone(&hub).serve(listener, acceptor));
    Pop {
        hub,
        addr,
        pin: SpkiPin::of_certificate(&der).expect("pin"),
    }
}

fn settings(pop: &Pop, secret: [u8; 32], routes: &[&str]) -> ConnectorSettings {
    let trust = lb_tls::ClientTrust {
        pin: Some(pop.pin),
        ..lb_tls::ClientTrust::default()
    };
    let mut s = ConnectorSettings::new(
        TUNNEL,
        TunnelSecret(secret),
        vec![pop.addr],
        trust.config().expect("client config"),
        "pop.test".try_into().expect("name"),
    );
    s.routes = routes.iter().map(|r| r.parse().expect("net")).collect();
    s.backoff_base = Duration::from_millis(50);
    s.backoff_max = Duration::from_millis(200);
    s.drain_grace = Duration::from_secs(5);
    s
}

/// A TCP echo server on 127.0.0.1.
async fn echo() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut r, mut w) = s.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    addr
}

async fn wait(what: &str, mut ok: impl FnMut() -> bool) {
    for _ in 0..500 {
        if ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("not within 5 s: {what}");
}

async fn round_trip(stream: &mut (impl AsyncReadExt + AsyncWriteExt + Unpin), text: &[u8]) {
    stream.write_all(text).await.expect("write");
    let mut back = vec![0u8; text.len()];
    tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut back))
        .await
        .expect("echo in time")
        .expect("echo");
    assert_eq!(back, text);
}

#[tokio::test]
async fn a_stream_through_the_tunnel_reaches_the_private_endpoint_and_back() {
    let pop = pop(HubLimits::default()).await;
    let target = echo().await;
    let connector = Connector::start(settings(&pop, [1; 32], &["127.0.0.1/32"]));
    wait("two connections", || {
        pop.hub.connections(&TUNNEL).len() == 2
    })
    .await;
    let mut stream = pop.hub.open_tcp(&TUNNEL, target).await.expect("open");
    round_trip(&mut stream, b"through the tunnel").await;
    round_trip(&mut stream, &vec![7u8; 1 << 20]).await;
    connector.shutdown().await;
}

#[tokio::test]
async fn a_connector_with_a_wrong_secret_is_refused_and_counted() {
    let pop = pop(HubLimits::default()).await;
    let connector = Connector::start(settings(&pop, [2; 32], &["127.0.0.1/32"]));
    wait("a refusal", || {
        pop.hub.stats.refused(Refusal::BadProof) >= 1
    })
    .await;
    assert!(pop.hub.connections(&TUNNEL).is_empty());
    assert_eq!(
        connector
            .stats
            .connected
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
    connector.shutdown().await;
}

#[tokio::test]
async fn a_connector_claiming_a_route_its_tunnel_is_not_granted_is_refused() {
    let pop = pop(HubLimits::default()).await;
    let connector = Connector::start(settings(&pop, [1; 32], &["10.9.0.0/16"]));
    wait("a refusal", || {
        pop.hub.stats.refused(Refusal::ForeignRoute) >= 1
    })
    .await;
    assert!(pop.hub.connections(&TUNNEL).is_empty());
    connector.shutdown().await;
}

#[tokio::test]
async fn a_target_outside_the_routes_is_refused_by_the_pop_or_the_connector() {
    let pop = pop(HubLimits::default()).await;
    let target = echo().await;
    let connector = Connector::start(settings(&pop, [1; 32], &["127.0.0.1/32"]));
    wait("connected", || !pop.hub.connections(&TUNNEL).is_empty()).await;
    let outside = SocketAddr::from(([192, 0, 2, 1], 80));
    assert_eq!(
        pop.hub.open_tcp(&TUNNEL, outside).await.err(),
        Some(OpenError::NotRouted)
    );
    // Routed, and no configured endpoint: the PoP forwards to none.
    let unconfigured = SocketAddr::from(([127, 0, 0, 3], target.port()));
    assert_eq!(
        pop.hub.open_tcp(&TUNNEL, unconfigured).await.err(),
        Some(OpenError::NotRouted)
    );
    // Granted to the tunnel, not served by this connector.
    let other = SocketAddr::from(([127, 0, 0, 2], target.port()));
    assert_eq!(
        pop.hub.open_tcp(&TUNNEL, other).await.err(),
        Some(OpenError::Unreachable(403))
    );
    assert_eq!(
        connector
            .stats
            .not_routed
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    connector.shutdown().await;
}

#[tokio::test]
async fn a_connector_that_never_says_hello_is_dropped_after_the_hello_timeout() {
    let pop = pop(HubLimits {
        hello_timeout: Duration::from_millis(200),
        ..HubLimits::default()
    })
    .await;
    let mut stalled = TcpStream::connect(pop.addr).await.expect("connect");
    let mut buf = [0u8; 1];
    let read = tokio::time::timeout(Duration::from_secs(5), stalled.read(&mut buf)).await;
    assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "the PoP closed it");
    assert_eq!(pop.hub.stats.refused(Refusal::Timeout), 1);
}

#[tokio::test]
async fn connectors_past_the_cap_are_refused_at_accept() {
    let pop = pop(HubLimits {
        max_connectors: 1,
        hello_timeout: Duration::from_secs(5),
        ..HubLimits::default()
    })
    .await;
    let _first = TcpStream::connect(pop.addr).await.expect("connect");
    let mut second = TcpStream::connect(pop.addr).await.expect("connect");
    let mut buf = [0u8; 1];
    let read = tokio::time::timeout(Duration::from_secs(5), second.read(&mut buf)).await;
    assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "the PoP closed it");
    assert_eq!(pop.hub.stats.refused(Refusal::Full), 1);
}

#[tokio::test]
async fn streams_go_to_the_replica_that_remains_when_one_stops() {
    let pop = pop(HubLimits::default()).await;
    let target = echo().await;
    let a = Connector::start(settings(&pop, [1; 32], &["127.0.0.1/32"]));
    let b = Connector::start(settings(&pop, [1; 32], &["127.0.0.1/32"]));
    wait("four connections", || {
        pop.hub.connections(&TUNNEL).len() == 4
    })
    .await;
    a.shutdown().await;
    wait("b's two", || pop.hub.connections(&TUNNEL).len() == 2).await;
    for _ in 0..8 {
        let mut s = pop.hub.open_tcp(&TUNNEL, target).await.expect("open on b");
        round_trip(&mut s, b"still here").await;
    }
    b.shutdown().await;
}

#[tokio::test]
async fn a_draining_connector_carries_its_open_streams_to_their_end() {
    let pop = pop(HubLimits::default()).await;
    let target = echo().await;
    let connector = Connector::start(settings(&pop, [1; 32], &["127.0.0.1/32"]));
    wait("connected", || pop.hub.connections(&TUNNEL).len() == 2).await;
    let mut open = pop.hub.open_tcp(&TUNNEL, target).await.expect("open");
    round_trip(&mut open, b"before").await;
    let stats = Arc::clone(&connector.stats);
    let draining = tokio::spawn(connector.shutdown());
    // The stream keeps working after the GOAWAY.
    round_trip(&mut open, b"during the drain").await;
    assert!(
        !draining.is_finished(),
        "the drain waits for the open stream"
    );
    open.shutdown().await.expect("close");
    drop(open);
    tokio::time::timeout(Duration::from_secs(5), draining)
        .await
        .expect("the drain ends once its streams did")
        .expect("joined");
    assert_eq!(
        stats.in_flight.load(std::sync::atomic::Ordering::Relaxed),
        0
    );
}

#[tokio::test]
async fn a_connector_dials_again_after_its_pop_drops_it() {
    let pop = pop(HubLimits::default()).await;
    let connector = Connector::start(settings(&pop, [1; 32], &["127.0.0.1/32"]));
    wait("connected", || pop.hub.connections(&TUNNEL).len() == 2).await;
    // A new config revokes the tunnel: its connections are dropped...
    pop.hub.set_grants(HashMap::new());
    wait("dropped", || pop.hub.connections(&TUNNEL).is_empty()).await;
    // ...and once granted again the connector is back on its own.
    pop.hub.set_grants(HashMap::from([(TUNNEL, grant())]));
    wait("reconnected", || pop.hub.connections(&TUNNEL).len() == 2).await;
    connector.shutdown().await;
}

#[tokio::test]
async fn a_connector_that_stops_answering_pings_is_dropped_after_the_ping_timeout() {
    let pop = pop(HubLimits {
        ping_interval: Duration::from_millis(100),
        ping_timeout: Duration::from_millis(200),
        ..HubLimits::default()
    })
    .await;
    // A connector that says its hello, opens HTTP/2, and then never reads again.
    let s = settings(&pop, [1; 32], &["127.0.0.1/32"]);
    let tcp = TcpStream::connect(pop.addr).await.expect("connect");
    let mut tls = tokio_rustls::TlsConnector::from(Arc::clone(&s.tls))
        .connect(s.server_name.clone(), tcp)
        .await
        .expect("tls");
    let exporter = tls
        .get_ref()
        .1
        .export_keying_material([0u8; 32], tunnel::hello::EXPORTER_LABEL, None)
        .expect("exporter");
    let hello = tunnel::hello::Hello {
        tunnel: TUNNEL,
        conn_index: 0,
        client: [3; 16],
        version: "stalled".into(),
        routes: s.routes.clone(),
    };
    hello
        .write(&mut tls, &s.secret, &exporter)
        .await
        .expect("hello");
    let answer = tunnel::hello::Answer::read(&mut tls).await.expect("answer");
    assert_eq!(answer, tunnel::hello::Answer::Accepted);
    let handshake = h2::server::handshake(tls);
    let _stalled = tokio::time::timeout(Duration::from_secs(5), handshake)
        .await
        .expect("h2 in time")
        .expect("h2");
    wait("held", || pop.hub.connections(&TUNNEL).len() == 1).await;
    wait("dropped", || pop.hub.connections(&TUNNEL).is_empty()).await;
    assert_eq!(
        pop.hub
            .stats
            .unresponsive
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
}

fn holder_of(pop: &Pop) -> Holder {
    Holder {
        node: "holder".into(),
        relay: pop.addr,
        pin: pop.pin,
        tunnels: vec![TUNNEL],
    }
}

fn dialer(hub: Option<Arc<Hub>>, key: &[u8], holders: Vec<Holder>) -> TunnelDialer {
    let list = Arc::new(HolderList::default());
    list.set(holders);
    TunnelDialer::new(hub, RelayKey::derive(key), list, Duration::from_secs(5))
}

#[tokio::test]
async fn a_pop_without_a_connection_reaches_the_endpoint_through_the_holder() {
    let (holder, relaying) = (
        pop(HubLimits::default()).await,
        pop(HubLimits::default()).await,
    );
    let target = echo().await;
    let connector = Connector::start(settings(&holder, [1; 32], &["127.0.0.1/32"]));
    wait("connected", || holder.hub.holds(&TUNNEL)).await;
    assert!(!relaying.hub.holds(&TUNNEL));
    let through = dialer(
        Some(Arc::clone(&relaying.hub)),
        CLUSTER_KEY,
        vec![holder_of(&holder)],
    );
    let mut stream = through.open(&TUNNEL, target).await.expect("relayed");
    round_trip(&mut stream, b"through the holder").await;
    round_trip(&mut stream, &vec![9u8; 1 << 20]).await;
    assert_eq!(holder.hub.stats.streams_opened.load(Ordering::Relaxed), 1);
    connector.shutdown().await;
}

#[tokio::test]
async fn a_relaying_pop_that_cannot_prove_the_mesh_key_is_refused() {
    let holder = pop(HubLimits::default()).await;
    let target = echo().await;
    let connector = Connector::start(settings(&holder, [1; 32], &["127.0.0.1/32"]));
    wait("connected", || holder.hub.holds(&TUNNEL)).await;
    let stranger = dialer(None, b"another mesh's key", vec![holder_of(&holder)]);
    assert_eq!(
        stranger.open(&TUNNEL, target).await.err(),
        Some(OpenError::NoConnection)
    );
    assert_eq!(holder.hub.stats.refused(Refusal::BadRelay), 1);
    assert_eq!(holder.hub.stats.streams_opened.load(Ordering::Relaxed), 0);
    connector.shutdown().await;
}

#[tokio::test]
async fn a_relayed_stream_skips_a_holder_that_lost_its_connections_for_one_that_has_them() {
    let (gone, holding) = (
        pop(HubLimits::default()).await,
        pop(HubLimits::default()).await,
    );
    let target = echo().await;
    let connector = Connector::start(settings(&holding, [1; 32], &["127.0.0.1/32"]));
    wait("connected", || holding.hub.holds(&TUNNEL)).await;
    // Gossip still names `gone` as a holder, first; its connections are gone.
    let through = dialer(
        None,
        CLUSTER_KEY,
        vec![holder_of(&gone), holder_of(&holding)],
    );
    for _ in 0..3 {
        let mut stream = through
            .open(&TUNNEL, target)
            .await
            .expect("through the other");
        round_trip(&mut stream, b"failover").await;
    }
    assert_eq!(holding.hub.stats.streams_opened.load(Ordering::Relaxed), 3);
    connector.shutdown().await;
}

#[tokio::test]
async fn a_holder_whose_certificate_is_not_the_gossiped_pin_is_not_relayed_through() {
    let (holder, impostor) = (
        pop(HubLimits::default()).await,
        pop(HubLimits::default()).await,
    );
    let target = echo().await;
    let connector = Connector::start(settings(&holder, [1; 32], &["127.0.0.1/32"]));
    wait("connected", || holder.hub.holds(&TUNNEL)).await;
    // Gossip says `holder`'s address has `impostor`'s key.
    let wrong = Holder {
        pin: impostor.pin,
        ..holder_of(&holder)
    };
    let through = dialer(None, CLUSTER_KEY, vec![wrong]);
    assert_eq!(
        through.open(&TUNNEL, target).await.err(),
        Some(OpenError::NoConnection)
    );
    assert_eq!(holder.hub.stats.streams_opened.load(Ordering::Relaxed), 0);
    connector.shutdown().await;
}

#[tokio::test]
async fn the_hub_tells_which_tunnels_it_holds_on_every_change() {
    let pop = pop(HubLimits::default()).await;
    let mut held = pop.hub.held_changes();
    assert!(held.borrow_and_update().is_empty());
    let connector = Connector::start(settings(&pop, [1; 32], &["127.0.0.1/32"]));
    tokio::time::timeout(Duration::from_secs(5), held.changed())
        .await
        .expect("in time")
        .expect("changed");
    assert_eq!(*held.borrow_and_update(), vec![TUNNEL]);
    connector.shutdown().await;
    tokio::time::timeout(Duration::from_secs(5), async {
        while !held.borrow_and_update().is_empty() {
            held.changed().await.expect("changed");
        }
    })
    .await
    .expect("released in time");
}

/// A holder that takes a relaying PoP's hello and opens HTTP/2, then goes silent: it never
/// reads again (a machine powered off, a path cut without a reset), its socket kept open.
async fn silent_holder() -> Holder {
    let (config, der) = self_signed_pop();
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    tokio::spawn(async move {
        let mut kept = Vec::new();
        while let Ok((tcp, _)) = listener.accept().await {
            let Ok(mut tls) = acceptor.accept(tcp).await else {
                continue;
            };
            let mut hello = [0u8; 4 + 32];
            if tls.read_exact(&mut hello).await.is_err() {
                continue;
            }
            if tunnel::hello::Answer::Accepted
                .write(&mut tls)
                .await
                .is_err()
            {
                continue;
            }
            let handshake = h2::server::handshake(tls);
            if let Ok(Ok(conn)) = tokio::time::timeout(Duration::from_secs(5), handshake).await {
                kept.push(conn);
            }
        }
    });
    Holder {
        node: "silent".into(),
        relay: addr,
        pin: SpkiPin::of_certificate(&der).expect("pin"),
        tunnels: vec![TUNNEL],
    }
}

fn quick_relays() -> tunnel::Relays {
    tunnel::Relays::new(
        RelayKey::derive(CLUSTER_KEY),
        Duration::from_millis(500),
        (Duration::from_millis(100), Duration::from_millis(200)),
    )
}

#[tokio::test]
async fn a_relay_connection_to_a_holder_gone_silent_is_dropped_after_the_ping_timeout() {
    let holder = silent_holder().await;
    let relays = quick_relays();
    relays.warm(&holder).await;
    assert!(matches!(
        relays.rank(&holder),
        tunnel::relay::Rank::Connected(_)
    ));
    wait("the silent holder forgotten", || {
        relays.rank(&holder) == tunnel::relay::Rank::FailedLately
    })
    .await;
}

#[tokio::test]
async fn a_stream_whose_opening_times_out_puts_its_holder_after_the_others() {
    let holder = silent_holder().await;
    // Pings too slow to notice first: the open's timeout is what tells.
    let relays = tunnel::Relays::new(
        RelayKey::derive(CLUSTER_KEY),
        Duration::from_millis(300),
        (Duration::from_secs(60), Duration::from_secs(60)),
    );
    let target: SocketAddr = "127.0.0.1:9".parse().expect("addr");
    let opened = relays.open(&holder, &TUNNEL, target).await;
    assert!(
        matches!(opened, Err(OpenError::TimedOut)),
        "{:?}",
        opened.err()
    );
    assert_eq!(relays.rank(&holder), tunnel::relay::Rank::FailedLately);
}
