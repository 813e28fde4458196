//! A pinned server key: the SHA-256 of the certificate's SubjectPublicKeyInfo, written as curl's
//! `--pinnedpubkey` takes it (`sha256//BASE64`). A follower that pins its primary's key trusts
//! that key whatever CA signed it, or none: a self-signed primary needs no PKI at all, and a
//! renewed certificate over the same key keeps matching.

use std::sync::Arc;

use base64::Engine;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use sha2::Digest;

/// The SHA-256 of a SubjectPublicKeyInfo.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpkiPin([u8; 32]);

/// A pin that is not `sha256//` and 32 bytes of base64.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a key pin: sha256// and the base64 of the SHA-256 of the key's SubjectPublicKeyInfo, as curl's --pinnedpubkey")]
pub struct BadPin(pub String);

impl std::str::FromStr for SpkiPin {
    type Err = BadPin;

    fn from_str(s: &str) -> Result<SpkiPin, BadPin> {
        let bad = || BadPin(s.to_string());
        let b64 = s.trim().strip_prefix("sha256//").ok_or_else(bad)?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|_| bad())?;
        Ok(SpkiPin(bytes.try_into().map_err(|_| bad())?))
    }
}

impl std::fmt::Display for SpkiPin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let b64 = base64::engine::general_purpose::STANDARD.encode(self.0);
        write!(f, "sha256//{b64}")
    }
}

impl SpkiPin {
    /// The pin of a certificate's key (`None`: not a certificate webpki can read).
    pub fn of_certificate(der: &CertificateDer<'_>) -> Option<SpkiPin> {
        let cert = webpki::EndEntityCert::try_from(der).ok()?;
        let spki = cert.subject_public_key_info();
        Some(SpkiPin(sha2::Sha256::digest(spki.as_ref()).into()))
    }
}

/// A verifier of the key alone: with a pin, exactly the certificate whose key is pinned; without
/// one (`allow_insecure`, `origin_tls = "full"`), any certificate. Either way the handshake's
/// signatures are checked, so the peer holds the private half of the key it showed and the
/// connection is a real TLS one.
#[derive(Debug)]
pub(crate) struct KeyCheck {
    pub(crate) pin: Option<SpkiPin>,
    pub(crate) provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for KeyCheck {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(pinned) = self.pin else {
            return Ok(ServerCertVerified::assertion());
        };
        match SpkiPin::of_certificate(end_entity) {
            Some(pin) if pin == pinned => Ok(ServerCertVerified::assertion()),
            Some(_) => Err(rustls::Error::General(
                "the server's key is not the pinned one".into(),
            )),
            None => Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::BadEncoding,
            )),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pin_reads_back_as_written_and_bad_ones_are_refused() {
        let pin: SpkiPin = format!("sha256//{}", "A".repeat(43) + "=")
            .parse()
            .expect("pin");
        assert_eq!(pin.to_string().parse::<SpkiPin>(), Ok(pin));
        for bad in ["", "sha256//", "sha1//AAAA", "sha256//AAAA", "sha256//!!"] {
            assert!(bad.parse::<SpkiPin>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_certificates_pin_is_that_of_its_key() {
        let key = rcgen::KeyPair::generate().expect("key");
        let a = rcgen::CertificateParams::new(vec!["a.test".into()])
            .expect("params")
            .self_signed(&key)
            .expect("cert");
        let b = rcgen::CertificateParams::new(vec!["b.test".into()])
            .expect("params")
            .self_signed(&key)
            .expect("cert");
        let other = rcgen::generate_simple_self_signed(vec!["a.test".into()]).expect("cert");
        let pin = |c: &rcgen::Certificate| SpkiPin::of_certificate(c.der()).expect("pin");
        assert_eq!(pin(&a), pin(&b), "a renewed certificate over one key");
        assert_ne!(pin(&a), pin(&other.cert));
    }
}
