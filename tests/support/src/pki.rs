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

/// A test CA that issues server and client certificates as PEM files, as an operator's
/// private CA would.
pub struct TestCa {
    issuer: rcgen::CertifiedIssuer<'static, rcgen::KeyPair>,
}

/// A certificate and key written to files, with the pin of its key (`sha256//...`).
#[derive(Debug, Clone)]
pub struct Issued {
    pub cert: std::path::PathBuf,
    pub key: std::path::PathBuf,
    pub pin: String,
}

impl TestCa {
    /// A fresh CA named `name`, its certificate written to `ca_file`.
    pub fn new(name: &str, ca_file: &Path) -> TestCa {
        use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
        let mut params = CertificateParams::new(Vec::new()).expect("ca params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let issuer =
            CertifiedIssuer::self_signed(params, KeyPair::generate().expect("key")).expect("ca");
        std::fs::write(ca_file, issuer.pem()).expect("ca file");
        TestCa { issuer }
    }

    /// A server certificate for `names` (DNS names or IP addresses), written to
    /// `<dir>/<stem>.pem` and `<dir>/<stem>.key` (the key 0600).
    pub fn server(&self, names: &[&str], dir: &Path, stem: &str) -> Issued {
        use rcgen::ExtendedKeyUsagePurpose::ServerAuth;
        self.issue(names, &[ServerAuth], Some(stem), dir, stem)
    }

    /// A client certificate named `stem`, written as `server` writes one.
    pub fn client(&self, dir: &Path, stem: &str) -> Issued {
        use rcgen::ExtendedKeyUsagePurpose::ClientAuth;
        self.issue(&[], &[ClientAuth], Some(stem), dir, stem)
    }

    /// A client certificate whose subject has no CommonName (etcd's gateway refuses one that
    /// has, once its authentication is on), written to `<dir>/<stem>.pem` and `.key`.
    pub fn client_without_common_name(&self, dir: &Path, stem: &str) -> Issued {
        use rcgen::ExtendedKeyUsagePurpose::ClientAuth;
        self.issue(&[], &[ClientAuth], None, dir, stem)
    }

    /// A certificate for a server that is its own client too, as an etcd member is: its gateway
    /// calls its gRPC service with it (`--client-cert-auth` then asks for client use).
    pub fn server_and_client(&self, names: &[&str], dir: &Path, stem: &str) -> Issued {
        use rcgen::ExtendedKeyUsagePurpose::{ClientAuth, ServerAuth};
        self.issue(names, &[ServerAuth, ClientAuth], Some(stem), dir, stem)
    }

    fn issue(
        &self,
        names: &[&str],
        usages: &[rcgen::ExtendedKeyUsagePurpose],
        common_name: Option<&str>,
        dir: &Path,
        stem: &str,
    ) -> Issued {
        use rcgen::{CertificateParams, DnType, KeyPair};
        let key = KeyPair::generate().expect("key");
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names).expect("params");
        params.distinguished_name = rcgen::DistinguishedName::new();
        match common_name {
            Some(cn) => params.distinguished_name.push(DnType::CommonName, cn),
            None => params
                .distinguished_name
                .push(DnType::OrganizationName, "meshlb tests"),
        }
        params.extended_key_usages = usages.to_vec();
        let cert = params.signed_by(&key, &self.issuer).expect("cert");
        let issued = Issued {
            cert: dir.join(format!("{stem}.pem")),
            key: dir.join(format!("{stem}.key")),
            pin: lb_tls::SpkiPin::of_certificate(cert.der())
                .expect("a certificate webpki reads")
                .to_string(),
        };
        std::fs::write(&issued.cert, cert.pem()).expect("cert file");
        std::fs::write(&issued.key, key.serialize_pem()).expect("key file");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&issued.key, std::fs::Permissions::from_mode(0o600))
            .expect("chmod");
        issued
    }
}
