//! Monitors of private endpoints probe through the tunnel: a PoP's hub with a connector on
//! loopback, the prober's dialer relaying through that PoP as gossip would name it, and real
//! origins (HTTP, and a bare TCP listener) as the private endpoints. Every wait is bounded.

mod support;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use lb_tls::pin::SpkiPin;
use prober::monitors::{check_for, probe, Dialer, IcmpClients};
use prober::ProbeResult;
use support::{assert_fail, assert_pass};
use tunnel::{Connector, ConnectorSettings, Grant, Holder, HolderList, Hub, HubLimits};
use tunnel::{RelayKey, TunnelDialer, TunnelId, TunnelSecret};

const TUNNEL: &str = "f70ff985-a4ef-4643-bbbc-4a0ed4fc8415";
const NETWORK: &str = "a5624d4e-044a-4ff0-b3e1-e2465353d4b4";
const SECRET: [u8; 32] = [7; 32];
const CLUSTER_KEY: &[u8] = b"the probers' and PoPs' cluster key";

/// A PoP holding the tunnel, its connector running, and the dialer a prober would have.
struct World {
    hub: Arc<Hub>,
    connector: Option<Connector>,
    dialer: Dialer,
}

async fn world(targets: &[&str]) -> World {
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
    let tunnel: TunnelId = TUNNEL.parse().expect("id");
    let grant = Grant {
        secret: TunnelSecret(SECRET),
        routes: vec!["127.0.0.0/8".parse().expect("net")],
        targets: targets.iter().map(|t| t.parse().expect("ip")).collect(),
    };
    let hub = Hub::new(HashMap::from([(tunnel, grant)]), HubLimits::default());
    hub.relay_for(RelayKey::derive(CLUSTER_KEY));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(
        Arc::clone(&hub).serve(listener, tokio_rustls::TlsAcceptor::from(Arc::new(config))),
    );
    let pin = SpkiPin::of_certificate(&der).expect("pin");
    let trust = lb_tls::ClientTrust {
        pin: Some(pin),
        ..lb_tls::ClientTrust::default()
    };
    let mut settings = ConnectorSettings::new(
        tunnel,
        TunnelSecret(SECRET),
        vec![addr],
        trust.config().expect("client config"),
        "pop.test".try_into().expect("name"),
    );
    settings.backoff_base = Duration::from_millis(50);
    let mut held = hub.held_changes();
    let connector = Connector::start(settings);
    tokio::time::timeout(
        Duration::from_secs(5),
        held.wait_for(|h| h.contains(&tunnel)),
    )
    .await
    .expect("the connector connects within 5 s")
    .expect("the hub runs");
    let holders = Arc::new(HolderList::default());
    holders.set(vec![Holder {
        node: "pop".into(),
        relay: addr,
        pin,
        tunnels: vec![tunnel],
    }]);
    let through = TunnelDialer::new(
        None,
        RelayKey::derive(CLUSTER_KEY),
        holders,
        Duration::from_secs(5),
    );
    World {
        hub,
        connector: Some(connector),
        dialer: Dialer::through(lb_edge::PrivateDialer(Arc::new(through))),
    }
}

/// One monitor on one private endpoint at `addr`, probed once through `dialer`.
async fn probe_private(dialer: &Dialer, monitor: &str, addr: SocketAddr) -> ProbeResult {
    let toml = format!(
        r#"
[[tunnels]]
id = "{TUNNEL}"
name = "office"
tunnel_secret = "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc="

[[virtual_networks]]
id = "{NETWORK}"
name = "office"
is_default_network = true

[[routes]]
network = "127.0.0.0/8"
tunnel_id = "{TUNNEL}"

[[monitors]]
name = "m"
retries = 0
timeout = 2
{monitor}

[[pools]]
name = "p"
monitor = "m"
origins = [{{ name = "e", address = "{}", port = {}, virtual_network_id = "{NETWORK}" }}]
"#,
        addr.ip(),
        addr.port()
    );
    let t = support::targets(&toml).pop().expect("one target");
    let check = check_for(&t.monitor, &IcmpClients::new(), dialer).expect("check builds");
    probe(check.as_ref(), &t).await
}

#[tokio::test]
async fn an_http_monitor_probes_a_private_endpoint_through_the_pop_holding_its_tunnel() {
    let origin = support::origin::spawn(None).await;
    let w = world(&["127.0.0.1"]).await;
    let r = probe_private(&w.dialer, "type = \"http\"\npath = \"/ok\"", origin).await;
    assert_pass(&r);
    assert_eq!(r.attempt.code, Some(200));
    assert_eq!(
        w.hub
            .stats
            .streams_opened
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
}

#[tokio::test]
async fn a_private_endpoint_s_own_answer_comes_back_through_the_tunnel() {
    let origin = support::origin::spawn(None).await;
    let w = world(&["127.0.0.1"]).await;
    let r = probe_private(&w.dialer, "type = \"http\"\npath = \"/503\"", origin).await;
    assert_fail(&r, "unexpected code 503");
}

#[tokio::test]
async fn a_tcp_monitor_fails_when_the_connector_cannot_reach_the_endpoint() {
    let w = world(&["127.0.0.1"]).await;
    let closed = SocketAddr::from(([127, 0, 0, 1], support::free_port()));
    let r = probe_private(&w.dialer, "type = \"tcp\"", closed).await;
    assert_fail(
        &r,
        "private network: the tunnel's connector could not reach it",
    );
}

#[tokio::test]
async fn a_private_endpoint_fails_as_no_tunnel_once_its_connector_is_gone() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let mut w = world(&["127.0.0.1"]).await;
    assert_pass(&probe_private(&w.dialer, "type = \"tcp\"", addr).await);
    if let Some(c) = w.connector.take() {
        c.shutdown().await;
    }
    let r = probe_private(&w.dialer, "type = \"tcp\"", addr).await;
    assert_fail(&r, "private network: no tunnel reaches it from this prober");
}

#[tokio::test]
async fn a_pop_forwards_a_probe_to_no_private_address_but_configured_endpoints() {
    let origin = support::origin::spawn(None).await;
    // The holder's config has its endpoint on 127.0.0.2: 127.0.0.1 is routed, not configured.
    let w = world(&["127.0.0.2"]).await;
    let r = probe_private(&w.dialer, "type = \"http\"\npath = \"/ok\"", origin).await;
    assert_fail(&r, "private network: no tunnel reaches it from this prober");
    assert_eq!(
        w.hub
            .stats
            .streams_opened
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
}
