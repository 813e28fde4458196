//! HTTP and HTTPS monitors against a real origin on loopback.

mod support;

use support::{assert_fail, assert_pass, origin, pki::Pki, probe_once, temp_dir};

fn ep(port: u16) -> String {
    format!("{{ name = \"e\", address = \"127.0.0.1\", port = {port} }}")
}

#[tokio::test]
async fn status_codes_and_expected_codes() {
    let port = origin::spawn(None).await.port();
    assert_pass(&probe_once("path = \"/ok\"", &ep(port)).await);
    let r = probe_once("path = \"/503\"\nretries = 1", &ep(port)).await;
    assert_fail(&r, "unexpected code 503");
    assert_eq!(r.attempt.code, Some(503));
    assert_eq!(r.tries, 2, "one retry at once after the failure");
    assert_fail(
        &probe_once("path = \"/204\"", &ep(port)).await,
        "unexpected code 204",
    );
    assert_pass(&probe_once("path = \"/204\"\nexpected_codes = \"2xx\"", &ep(port)).await);
    assert_pass(&probe_once("path = \"/503\"\nexpected_codes = \"200,503\"", &ep(port)).await);
    assert_fail(
        &probe_once(
            "path = \"/missing\"\nexpected_codes = \"2xx,304\"",
            &ep(port),
        )
        .await,
        "unexpected code 404",
    );
    let r = probe_once("path = \"/ok\"\nmethod = \"HEAD\"", &ep(port)).await;
    assert_pass(&r);
    let t = r.attempt.timings.expect("timings");
    assert!(
        t.connect <= t.tls && t.tls <= t.first_byte && t.first_byte <= t.total,
        "{t:?}"
    );
}

#[tokio::test]
async fn timeouts_and_refused_connections() {
    let port = origin::spawn(None).await.port();
    let r = probe_once("path = \"/slow\"\ntimeout = 1\nretries = 0", &ep(port)).await;
    assert_fail(&r, "timeout");
    assert!(
        r.attempt.rtt < std::time::Duration::from_secs(3),
        "bounded by the timeout: {r:?}"
    );
    let closed = support::free_port();
    assert_fail(
        &probe_once("retries = 0", &ep(closed)).await,
        "connection refused",
    );
}

#[tokio::test]
async fn redirects_fail_unless_followed() {
    let port = origin::spawn(None).await.port();
    let r = probe_once("path = \"/redirect\"", &ep(port)).await;
    assert_fail(&r, "redirect 301 to /ok (follow_redirects is off)");
    assert_pass(&probe_once("path = \"/redirect\"\nfollow_redirects = true", &ep(port)).await);
    assert_fail(
        &probe_once(
            "path = \"/redirect-loop\"\nfollow_redirects = true",
            &ep(port),
        )
        .await,
        "more than 5 redirects",
    );
    // A 3xx listed in expected_codes passes without following.
    assert_pass(&probe_once("path = \"/redirect\"\nexpected_codes = \"301\"", &ep(port)).await);
}

#[tokio::test]
async fn expected_body_reads_only_the_first_10_kib() {
    let port = origin::spawn(None).await.port();
    assert_pass(&probe_once("path = \"/ok\"\nexpected_body = \"systems ok\"", &ep(port)).await);
    assert_fail(
        &probe_once("path = \"/ok\"\nexpected_body = \"degraded\"", &ep(port)).await,
        "body mismatch",
    );
    assert_pass(
        &probe_once(
            "path = \"/needle-early\"\nexpected_body = \"needle\"",
            &ep(port),
        )
        .await,
    );
    assert_fail(
        &probe_once(
            "path = \"/needle-late\"\nexpected_body = \"needle\"",
            &ep(port),
        )
        .await,
        "body mismatch",
    );
    // An endless body: decided on its head, quickly.
    let r = probe_once(
        "path = \"/endless\"\nexpected_body = \"zzz\"\ntimeout = 3",
        &ep(port),
    )
    .await;
    assert_pass(&r);
    assert!(
        r.attempt.timings.expect("timings").total < std::time::Duration::from_secs(1),
        "{r:?}"
    );
}

#[tokio::test]
async fn host_header_precedence_and_headers() {
    let port = origin::spawn(None).await.port();
    // The address alone is the wrong Host.
    assert_fail(
        &probe_once("path = \"/host\"", &ep(port)).await,
        "unexpected code 421",
    );
    // Monitor Host.
    assert_pass(
        &probe_once(
            "path = \"/host\"\nheader = { Host = [\"good.example\"] }",
            &ep(port),
        )
        .await,
    );
    // The endpoint's Host wins over the monitor's.
    let endpoint = format!("{{ name = \"e\", address = \"127.0.0.1\", port = {port}, header = {{ Host = [\"good.example\"] }} }}");
    assert_pass(
        &probe_once(
            "path = \"/host\"\nheader = { Host = [\"bad.example\"] }",
            &endpoint,
        )
        .await,
    );
    let endpoint = format!("{{ name = \"e\", address = \"127.0.0.1\", port = {port}, header = {{ Host = [\"bad.example\"] }} }}");
    assert_fail(
        &probe_once(
            "path = \"/host\"\nheader = { Host = [\"good.example\"] }",
            &endpoint,
        )
        .await,
        "421",
    );
    // Custom headers and a User-Agent naming meshlb and the pool.
    assert_pass(
        &probe_once(
            "path = \"/headers\"\nheader = { X-Probe = [\"yes\"] }",
            &ep(port),
        )
        .await,
    );
    assert_fail(
        &probe_once("path = \"/headers\"", &ep(port)).await,
        "unexpected code 400",
    );
}

#[tokio::test]
async fn https_certificates_are_verified_unless_insecure() {
    let dir = temp_dir("pki");
    let pki = Pki::new(dir.path());
    let ca = pki.ca_file.display().to_string();
    let valid = origin::spawn(Some(pki.valid.server_config())).await.port();
    let self_signed = origin::spawn(Some(pki.self_signed.server_config()))
        .await
        .port();
    let expired = origin::spawn(Some(pki.expired.server_config()))
        .await
        .port();
    let wrong_name = origin::spawn(Some(pki.wrong_name.server_config()))
        .await
        .port();
    let monitor = |extra: &str| {
        format!("type = \"https\"\npath = \"/ok\"\nretries = 0\nca_file = \"{ca}\"\n{extra}")
    };
    let localhost = |port: u16| {
        format!("{{ name = \"e\", address = \"127.0.0.1\", port = {port}, header = {{ Host = [\"localhost\"] }} }}")
    };

    let r = probe_once(&monitor(""), &localhost(valid)).await;
    assert_pass(&r);
    let t = r.attempt.timings.expect("timings");
    assert!(t.connect < t.tls, "the TLS handshake is timed apart: {t:?}");
    // Verification by IP address (the certificate has 127.0.0.1 as a SAN).
    assert_pass(&probe_once(&monitor(""), &ep(valid)).await);
    assert_fail(
        &probe_once(&monitor(""), &localhost(self_signed)).await,
        "tls: unknown issuer",
    );
    assert_fail(
        &probe_once(&monitor(""), &localhost(expired)).await,
        "tls: certificate expired",
    );
    assert_fail(
        &probe_once(&monitor(""), &localhost(wrong_name)).await,
        "tls: certificate not valid for the host name",
    );
    // Without the CA file the valid certificate is untrusted too.
    let no_ca = "type = \"https\"\npath = \"/ok\"\nretries = 0";
    assert_fail(
        &probe_once(no_ca, &localhost(valid)).await,
        "tls: unknown issuer",
    );
    for port in [valid, self_signed, expired, wrong_name] {
        assert_pass(&probe_once(&monitor("allow_insecure = true"), &localhost(port)).await);
    }
    // Plain HTTP against a TLS port fails; HTTPS against plain HTTP fails.
    let plain = origin::spawn(None).await.port();
    assert!(
        !probe_once(&monitor(""), &localhost(plain))
            .await
            .attempt
            .passed
    );
}
