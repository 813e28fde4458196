//! LDAP (meshlb's own; Cloudflare has none) with ldap3: connect over ldap:// or ldaps://,
//! bind anonymously or as a DN (password from a file or the environment, never the config),
//! optionally search one DN at base scope. Result code 0 at every step passes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use lb_core::config::LdapCheck;
use ldap3::{LdapConnAsync, LdapConnSettings, Scope};

use super::{socket_addr, tls, Check};
use crate::failure::{Failure, SetupError};
use crate::outcome::Attempt;
use crate::target::ProbeTarget;

pub(super) struct LdapMonitor {
    check: LdapCheck,
    tls: Option<Arc<rustls::ClientConfig>>,
}

impl LdapMonitor {
    pub(super) fn new(check: &LdapCheck) -> Result<Self, SetupError> {
        let tls = if check.tls {
            Some(tls::client_config(
                check.allow_insecure,
                check.ca_file.as_deref(),
            )?)
        } else {
            None
        };
        Ok(LdapMonitor {
            check: check.clone(),
            tls,
        })
    }
}

impl Check for LdapMonitor {
    fn attempt<'a>(&'a self, target: &'a ProbeTarget, timeout: Duration) -> BoxFuture<'a, Attempt> {
        Box::pin(async move {
            let start = Instant::now();
            match tokio::time::timeout(timeout, self.session(target, timeout)).await {
                Ok(Ok(())) => Attempt::pass(start.elapsed(), Some(0)),
                Ok(Err((code, reason))) => Attempt::fail(start.elapsed(), code, reason),
                Err(_) => Attempt::fail(start.elapsed(), None, Failure::Timeout),
            }
        })
    }
}

impl LdapMonitor {
    async fn session(
        &self,
        target: &ProbeTarget,
        timeout: Duration,
    ) -> Result<(), (Option<u32>, Failure)> {
        let addr = socket_addr(&target.address, target.port)
            .await
            .map_err(|e| (None, e))?;
        let scheme = if self.check.tls { "ldaps" } else { "ldap" };
        // The URL carries the host for TLS name checks; connect to the resolved address.
        let host = match &target.address {
            lb_core::config::Address::Hostname(h) => h.clone(),
            lb_core::config::Address::Ip(ip) if ip.is_ipv6() => format!("[{ip}]"),
            lb_core::config::Address::Ip(ip) => ip.to_string(),
        };
        let url = format!("{scheme}://{host}:{}", addr.port());
        let mut settings = LdapConnSettings::new().set_conn_timeout(timeout);
        if let Some(config) = &self.tls {
            settings = settings
                .set_config(Arc::clone(config))
                .set_no_tls_verify(self.check.allow_insecure);
        }
        let (conn, mut ldap) = LdapConnAsync::with_settings(settings, &url)
            .await
            .map_err(|e| (None, Failure::Ldap(format!("connect: {e}"))))?;
        let driver = tokio::spawn(async move {
            let _ = conn.drive().await;
        });
        let result = async {
            let (dn, password) = match &self.check.bind {
                None => (String::new(), String::new()),
                Some((dn, secret)) => (
                    dn.clone(),
                    secret
                        .read()
                        .map_err(|e| (None, Failure::Ldap(e.to_string())))?,
                ),
            };
            let bound = ldap
                .simple_bind(&dn, &password)
                .await
                .map_err(|e| (None, Failure::Ldap(format!("bind: {e}"))))?;
            if bound.rc != 0 {
                return Err((
                    Some(bound.rc),
                    Failure::Ldap(format!("bind failed: {} ({})", rc_name(bound.rc), bound.rc)),
                ));
            }
            if let Some(search_dn) = &self.check.search_dn {
                let found = ldap
                    .search(search_dn, Scope::Base, "(objectClass=*)", vec!["1.1"])
                    .await
                    .map_err(|e| (None, Failure::Ldap(format!("search: {e}"))))?;
                let rc = found.1.rc;
                if rc != 0 {
                    return Err((
                        Some(rc),
                        Failure::Ldap(format!(
                            "search of {search_dn} failed: {} ({rc})",
                            rc_name(rc)
                        )),
                    ));
                }
            }
            let _ = ldap.unbind().await;
            Ok(())
        }
        .await;
        driver.abort();
        result
    }
}

fn rc_name(rc: u32) -> &'static str {
    match rc {
        32 => "no such object",
        48 => "inappropriate authentication",
        49 => "invalid credentials",
        50 => "insufficient access rights",
        51 => "busy",
        52 => "unavailable",
        53 => "unwilling to perform",
        _ => "error",
    }
}
