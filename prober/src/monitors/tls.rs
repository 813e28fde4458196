//! TLS for https and ldaps monitors: the client settings live in `lb-tls` (the proxy uses them
//! too); here, the words for a failed handshake.

pub(crate) use lb_tls::{client_config, host_without_port, server_name};

use crate::failure::Failure;

/// Words for a handshake failure, in the shape of Cloudflare's reasons.
pub(crate) fn reason(e: &std::io::Error) -> Failure {
    let text = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .map(|tls| match tls {
            rustls::Error::InvalidCertificate(c) => {
                use rustls::CertificateError::*;
                match c {
                    Expired | ExpiredContext { .. } => "certificate expired".to_string(),
                    NotValidYet | NotValidYetContext { .. } => {
                        "certificate not yet valid".to_string()
                    }
                    UnknownIssuer => "unknown issuer (self-signed or untrusted CA)".to_string(),
                    NotValidForName | NotValidForNameContext { .. } => {
                        "certificate not valid for the host name".to_string()
                    }
                    BadSignature => "bad certificate signature".to_string(),
                    other => format!("invalid certificate: {other:?}"),
                }
            }
            other => other.to_string(),
        })
        .unwrap_or_else(|| Failure::from_io(e).to_string());
    Failure::Tls(text)
}
