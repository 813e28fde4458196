//! meshlb's TLS settings, read from PEM files:
//!
//! - [`client_config`]: https/ldaps monitors and the proxy's connections to origins: the public
//!   web PKI plus an optional CA file, or — with `allow_insecure` (a monitor's
//!   `allow_insecure`, a load balancer's `origin_tls = "full"`) — any certificate at all (the
//!   handshake and its signatures are still checked).
//! - [`ClientTrust`]: the control paths' clients (the CLI, a follower's fetch of the config):
//!   a private CA or a pinned key instead of the web PKI, and a client certificate.
//! - [`server`]: a node's admin listener: certificate, key and client CA, reloadable.
//! - [`pem`]: the files themselves.

pub mod pem;
pub mod pin;
pub mod server;

pub use pin::{BadPin, SpkiPin};
pub use server::{ReloadableServer, ServerFiles};

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};

/// Why TLS client settings could not be made. Each message is whole (it names the error it
/// comes from), so none is also given as a `source`: a chain printed with `{:#}` says it once.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("tls: {0}")]
    Rustls(rustls::Error),
    #[error("ca_file {}: {error}", path.display())]
    CaFileUnreadable {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("ca_file {}: {error}", path.display())]
    CaFileCertificate { path: PathBuf, error: rustls::Error },
    #[error("ca_file {}: no PEM certificate in it", path.display())]
    CaFileEmpty { path: PathBuf },
    #[error("cannot read {}: {error}", path.display())]
    Unreadable {
        path: PathBuf,
        error: std::io::Error,
    },
    /// The file is not what it should hold (`not a PEM private key: ...`).
    #[error("{}: {reason}", path.display())]
    Unusable { path: PathBuf, reason: String },
}

impl TlsError {
    pub(crate) fn unusable(path: &Path, reason: String) -> TlsError {
        TlsError::Unusable {
            path: path.to_path_buf(),
            reason,
        }
    }
}

/// A host that is no TLS server name (neither a DNS name nor an IP address).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a valid server name")]
pub struct InvalidServerName(pub String);

impl From<rustls::Error> for TlsError {
    fn from(e: rustls::Error) -> TlsError {
        TlsError::Rustls(e)
    }
}

pub fn client_config(
    allow_insecure: bool,
    ca_file: Option<&Path>,
) -> Result<Arc<ClientConfig>, TlsError> {
    client_config_with(allow_insecure, ca_file, None)
}

/// `client_config`, presenting `identity` (a certificate chain and its key, PEM files) to
/// servers that ask for a client certificate: the proxy's authenticated origin pulls.
pub fn client_config_with(
    allow_insecure: bool,
    ca_file: Option<&Path>,
    identity: Option<(&Path, &Path)>,
) -> Result<Arc<ClientConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let builder = if allow_insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(pin::KeyCheck {
                pin: None,
                provider,
            }))
    } else {
        let mut roots = RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        if let Some(path) = ca_file {
            for cert in read_pem_certs(path)? {
                roots
                    .add(cert)
                    .map_err(|error| TlsError::CaFileCertificate {
                        path: path.to_path_buf(),
                        error,
                    })?;
            }
        }
        builder.with_root_certificates(roots)
    };
    let config = match identity {
        Some((cert, key)) => with_identity(builder, cert, key)?,
        None => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

fn with_identity(
    builder: rustls::ConfigBuilder<ClientConfig, rustls::client::WantsClientCert>,
    cert: &Path,
    key: &Path,
) -> Result<ClientConfig, TlsError> {
    builder
        .with_client_auth_cert(pem::certificates(cert)?, pem::private_key(key)?)
        .map_err(|e| TlsError::unusable(key, format!("not the key of {}: {e}", cert.display())))
}

/// Whom a control-path client (the CLI, a follower fetching the config) trusts and what it
/// presents.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientTrust {
    /// Trust this CA (PEM) alone instead of the public web PKI (curl's `--cacert`).
    pub ca_file: Option<PathBuf>,
    /// Trust exactly the server key pinned, whatever signed its certificate (curl's
    /// `--pinnedpubkey`); takes the place of `ca_file` and the web PKI.
    pub pin: Option<SpkiPin>,
    /// A client certificate chain and its key (PEM), for servers that ask for one.
    pub identity: Option<(PathBuf, PathBuf)>,
}

impl ClientTrust {
    /// The rustls settings of this trust.
    pub fn config(&self) -> Result<Arc<ClientConfig>, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()?;
        let builder = if let Some(pin) = self.pin {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(pin::KeyCheck {
                    pin: Some(pin),
                    provider,
                }))
        } else if let Some(ca) = &self.ca_file {
            builder.with_root_certificates(pem::roots(ca)?)
        } else {
            let mut roots = RootCertStore::empty();
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            builder.with_root_certificates(roots)
        };
        let config = match &self.identity {
            Some((cert, key)) => with_identity(builder, cert, key)?,
            None => builder.with_no_client_auth(),
        };
        Ok(Arc::new(config))
    }
}

fn read_pem_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let unreadable = |error| TlsError::CaFileUnreadable {
        path: path.to_path_buf(),
        error,
    };
    let data = std::fs::read(path).map_err(unreadable)?;
    let certs: Result<Vec<_>, _> = rustls_pemfile::certs(&mut data.as_slice()).collect();
    let certs = certs.map_err(unreadable)?;
    if certs.is_empty() {
        return Err(TlsError::CaFileEmpty {
            path: path.to_path_buf(),
        });
    }
    Ok(certs)
}

/// The server name to verify and send as SNI: the Host without a port (a DNS name or an IP).
pub fn server_name(host: &str) -> Result<ServerName<'static>, InvalidServerName> {
    ServerName::try_from(host_without_port(host).to_string())
        .map_err(|_| InvalidServerName(host.to_string()))
}

/// `a.example:8443` -> `a.example`, `[2001:db8::1]:443` -> `2001:db8::1`, `2001:db8::1` as is.
pub fn host_without_port(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match host.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') && p.parse::<u16>().is_ok() => h,
        _ => host,
    }
}
