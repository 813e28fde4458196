//! Test certificates made with rcgen: a CA, and leaf certificates that are valid, self-signed,
//! expired, or for the wrong name.

use std::path::PathBuf;
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, SanType};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

pub struct Leaf {
    pub cert_pem: String,
    pub key_pem: String,
    pub cert_der: CertificateDer<'static>,
    pub key_der: Vec<u8>,
}

impl Leaf {
    pub fn server_config(&self) -> Arc<rustls::ServerConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("protocols")
            .with_no_client_auth()
            .with_single_cert(
                vec![self.cert_der.clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_der.clone())),
            )
            .expect("server cert");
        Arc::new(config)
    }
}

pub struct Pki {
    /// The CA certificate, as a PEM file monitors name in `ca_file`.
    pub ca_file: PathBuf,
    pub valid: Leaf,
    pub self_signed: Leaf,
    pub expired: Leaf,
    pub wrong_name: Leaf,
}

fn leaf_params(names: &[&str]) -> CertificateParams {
    let mut p = CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
        .expect("params");
    p.subject_alt_names
        .push(SanType::IpAddress("127.0.0.1".parse().expect("ip")));
    p
}

fn leaf(params: CertificateParams, issuer: Option<&Issuer<'_, KeyPair>>) -> Leaf {
    let key = KeyPair::generate().expect("key");
    let cert = match issuer {
        Some(i) => params.signed_by(&key, i).expect("sign"),
        None => params.self_signed(&key).expect("self-sign"),
    };
    Leaf {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        cert_der: cert.der().clone(),
        key_der: key.serialize_der(),
    }
}

impl Pki {
    pub fn new(dir: &std::path::Path) -> Pki {
        let ca_key = KeyPair::generate().expect("ca key");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "meshlb test CA");
        let ca_cert = ca_params.self_signed(&ca_key).expect("ca cert");
        let issuer = Issuer::new(ca_params, ca_key);
        let ca_file = dir.join("ca.pem");
        std::fs::write(&ca_file, ca_cert.pem()).expect("write ca");
        let mut expired = leaf_params(&["localhost"]);
        expired.not_before = rcgen::date_time_ymd(2001, 1, 1);
        expired.not_after = rcgen::date_time_ymd(2002, 1, 1);
        Pki {
            ca_file,
            valid: leaf(leaf_params(&["localhost", "good.example"]), Some(&issuer)),
            self_signed: leaf(leaf_params(&["localhost"]), None),
            expired: leaf(expired, Some(&issuer)),
            wrong_name: leaf(
                CertificateParams::new(vec!["other.example".to_string()]).expect("params"),
                Some(&issuer),
            ),
        }
    }
}
