//! The admin API over TLS: curl and the CLI with the test CA, mTLS refusing a client without a
//! certificate, no plain HTTP left, the console, and what SIGHUP re-reads.

use std::io::{Read, Write};
use std::process::Command;
use std::time::Duration;

use test_support::*;

use super::world::{curl, hangup, Mesh, READ_TOKEN};

pub fn curl_reads_the_api_over_https_with_the_ca_and_a_client_certificate(mesh: &mut Mesh) {
    let (code, body) = curl(
        &mesh.curl_mtls(),
        &format!("https://{}/status", mesh.primary),
    );
    assert_eq!(code, 200, "{body}");
    let pools = format!(
        "https://{}/client/v4/accounts/meshlb/load_balancers/pools",
        mesh.primary
    );
    let (code, body) = curl(&mesh.curl_mtls(), &pools);
    assert_eq!(code, 200, "{body}");
    let answer: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(answer["success"], serde_json::json!(true), "{body}");
}

pub fn a_client_without_a_certificate_is_refused_in_the_handshake(mesh: &mut Mesh) {
    let ca = ["--cacert".to_string(), mesh.ca_file.display().to_string()];
    let (code, body) = curl(&ca, &format!("https://{}/status", mesh.primary));
    assert_eq!(code, 0, "answered without a client certificate: {body}");
    // A certificate from no CA the listener trusts is refused as well.
    let other = mesh.ca.client(mesh.dir.path(), "unused");
    let rogue = test_support::pki::TestCa::new("rogue", &mesh.dir.path().join("r.pem"))
        .client(mesh.dir.path(), "rogue-client");
    let mut args = ca.to_vec();
    args.extend([
        "--cert".into(),
        rogue.cert.display().to_string(),
        "--key".into(),
        rogue.key.display().to_string(),
    ]);
    let (code, _) = curl(&args, &format!("https://{}/status", mesh.primary));
    assert_eq!(code, 0, "answered a certificate of another CA");
    // The same request with a certificate the CA signed is answered.
    let mut args = ca.to_vec();
    args.extend([
        "--cert".into(),
        other.cert.display().to_string(),
        "--key".into(),
        other.key.display().to_string(),
    ]);
    assert_eq!(
        curl(&args, &format!("https://{}/status", mesh.primary)).0,
        200
    );
}

pub fn no_plain_http_is_answered_on_a_tls_listener(mesh: &mut Mesh) {
    let mut s = std::net::TcpStream::connect(mesh.follower).expect("connects");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    s.write_all(b"GET /status HTTP/1.1\r\nHost: a\r\n\r\n")
        .expect("writes");
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    assert!(
        !String::from_utf8_lossy(&answer).contains("HTTP/1.1 200"),
        "plain HTTP was answered: {}",
        String::from_utf8_lossy(&answer)
    );
    let (code, _) = curl(&[], &format!("http://{}/healthz", mesh.follower));
    assert_ne!(code, 200);
}

pub fn the_console_is_served_over_https(mesh: &mut Mesh) {
    let (code, body) = curl(&mesh.curl_mtls(), &format!("https://{}/ui/", mesh.primary));
    assert_eq!(code, 200);
    assert!(body.to_ascii_lowercase().contains("<html"), "{body}");
}

/// `meshlb` with `args` against the primary over mTLS: (success, stdout, stderr).
pub fn cli(mesh: &Mesh, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(meshlb_bin())
        .args(args)
        .args([
            "--admin",
            &format!("https://127.0.0.1:{}", mesh.primary.port()),
        ])
        .args(mesh.curl_mtls())
        .output()
        .expect("meshlb runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

pub fn the_cli_writes_and_reads_over_https_with_a_client_certificate(mesh: &mut Mesh) {
    let file = mesh.dir.path().join("cli-pool.json");
    std::fs::write(
        &file,
        r#"{"name": "cli-pool", "origins": [{"name": "a", "address": "127.0.0.2"}]}"#,
    )
    .expect("pool file");
    let (ok, out, err) = cli(mesh, &["pools", "apply", "-f", &file.display().to_string()]);
    assert!(ok, "{out}{err}");
    let (ok, out, err) = cli(mesh, &["pools", "list"]);
    assert!(ok && out.contains("cli-pool"), "{out}{err}");
    let (ok, out, err) = cli(mesh, &["config", "show"]);
    assert!(ok, "{out}{err}");
    let (ok, out, err) = cli(mesh, &["status"]);
    assert!(ok, "{out}{err}");
}

pub fn the_cli_refuses_an_api_whose_certificate_does_not_verify(mesh: &mut Mesh) {
    let out = Command::new(meshlb_bin())
        .args(["status", "--admin", &format!("https://{}", mesh.primary)])
        .output()
        .expect("meshlb runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.to_ascii_lowercase().contains("certificate"), "{err}");
}

pub fn a_token_file_rewritten_is_in_force_after_sighup(mesh: &mut Mesh) {
    let ca = ["--cacert".to_string(), mesh.ca_file.display().to_string()];
    let status = |token: &str| {
        let mut args = ca.to_vec();
        args.extend(["-H".into(), format!("Authorization: Bearer {token}")]);
        curl(&args, &format!("https://{}/status", mesh.follower)).0
    };
    let before = std::fs::read_to_string(&mesh.follower_token).expect("token");
    assert_eq!(status(before.trim()), 200);
    let next = format!("{}-next", before.trim());
    std::fs::write(&mesh.follower_token, &next).expect("rotate");
    hangup(mesh.follower_pid());
    wait_for("the rotated token", Duration::from_secs(10), || {
        status(&next) == 200
    });
    assert_eq!(status(before.trim()), 401, "the old token still works");
    assert_eq!(status(READ_TOKEN), 200, "the read token was lost");
}

pub fn a_renewed_certificate_is_served_after_sighup(mesh: &mut Mesh) {
    let renewed = mesh.ca.server(
        &["127.0.0.1", "localhost"],
        mesh.dir.path(),
        "follower-renewed",
    );
    let pinned = |pin: &str| {
        let args = [
            "--cacert".to_string(),
            mesh.ca_file.display().to_string(),
            "--pinnedpubkey".into(),
            pin.to_string(),
        ];
        curl(&args, &format!("https://{}/healthz", mesh.follower)).0 == 200
    };
    assert!(!pinned(&renewed.pin), "the renewed key is served already");
    std::fs::copy(&renewed.cert, &mesh.follower_cert.cert).expect("cert");
    std::fs::copy(&renewed.key, &mesh.follower_cert.key).expect("key");
    hangup(mesh.follower_pid());
    wait_for("the renewed certificate", Duration::from_secs(10), || {
        pinned(&renewed.pin)
    });
}
