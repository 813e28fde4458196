//! HTTPS to origins per `origin_tls`: strict with the origin's CA works; strict without it is
//! a 526 (invalid certificate); full towards an origin that does not speak TLS is a 525; a CA
//! file renewed in place is taken by a reload of the same config.

use std::net::SocketAddr;
use std::time::Duration;

use test_support::config::{Config, Lb, Monitor, Pool};
use test_support::*;

use crate::curl;

/// A TLS origin on `ip` (any port) answering `tls` to every request, with a certificate for
/// `names` (DNS names and IPs) signed by a fresh CA whose PEM is written to `ca`.
fn tls_origin(ip: &str, names: &[&str], ca: &std::path::Path) -> u16 {
    tls_origin_with(
        ip,
        test_support::pki::server_signed_by_test_ca(names, ca),
        "tls\n",
    )
}

/// A TLS origin on `ip` (any port) with `config`, answering `body` to every request.
pub fn tls_origin_with(
    ip: &str,
    config: std::sync::Arc<rustls::ServerConfig>,
    body: &'static str,
) -> u16 {
    let listener = std::net::TcpListener::bind((ip, 0)).expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
            let acceptor = tokio_rustls::TlsAcceptor::from(config);
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(move |_req| async move {
                        Ok::<_, std::convert::Infallible>(hyper::Response::new(
                            http_body_util::Full::new(bytes::Bytes::from_static(body.as_bytes())),
                        ))
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                        .await;
                });
            }
        });
    });
    port
}

/// A mesh whose pools are a TLS origin (its CA given to the monitor) and a plain one, behind
/// `strict.example.test` (strict, with the CA), `noca.example.test` (strict, without it) and
/// `full.example.test` (full, to the plain origin).
pub struct OriginTlsWorld {
    url: String,
    /// The origin's CA, and the CA file of `renewed.example.test` (another CA's at the start).
    ca: std::path::PathBuf,
    renewed_ca: std::path::PathBuf,
    mesh: Procs,
    _plain: Origin,
    _scratch: tempfile::TempDir,
}

impl OriginTlsWorld {
    pub fn start() -> OriginTlsWorld {
        let (scratch, key) = scratch_dir_with_key("origin-tls");
        let dir = scratch.path();
        let ca = dir.join("ca.pem");
        let tls_port = tls_origin(
            "127.0.3.1",
            &[
                "127.0.3.1",
                "strict.example.test",
                "noca.example.test",
                "renewed.example.test",
            ],
            &ca,
        );
        let renewed_ca = dir.join("renewed-ca.pem");
        test_support::pki::TestCa::new("not the origin's CA", &renewed_ca);
        let plain = named_origin("127.0.3.2", "plain", Duration::ZERO);
        let config = dir.join("meshlb.toml");
        let text = config_text(&ca, &renewed_ca, tls_port, plain.port);
        std::fs::write(&config, text).expect("config");
        let (admin, proxy): (SocketAddr, SocketAddr) = (free_tcp(), free_tcp());
        let mesh = start_mesh(
            &config,
            &key,
            admin,
            &["--proxy".to_string(), proxy.to_string()],
        );
        OriginTlsWorld {
            url: format!("http://{proxy}/"),
            ca,
            renewed_ca,
            mesh,
            _plain: plain,
            _scratch: scratch,
        }
    }

    fn wait_strict_served(&self) {
        wait_for(
            "the TLS origin to be healthy and served",
            Duration::from_secs(20),
            || {
                let r = curl(&self.url, "strict.example.test", &[]);
                r.status == 200 && r.body == "tls\n"
            },
        );
    }
}

fn config_text(
    ca: &std::path::Path,
    renewed_ca: &std::path::Path,
    tls_port: u16,
    plain_port: u16,
) -> String {
    let lb =
        |name: &str, pool: &str, tls: &str| Lb::new(name).pools(&[pool]).proxied().origin_tls(tls);
    Config::new()
        .monitor(Monitor::https("https").interval(1).timeout(1).ca_file(ca))
        .monitor(Monitor::http("http").interval(1).timeout(1))
        .pool(
            Pool::new("tls")
                .monitor("https")
                .regions(&["WEU"])
                .origin("t", ("127.0.3.1", tls_port)),
        )
        .pool(
            Pool::new("plain")
                .monitor("http")
                .regions(&["WEU"])
                .origin("p", ("127.0.3.2", plain_port)),
        )
        .load_balancer(lb("strict.example.test", "tls", "strict").origin_ca_file(ca))
        .load_balancer(lb("noca.example.test", "tls", "strict"))
        .load_balancer(lb("renewed.example.test", "tls", "strict").origin_ca_file(renewed_ca))
        .load_balancer(lb("full.example.test", "plain", "full"))
        .render()
}

pub fn strict_origin_tls_with_the_origins_ca_is_served(w: &mut OriginTlsWorld) {
    w.wait_strict_served();
}

pub fn strict_origin_tls_without_the_origins_ca_answers_526(w: &mut OriginTlsWorld) {
    w.wait_strict_served();
    let r = curl(&w.url, "noca.example.test", &[]);
    assert_eq!(r.status, 526, "{}", r.body);
    assert!(r.body.contains("invalid certificate"), "{}", r.body);
}

pub fn full_origin_tls_to_an_origin_without_tls_answers_525(w: &mut OriginTlsWorld) {
    wait_for(
        "the plain origin to be healthy",
        Duration::from_secs(20),
        || curl(&w.url, "full.example.test", &[]).status != 530,
    );
    let r = curl(&w.url, "full.example.test", &[]);
    assert_eq!(r.status, 525, "{}", r.body);
    assert!(r.body.contains("TLS handshake"), "{}", r.body);
}

pub fn a_renewed_origin_ca_file_is_taken_by_a_reload_of_the_same_config(w: &mut OriginTlsWorld) {
    w.wait_strict_served();
    let r = curl(&w.url, "renewed.example.test", &[]);
    assert_eq!(r.status, 526, "another CA's file: {}", r.body);
    // Renewed as cert-manager or an operator does it: a new file moved over the old one.
    let next = w.renewed_ca.with_extension("next");
    std::fs::copy(&w.ca, &next).expect("copy");
    std::fs::rename(&next, &w.renewed_ca).expect("rename");
    let aggregator = nix::unistd::Pid::from_raw(w.mesh.0[0].id() as i32);
    nix::sys::signal::kill(aggregator, nix::sys::signal::Signal::SIGHUP).expect("SIGHUP");
    wait_for(
        "the renewed CA in force after SIGHUP",
        Duration::from_secs(20),
        || curl(&w.url, "renewed.example.test", &[]).status == 200,
    );
}
