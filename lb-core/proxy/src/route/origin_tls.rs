//! The TLS settings a proxy uses towards each load balancer's origins. A reload keeps the
//! previous generation's settings wherever nothing they are made of changed (the mode, the CA
//! file's path and its bytes): pooled TLS connections to origins are keyed by these settings
//! (`origin/pool.rs`), so they stay in use across a reload instead of being replaced by fresh
//! handshakes while the old ones sit idle.

use std::sync::Arc;

use lb_core::config::{Config, OriginTls, OriginTlsSettings};

use super::proxy::ProxyConfigError;

/// One load balancer's TLS towards its origins, with what it was built from.
pub(crate) struct OriginTlsConfig {
    settings: OriginTlsSettings,
    /// The CA file's bytes when it was read.
    ca_pem: Option<Vec<u8>>,
    /// The client certificate's and key's bytes when they were read.
    client_pem: Option<(Vec<u8>, Vec<u8>)>,
    pub(crate) client: Arc<rustls::ClientConfig>,
}

/// The settings of every load balancer of `config` (`None`: plain HTTP to its origins),
/// reusing those of `before` (the previous config and its settings) that are unchanged.
pub(super) fn for_load_balancers(
    config: &Config,
    before: Option<(&Config, &[Option<OriginTlsConfig>])>,
) -> Result<Vec<Option<OriginTlsConfig>>, ProxyConfigError> {
    let mut out = Vec::with_capacity(config.load_balancers.len());
    for lb in &config.load_balancers {
        if lb.origin_tls == OriginTls::Off {
            out.push(None);
            continue;
        }
        let settings = lb.origin_tls_settings();
        let ca_pem = match &lb.origin_ca_file {
            Some(path) => std::fs::read(path).ok(),
            None => None,
        };
        let client_pem = settings
            .client_cert
            .as_ref()
            .and_then(|c| Some((std::fs::read(&c.cert).ok()?, std::fs::read(&c.key).ok()?)));
        let previous = before.and_then(|(old, settings)| {
            let id = old.load_balancer_id(&lb.name)?;
            settings.get(id.0)?.as_ref()
        });
        let same = |p: &&OriginTlsConfig| {
            p.settings == settings
                && p.ca_pem == ca_pem
                && p.client_pem == client_pem
                && (lb.origin_ca_file.is_none() || ca_pem.is_some())
                && (settings.client_cert.is_none() || client_pem.is_some())
        };
        let client = match previous.filter(same) {
            Some(p) => Arc::clone(&p.client),
            None => lb_tls::client_config_with(
                settings.accepts_any_certificate(),
                settings.trust_anchors(),
                settings.identity(),
            )
            .map_err(|error| ProxyConfigError::OriginCa {
                load_balancer: lb.name.clone(),
                error,
            })?,
        };
        out.push(Some(OriginTlsConfig {
            settings,
            ca_pem,
            client_pem,
            client,
        }));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lb_core::RegionsTable;

    fn config(lbs: &str) -> Config {
        let text = format!(
            "[[pools]]\nname = \"p\"\norigins = [{{ name = \"a\", address = \"127.0.0.1\" }}]\n{lbs}"
        );
        Config::parse("t.toml", &text, &RegionsTable::embedded().expect("regions"))
            .expect("config parses")
    }

    fn lb(name: &str, tls: &str) -> String {
        format!("[[load_balancers]]\nname = \"{name}\"\nproxied = true\ndefault_pools = [\"p\"]\n{tls}\n")
    }

    #[test]
    fn unchanged_settings_are_kept_across_a_reload_and_changed_ones_rebuilt() {
        let dir = tempfile::tempdir().expect("dir");
        let ca = dir.path().join("ca.pem");
        let pem = rcgen::generate_simple_self_signed(vec!["origin.test".into()])
            .expect("certificate")
            .cert
            .pem();
        std::fs::write(&ca, &pem).expect("ca");
        let strict = format!(
            "origin_tls = \"strict\"\norigin_ca_file = \"{}\"",
            ca.display()
        );
        let old = config(
            &(lb("full.test", "origin_tls = \"full\"")
                + &lb("strict.test", &strict)
                + &lb("plain.test", "")),
        );
        let first = for_load_balancers(&old, None).expect("settings");
        assert!(first[2].is_none(), "plain HTTP has none");
        // Reordered, one more: the same settings by name.
        let new = config(
            &(lb("new.test", "origin_tls = \"full\"")
                + &lb("strict.test", &strict)
                + &lb("full.test", "origin_tls = \"full\"")),
        );
        let second = for_load_balancers(&new, Some((&old, &first))).expect("settings");
        let client = |v: &[Option<OriginTlsConfig>], i: usize| {
            Arc::clone(&v[i].as_ref().expect("tls").client)
        };
        assert!(
            Arc::ptr_eq(&client(&second, 2), &client(&first, 0)),
            "full kept"
        );
        assert!(
            Arc::ptr_eq(&client(&second, 1), &client(&first, 1)),
            "strict kept"
        );
        assert!(
            !Arc::ptr_eq(&client(&second, 0), &client(&first, 0)),
            "a new load balancer gets its own"
        );
        // The CA file's content changed under the same path: rebuilt.
        let other = rcgen::generate_simple_self_signed(vec!["other.test".into()])
            .expect("certificate")
            .cert
            .pem();
        std::fs::write(&ca, other).expect("ca");
        let third = for_load_balancers(&new, Some((&new, &second))).expect("settings");
        assert!(
            !Arc::ptr_eq(&client(&third, 1), &client(&second, 1)),
            "a new CA is read"
        );
        assert!(Arc::ptr_eq(&client(&third, 2), &client(&second, 2)));
    }
}
