//! A throw-away public key infrastructure for TLS servers in tests: a fresh CA, a certificate
//! it signs for the names a server answers to, and the server's rustls configuration.

use std::path::Path;
use std::sync::Arc;

/// A rustls server configuration with a certificate for `names` (DNS names or IP addresses)
/// signed by a fresh CA, whose PEM is written to `ca_file` for the clients to trust.
pub fn server_signed_by_test_ca(names: &[&str], ca_file: &Path) -> Arc<rustls::ServerConfig> {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
    let mut ca_params = CertificateParams::new(Vec::new()).expect("ca params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "meshlb test CA");
    let issuer =
        CertifiedIssuer::self_signed(ca_params, KeyPair::generate().expect("key")).expect("ca");
    let key = KeyPair::generate().expect("key");
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let mut params = CertificateParams::new(names).expect("params");
    params
        .distinguished_name
        .push(DnType::CommonName, "meshlb test server");
    let cert = params.signed_by(&key, &issuer).expect("cert");
    std::fs::write(ca_file, issuer.pem()).expect("ca file");
    let key = rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).expect("key");
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_no_client_auth()
    .with_single_cert(vec![cert.der().clone()], key)
    .expect("server config");
    Arc::new(config)
}
