//! TCP, ICMP and UDP-ICMP monitors on loopback.

mod support;

use std::time::Duration;

use support::{assert_fail, assert_pass, free_port, probe_once};

#[tokio::test]
async fn tcp_open_and_closed_ports() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let open = listener.local_addr().expect("addr").port();
    let m = "type = \"tcp\"\nretries = 0";
    assert_pass(
        &probe_once(
            m,
            &format!("{{ name = \"e\", address = \"127.0.0.1\", port = {open} }}"),
        )
        .await,
    );
    let closed = free_port();
    assert_fail(
        &probe_once(
            m,
            &format!("{{ name = \"e\", address = \"127.0.0.1\", port = {closed} }}"),
        )
        .await,
        "connection refused",
    );
    // The monitor's port wins over the endpoint's.
    let m = format!("type = \"tcp\"\nretries = 0\nport = {open}");
    assert_pass(
        &probe_once(
            &m,
            &format!("{{ name = \"e\", address = \"127.0.0.1\", port = {closed} }}"),
        )
        .await,
    );
}

#[tokio::test]
async fn icmp_echo_v4_and_v6() {
    let m = "type = \"icmp_ping\"\ntimeout = 2\nretries = 0";
    let r = probe_once(m, "{ name = \"e\", address = \"127.0.0.1\" }").await;
    assert_pass(&r);
    assert!(r.attempt.rtt < Duration::from_secs(1));
    assert_pass(&probe_once(m, "{ name = \"e\", address = \"::1\" }").await);
}

#[tokio::test]
async fn concurrent_pings_keep_their_own_replies() {
    // Many pings at once over the shared socket: every one gets its own reply.
    let toml = {
        let mut t = String::from(
            "[[monitors]]\nname = \"m\"\ntype = \"icmp_ping\"\ntimeout = 2\nretries = 0\n",
        );
        for i in 0..40 {
            let addr = if i % 2 == 0 { "127.0.0.1" } else { "::1" };
            t.push_str(&format!("[[pools]]\nname = \"p{i}\"\nmonitor = \"m\"\norigins = [{{ name = \"e\", address = \"{addr}\" }}]\n"));
        }
        t
    };
    let targets = support::targets(&toml);
    let icmp = prober::monitors::IcmpClients::new();
    let check = prober::monitors::check_for(
        &targets[0].monitor,
        &icmp,
        &prober::monitors::Dialer::direct(),
    )
    .expect("check");
    let results = futures::future::join_all(
        targets
            .iter()
            .map(|t| prober::monitors::probe(check.as_ref(), t)),
    )
    .await;
    assert!(results.iter().all(|r| r.attempt.passed), "{results:?}");
}

#[tokio::test]
async fn udp_icmp_open_socket_passes_closed_port_fails() {
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0")
        .await
        .expect("bind udp");
    let open = socket.local_addr().expect("addr").port();
    let m = "type = \"udp_icmp\"\ntimeout = 1\nretries = 0";
    // Silence until the timeout: the port is open.
    assert_pass(
        &probe_once(
            m,
            &format!("{{ name = \"e\", address = \"127.0.0.1\", port = {open} }}"),
        )
        .await,
    );
    // A closed port draws the kernel's ICMP port-unreachable.
    let closed = {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        s.local_addr().expect("addr").port()
    };
    let r = probe_once(
        m,
        &format!("{{ name = \"e\", address = \"127.0.0.1\", port = {closed} }}"),
    )
    .await;
    assert_fail(&r, "udp: port unreachable");
    assert!(
        r.attempt.rtt < Duration::from_millis(900),
        "refused before the timeout: {r:?}"
    );
    let v6 = tokio::net::UdpSocket::bind("[::1]:0")
        .await
        .expect("bind udp6");
    let port6 = v6.local_addr().expect("addr").port();
    assert_pass(
        &probe_once(
            m,
            &format!("{{ name = \"e\", address = \"::1\", port = {port6} }}"),
        )
        .await,
    );
}

/// A private endpoint (`virtual_network_id`) fails as `no tunnel` and its address is never
/// dialed: a listener at it sees no connection.
#[tokio::test]
async fn a_private_endpoint_is_never_dialed_and_fails_as_no_tunnel() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let toml = format!(
        r#"
[[tunnels]]
id = "f70ff985-a4ef-4643-bbbc-4a0ed4fc8415"
name = "t"
tunnel_secret = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="

[[virtual_networks]]
id = "a5624d4e-044a-4ff0-b3e1-e2465353d4b4"
name = "office"
is_default_network = true

[[routes]]
network = "127.0.0.0/8"
tunnel_id = "f70ff985-a4ef-4643-bbbc-4a0ed4fc8415"

[[monitors]]
name = "m"
type = "tcp"
retries = 0

[[pools]]
name = "p"
monitor = "m"
origins = [{{ name = "e", address = "127.0.0.1", port = {port}, virtual_network_id = "a5624d4e-044a-4ff0-b3e1-e2465353d4b4" }}]
"#
    );
    let t = support::targets(&toml).pop().expect("one target");
    let check = prober::monitors::check_for(
        &t.monitor,
        &prober::monitors::IcmpClients::new(),
        &prober::monitors::Dialer::direct(),
    )
    .expect("check builds");
    let r = prober::monitors::probe(check.as_ref(), &t).await;
    assert_fail(&r, "private network: no tunnel reaches it from this prober");
    let accepted = tokio::time::timeout(Duration::from_millis(200), listener.accept()).await;
    assert!(accepted.is_err(), "the private address was dialed");
}
