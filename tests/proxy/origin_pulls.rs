//! Authenticated origin pulls and Simulate Zone (Cloudflare's names for both): an origin that accepts only
//! clients holding a certificate its CA signed. `www.pulls.test` (zone `pulls.test`) presents
//! one and is served; a `probe_zone` monitor probing as that zone judges the origin healthy,
//! while a monitor of the same origin without it fails there; a client without the
//! certificate is refused by the origin itself.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use test_support::config::{quote, Config, Lb, Monitor, Pool, Zone};
use test_support::pki::TestCa;
use test_support::*;

use super::origin_tls::tls_origin_with;
use crate::curl;

const ORIGIN_IP: &str = "127.0.3.5";

pub struct PullsWorld {
    url: String,
    admin: SocketAddr,
    origin: SocketAddr,
    origin_ca: PathBuf,
    _mesh: Procs,
    _scratch: tempfile::TempDir,
}

impl PullsWorld {
    pub fn start() -> PullsWorld {
        let (scratch, key) = scratch_dir_with_key("origin-pulls");
        let dir = scratch.path();
        let origin_ca = dir.join("origin-ca.pem");
        let pull_ca = dir.join("pull-ca.pem");
        let origin_cert = TestCa::new("origins' CA", &origin_ca).server(
            &[ORIGIN_IP, "www.pulls.test", "www.other.test"],
            dir,
            "origin",
        );
        let pulls = TestCa::new("origin pulls CA", &pull_ca);
        let client = pulls.client(dir, "meshlb-pull");
        let server = lb_tls::ReloadableServer::load(
            lb_tls::ServerFiles {
                cert: origin_cert.cert,
                key: origin_cert.key,
                client_ca: Some(pull_ca),
            },
            &[b"http/1.1"],
        )
        .expect("the origin's TLS");
        let port = tls_origin_with(ORIGIN_IP, server.config(), "pulled\n");
        let path = |p: &std::path::Path| quote(&p.display().to_string());
        let https = |name: &str| {
            Monitor::https(name)
                .interval(1)
                .timeout(1)
                .retries(0)
                .ca_file(&origin_ca)
        };
        let config = Config::new()
            .monitor(https("as-the-zone").set("probe_zone", quote("pulls.test")))
            .monitor(https("on-its-own"))
            .pool(
                Pool::new("pulled")
                    .monitor("as-the-zone")
                    .regions(&["WEU"])
                    .origin("o", (ORIGIN_IP, port)),
            )
            .pool(
                Pool::new("unauthenticated")
                    .monitor("on-its-own")
                    .regions(&["WEU"])
                    .origin("o", (ORIGIN_IP, port)),
            )
            .zone(Zone::new("pulls.test").nameservers(&["ns1.pulls.test"]))
            .zone(Zone::new("other.test").nameservers(&["ns1.other.test"]))
            .load_balancer(
                Lb::new("www.pulls.test")
                    .pools(&["pulled"])
                    .proxied()
                    .origin_tls("strict")
                    .origin_ca_file(&origin_ca)
                    .set("origin_client_cert", path(&client.cert))
                    .set("origin_client_key", path(&client.key)),
            )
            .load_balancer(
                Lb::new("www.other.test")
                    .pools(&["unauthenticated"])
                    .proxied(),
            )
            .render();
        let file = dir.join("meshlb.toml");
        std::fs::write(&file, config).expect("config");
        let (admin, proxy) = (free_tcp(), free_tcp());
        let mesh = start_mesh(
            &file,
            &key,
            admin,
            &["--proxy".to_string(), proxy.to_string()],
        );
        PullsWorld {
            url: format!("http://{proxy}/"),
            admin,
            origin: SocketAddr::new(ORIGIN_IP.parse().expect("ip"), port),
            origin_ca,
            _mesh: mesh,
            _scratch: scratch,
        }
    }

    /// The verdict of pool `pool`'s endpoint in the aggregator's `/status`.
    fn verdict(&self, pool: &str) -> String {
        get(self.admin, "/status")
            .and_then(|s| {
                s["pools"]
                    .as_array()?
                    .iter()
                    .find(|p| p["name"] == pool)
                    .map(|p| {
                        p["endpoints"][0]["verdict"]
                            .as_str()
                            .unwrap_or("")
                            .to_string()
                    })
            })
            .unwrap_or_default()
    }
}

pub fn a_probe_zone_monitor_judges_a_client_certificate_origin_healthy(w: &mut PullsWorld) {
    wait_for(
        "the zone's monitor to pass",
        Duration::from_secs(30),
        || w.verdict("pulled") == "healthy",
    );
    // The same origin under a monitor of its own, which presents no certificate, fails.
    wait_for("the plain monitor to fail", Duration::from_secs(30), || {
        w.verdict("unauthenticated") == "unhealthy"
    });
}

pub fn an_origin_requiring_a_client_certificate_is_served_through_the_proxy(w: &mut PullsWorld) {
    wait_for("the pulled origin served", Duration::from_secs(30), || {
        let r = curl(&w.url, "www.pulls.test", &[]);
        r.status == 200 && r.body == "pulled\n"
    });
}

pub fn the_origin_refuses_a_client_without_the_certificate(w: &mut PullsWorld) {
    let out = std::process::Command::new("curl")
        .args([
            "-s",
            "--max-time",
            "5",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
        ])
        .args(["--cacert", &w.origin_ca.display().to_string()])
        .args([
            "--resolve",
            &format!("www.pulls.test:{}:{ORIGIN_IP}", w.origin.port()),
        ])
        .arg(format!("https://www.pulls.test:{}/", w.origin.port()))
        .output()
        .expect("curl runs");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "000",
        "the origin answered"
    );
}
