//! Where the config store is and how to reach it: `--config-store
//! etcd://HOST:PORT[,HOST:PORT...]/PREFIX` (plain HTTP to etcd's JSON gateway) or `etcds://`
//! (HTTPS, with `--config-store-ca` and, for client-certificate authentication,
//! `--config-store-cert`), with etcd's user and password when its auth is on.

use std::path::PathBuf;
use std::time::Duration;

/// A `--config-store` value that is not a store address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "--config-store {given}: {why} (etcd://HOST:PORT[,HOST:PORT...]/PREFIX, or etcds:// over TLS)"
)]
pub struct BadStoreUrl {
    pub given: String,
    pub why: &'static str,
}

/// The parsed address of the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreUrl {
    /// `http://host:port` or `https://host:port`, one per member, in the order given.
    pub endpoints: Vec<String>,
    /// The key prefix everything of this mesh lives under, without a trailing slash.
    pub prefix: String,
}

impl std::str::FromStr for StoreUrl {
    type Err = BadStoreUrl;

    fn from_str(given: &str) -> Result<StoreUrl, BadStoreUrl> {
        let bad = |why| BadStoreUrl {
            given: given.to_string(),
            why,
        };
        let (scheme, rest) = if let Some(r) = given.strip_prefix("etcd://") {
            ("http", r)
        } else if let Some(r) = given.strip_prefix("etcds://") {
            ("https", r)
        } else {
            return Err(bad("the scheme is etcd:// or etcds://"));
        };
        let (hosts, prefix) = rest
            .split_once('/')
            .ok_or_else(|| bad("no /PREFIX after the members"))?;
        let prefix = prefix.trim_end_matches('/');
        if prefix.is_empty() || prefix.contains("//") {
            return Err(bad("the prefix is empty or has an empty segment"));
        }
        let endpoints: Vec<String> = hosts
            .split(',')
            .map(|h| h.trim())
            .filter(|h| !h.is_empty())
            .map(|h| format!("{scheme}://{h}"))
            .collect();
        if endpoints.is_empty() {
            return Err(bad("no member HOST:PORT"));
        }
        for e in &endpoints {
            let host = e.split("://").nth(1).unwrap_or("");
            if !host
                .rsplit_once(':')
                .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok())
            {
                return Err(bad("a member is not HOST:PORT"));
            }
        }
        Ok(StoreUrl {
            endpoints,
            prefix: format!("/{}", prefix.trim_start_matches('/')),
        })
    }
}

/// Everything a node needs to use the store.
#[derive(Debug, Clone)]
pub struct StoreSettings {
    pub url: StoreUrl,
    /// TLS towards etcd (`etcds://`): its CA and a client certificate.
    pub tls: lb_tls::ClientTrust,
    /// etcd's user and the file holding its password, when etcd's auth is on.
    pub user: Option<(String, PathBuf)>,
    /// The longest one request to a member may take (`--config-store-timeout-ms`).
    pub request_timeout: Duration,
}

/// What a request to a member may take by default.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_url_names_members_and_a_prefix() {
        let u: StoreUrl = "etcd://127.0.0.1:2379,127.0.0.1:2479/meshlb/prod/"
            .parse()
            .expect("url");
        assert_eq!(
            u.endpoints,
            ["http://127.0.0.1:2379", "http://127.0.0.1:2479"]
        );
        assert_eq!(u.prefix, "/meshlb/prod");
        let tls: StoreUrl = "etcds://etcd.example:2379/m".parse().expect("url");
        assert_eq!(tls.endpoints, ["https://etcd.example:2379"]);
        for bad in [
            "http://127.0.0.1:2379/m",
            "etcd://127.0.0.1:2379",
            "etcd://127.0.0.1:2379/",
            "etcd:///m",
            "etcd://127.0.0.1/m",
            "etcd://a:b/m",
        ] {
            assert!(bad.parse::<StoreUrl>().is_err(), "{bad}");
        }
    }
}
