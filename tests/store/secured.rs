//! The config store behind etcd's own defences: one member that speaks TLS alone, asks every
//! client for a certificate of the test CA (`--client-cert-auth`), has its users on, and lets
//! an unused auth token expire after a second. Three aggregators on it, each a mesh of its own:
//! one with everything right (`etcds://`, the CA, a client certificate, etcd's user and
//! password; started, and written through, before etcd's users are turned on), one with a wrong
//! password, one that trusts another CA.

use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::Duration;

use test_support::etcd::EtcdCluster;
use test_support::pki::TestCa;
use test_support::*;

use super::world::{api, pool, POOLS};

pub static SECURED: Shared<SecuredStore> = Shared::new(SecuredStore::start);

/// The prefix of the store's URL; the aggregators' key is `/PREFIX/config`, and the user may
/// read and write under `/PREFIX/` alone.
pub const PREFIX: &str = "meshlb-secured";
pub const USER: &str = "meshlb";
pub const PASSWORD: &str = "a-password";
/// etcd's `--auth-token-ttl`: a token unused this long is refused ("invalid auth token").
pub const TOKEN_TTL: Duration = Duration::from_secs(1);

pub struct SecuredStore {
    pub etcd: EtcdCluster,
    /// The admin API of the aggregator with everything right, of the one with a wrong
    /// password, of the one trusting another CA.
    pub trusted: SocketAddr,
    pub wrong_password: SocketAddr,
    pub other_ca: SocketAddr,
    _aggregators: Procs,
    _dir: tempfile::TempDir,
}

impl SecuredStore {
    fn start() -> SecuredStore {
        let (dir, key) = scratch_dir_with_key("store-secured");
        let d = dir.path();
        let ca_file = d.join("ca.pem");
        let ca = TestCa::new("meshlb etcd CA", &ca_file);
        let other_ca_file = d.join("other-ca.pem");
        TestCa::new("another CA", &other_ca_file);
        let etcd = EtcdCluster::start_secured(d, &ca, &ca_file, TOKEN_TTL.as_secs() as u32);
        // etcd 3.4's gateway refuses a client certificate with a CommonName once its users are
        // on (the name would not be the user): the aggregators' has none.
        let client = ca.client_without_common_name(d, "aggregator");
        let right = d.join("password");
        std::fs::write(&right, PASSWORD).expect("password file");
        let wrong = d.join("wrong-password");
        std::fs::write(&wrong, "not-the-password").expect("password file");
        let mut aggregators = Procs(Vec::new());
        let mut start = |name: &str, ca: &std::path::Path, password: &std::path::Path| {
            let admin = free_tcp();
            let config = d.join(format!("{name}.toml"));
            std::fs::write(&config, "").expect("config");
            let mut v: Vec<String> = vec![
                "aggregator".into(),
                "--config".into(),
                config.display().to_string(),
                "--region".into(),
                "WEU".into(),
                "--node-id".into(),
                name.into(),
                "--admin".into(),
                admin.to_string(),
                "--config-store".into(),
                etcd.url(PREFIX),
                "--config-store-ca".into(),
                ca.display().to_string(),
                "--config-store-cert".into(),
                client.cert.display().to_string(),
                "--config-store-key".into(),
                client.key.display().to_string(),
                "--config-store-user".into(),
                USER.into(),
                "--config-store-password-file".into(),
                password.display().to_string(),
            ];
            v.extend(admin_token_args(d));
            let gossip = free_udp();
            v.extend(gossip_args(gossip, gossip, &key));
            aggregators
                .0
                .push(spawn_logged(Command::new(meshlb_bin()).args(&v), name));
            admin
        };
        // The usual order of a rollout: meshlb configured with its etcd user first, etcd's
        // users turned on after. Until then it works without a token.
        let trusted = start("secured-trusted", &ca_file, &right);
        wait_for(
            "the first aggregator's admin API",
            Duration::from_secs(30),
            || TcpStream::connect(trusted).is_ok(),
        );
        let (status, _, body, _) = api(trusted, "POST", POOLS, Some(&pool("before-auth")), None);
        assert_eq!(status, 200, "a write before etcd's users are on: {body}");
        etcd.enable_auth(&format!("/{PREFIX}/"), USER, PASSWORD);
        let wrong_password = start("secured-wrong-password", &ca_file, &wrong);
        let other_ca = start("secured-other-ca", &other_ca_file, &right);
        for a in [wrong_password, other_ca] {
            wait_for("an aggregator's admin API", Duration::from_secs(30), || {
                TcpStream::connect(a).is_ok()
            });
        }
        SecuredStore {
            etcd,
            trusted,
            wrong_password,
            other_ca,
            _aggregators: aggregators,
            _dir: dir,
        }
    }

    /// The document etcd holds, and its revision, read as the meshlb user.
    pub fn stored(&self) -> Option<(String, u64)> {
        self.etcd
            .read_as(USER, PASSWORD, &format!("/{PREFIX}/config"))
    }
}

pub fn writes_land_in_etcd_over_tls_as_an_etcd_user(s: &mut SecuredStore) {
    let (status, generation, body, _) = api(s.trusted, "POST", POOLS, Some(&pool("secured")), None);
    assert_eq!(status, 200, "{body}");
    let (document, revision) = s.stored().expect("the document in etcd");
    assert_eq!(revision, generation, "the generation is the key's revision");
    assert!(document.contains("secured"), "{document}");
}

pub fn an_expired_etcd_token_is_renewed_and_the_next_write_lands(s: &mut SecuredStore) {
    let (status, _, body, _) = api(s.trusted, "POST", POOLS, Some(&pool("before-expiry")), None);
    assert_eq!(status, 200, "{body}");
    // Nothing of this trial uses the aggregator's token for longer than etcd keeps it (etcd
    // looks for expired tokens once a second, so twice the TTL): the next request carries a
    // token etcd no longer knows, unless the aggregator asks for a new one.
    std::thread::sleep(TOKEN_TTL * 2 + Duration::from_millis(500));
    let (status, generation, body, _) =
        api(s.trusted, "POST", POOLS, Some(&pool("after-expiry")), None);
    assert_eq!(status, 200, "{body}");
    let (document, revision) = s.stored().expect("the document in etcd");
    assert_eq!(revision, generation);
    assert!(document.contains("after-expiry"), "{document}");
}

pub fn a_wrong_etcd_password_is_refused_and_the_write_says_so(s: &mut SecuredStore) {
    let before = s.stored().map_or(0, |(_, r)| r);
    let (status, _, body, retry_after) = api(
        s.wrong_password,
        "POST",
        POOLS,
        Some(&pool("wrong-password")),
        None,
    );
    assert_eq!(status, 503, "{body}");
    assert!(retry_after.is_some(), "a 503 says when to try again");
    assert!(
        body.contains("invalid user ID or password"),
        "the answer carries etcd's reason: {body}"
    );
    assert_eq!(s.stored().map_or(0, |(_, r)| r), before, "nothing written");
}

pub fn an_aggregator_that_does_not_trust_etcds_certificate_writes_nothing(s: &mut SecuredStore) {
    let before = s.stored().map_or(0, |(_, r)| r);
    let (status, _, body, _) = api(s.other_ca, "POST", POOLS, Some(&pool("other-ca")), None);
    assert_eq!(status, 503, "{body}");
    assert!(
        body.to_lowercase().contains("certificate"),
        "the answer says the certificate did not verify: {body}"
    );
    assert_eq!(s.stored().map_or(0, |(_, r)| r), before, "nothing written");
}
