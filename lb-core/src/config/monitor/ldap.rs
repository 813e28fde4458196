//! The ldap monitor type: its settings (ldap or ldaps, a DN bind with its secret, a search),
//! their defaults (port 389, 636 for ldaps) and their validation from the monitor's fields.
//! The probe is `prober/src/monitors/ldap.rs`.

use super::SecretSource;
use crate::config::raw::RawMonitor;
use crate::config::validate::Validator;

/// LDAP monitor settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LdapCheck {
    pub port: u16,
    /// ldaps:// (TLS from the first byte) rather than ldap://.
    pub tls: bool,
    /// DN bind; `None` binds anonymously.
    pub bind: Option<(String, SecretSource)>,
    /// Base-object search of this DN must succeed too.
    pub search_dn: Option<String>,
    /// Accept any certificate (ldaps).
    pub allow_insecure: bool,
    pub ca_file: Option<std::path::PathBuf>,
}

crate::choice! {
    /// An LDAP monitor's `scheme`: `ldaps` speaks TLS from the first byte.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum LdapScheme {
        Ldap => "ldap",
        Ldaps => "ldaps",
    }
}

impl Validator<'_> {
    /// An ldap monitor's settings from its fields, each error reported.
    pub(in crate::config) fn ldap_check(
        &mut self,
        path: &str,
        m: &RawMonitor,
        port: u16,
    ) -> LdapCheck {
        let lpath = format!("{path}.ldap");
        let (tls, bind, search_dn) = match &m.ldap {
            None => (false, None, None),
            Some(l) => {
                let scheme = self.choice(
                    format!("{lpath}.scheme"),
                    "scheme",
                    &l.scheme,
                    LdapScheme::Ldap,
                );
                let tls = scheme == LdapScheme::Ldaps;
                let secret = match (&l.password_file, &l.password_env) {
                    (Some(f), None) => Some(SecretSource::File(f.into())),
                    (None, Some(e)) => Some(SecretSource::Env(e.clone())),
                    (None, None) => None,
                    (Some(_), Some(_)) => {
                        self.sink
                            .push(&lpath, "give password_file or password_env, not both");
                        None
                    }
                };
                let bind = match (&l.bind_dn, secret) {
                    (Some(dn), Some(secret)) => Some((dn.clone(), secret)),
                    (None, None) => None,
                    (Some(_), None) => {
                        self.sink.push(format!("{lpath}.bind_dn"), "a DN bind needs password_file or password_env (passwords never sit in the config)");
                        None
                    }
                    (None, Some(_)) => {
                        self.sink.push(format!("{lpath}.bind_dn"), "a password without bind_dn: set the DN, or drop the password for an anonymous bind");
                        None
                    }
                };
                (tls, bind, l.search_dn.clone())
            }
        };
        LdapCheck {
            port,
            tls,
            bind,
            search_dn,
            allow_insecure: m.allow_insecure,
            ca_file: m.ca_file.as_ref().map(Into::into),
        }
    }
}
