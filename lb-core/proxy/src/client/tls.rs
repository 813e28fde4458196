//! TLS termination: certificates from PEM files, the one valid for the client's SNI name
//! chosen per handshake (the first is the default when none matches or no SNI is sent).

use std::path::PathBuf;
use std::sync::Arc;

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::ServerName;

#[derive(Debug)]
pub struct Certificates {
    keys: Vec<Arc<CertifiedKey>>,
}

/// Why the certificates for TLS termination cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CertificateError {
    /// A file that cannot be read or holds no usable certificate or key, named.
    #[error(transparent)]
    Files(#[from] lb_tls::TlsError),
    #[error("no certificate given")]
    NoneGiven,
    #[error(transparent)]
    Tls(#[from] rustls::Error),
}

impl Certificates {
    /// Loads (certificate chain, private key) PEM file pairs.
    pub fn load(pairs: &[(PathBuf, PathBuf)]) -> Result<Certificates, CertificateError> {
        let mut keys = Vec::new();
        for (cert, key) in pairs {
            keys.push(lb_tls::pem::certified_key(cert, key)?);
        }
        if keys.is_empty() {
            return Err(CertificateError::NoneGiven);
        }
        Ok(Certificates { keys })
    }

    /// A rustls server configuration offering HTTP/2 and HTTP/1.1.
    pub fn server_config(self) -> Result<Arc<rustls::ServerConfig>, CertificateError> {
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(self));
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

impl ResolvesServerCert for Certificates {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let wanted = hello
            .server_name()
            .and_then(|n| ServerName::try_from(n.to_string()).ok());
        if let Some(name) = wanted {
            for key in &self.keys {
                let valid = key.cert.first().is_some_and(|der| {
                    webpki::EndEntityCert::try_from(der)
                        .is_ok_and(|ee| ee.verify_is_valid_for_subject_name(&name).is_ok())
                });
                if valid {
                    return Some(Arc::clone(key));
                }
            }
        }
        self.keys.first().cloned()
    }
}
