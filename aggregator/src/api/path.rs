//! Which API resource a request path names. Paths are Cloudflare's (`/client/v4` optional):
//! monitors, monitor groups and pools under `/accounts/{account}/load_balancers/` (or
//! `/user/load_balancers/`), load balancers under `/zones/{zone}/load_balancers`, the events
//! under `/user/load_balancing_analytics/events`; plus meshlb's `/config` and
//! `/config/document`. meshlb is one account: the account id in a path is not checked.

use lb_core::config::document::Kind;

/// What a path names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Every resource of a kind; for load balancers, the zone of the path.
    Collection { kind: Kind, zone: Option<String> },
    /// One resource.
    Item { kind: Kind, id: String },
    /// `GET /pools/{id}/health`.
    PoolHealth { id: String },
    /// `GET /monitors/{id}/references` (and of monitor groups and pools): what names the
    /// resource, and what it names.
    References { kind: Kind, id: String },
    /// `POST /monitors/{id}/preview` and `POST /pools/{id}/preview`: a monitor body tried by
    /// the mesh's probers on the pools that use monitor `id`, or on pool `id`.
    Preview { kind: Kind, id: String },
    /// `GET /preview/{id}`: what the probers saw of a preview.
    PreviewResult { id: String },
    /// `GET /search`: resources by a query term, with their references.
    Search,
    /// `GET /regions` and `GET /regions/{region}`: the regions and their countries.
    Regions { region: Option<String> },
    /// `GET /user/load_balancing_analytics/events`.
    Events,
    /// `GET /config`: the generation in force, the primary, what was refused.
    Config,
    /// `GET|PUT /config/document`: the whole document as TOML.
    Document,
}

/// Every route with its methods, as docs/api.md lists them (`api_doc_tests.rs` checks both
/// ways: each routes here, each is documented).
pub const ROUTES: &[(&str, &str)] = &[
    ("GET, POST", "/accounts/{account}/load_balancers/monitors"),
    (
        "GET, PUT, PATCH, DELETE",
        "/accounts/{account}/load_balancers/monitors/{id}",
    ),
    (
        "GET, POST",
        "/accounts/{account}/load_balancers/monitor_groups",
    ),
    (
        "GET, PUT, PATCH, DELETE",
        "/accounts/{account}/load_balancers/monitor_groups/{id}",
    ),
    (
        "GET, POST, PATCH",
        "/accounts/{account}/load_balancers/pools",
    ),
    (
        "GET, PUT, PATCH, DELETE",
        "/accounts/{account}/load_balancers/pools/{id}",
    ),
    (
        "GET",
        "/accounts/{account}/load_balancers/pools/{id}/health",
    ),
    (
        "GET",
        "/accounts/{account}/load_balancers/monitors/{id}/references",
    ),
    (
        "GET",
        "/accounts/{account}/load_balancers/monitor_groups/{id}/references",
    ),
    (
        "GET",
        "/accounts/{account}/load_balancers/pools/{id}/references",
    ),
    (
        "POST",
        "/accounts/{account}/load_balancers/monitors/{id}/preview",
    ),
    (
        "POST",
        "/accounts/{account}/load_balancers/pools/{id}/preview",
    ),
    ("GET", "/accounts/{account}/load_balancers/preview/{id}"),
    ("GET", "/accounts/{account}/load_balancers/search"),
    ("GET", "/accounts/{account}/load_balancers/regions"),
    ("GET", "/accounts/{account}/load_balancers/regions/{id}"),
    ("GET, POST, PATCH", "/user/load_balancers/pools"),
    ("GET, POST", "/zones/{zone}/load_balancers"),
    (
        "GET, PUT, PATCH, DELETE",
        "/zones/{zone}/load_balancers/{id}",
    ),
    ("GET", "/user/load_balancing_analytics/events"),
    ("GET", "/config"),
    ("GET, PUT", "/config/document"),
];

/// The prefix a Cloudflare client puts before every path.
pub const CLOUDFLARE_BASE: &str = "/client/v4";

/// Whether `path` is under the API (Cloudflare's prefix, or one of its top-level
/// collections), so that a path it does not serve is answered in the API's envelope.
pub fn is_api_path(path: &str) -> bool {
    path.starts_with(CLOUDFLARE_BASE)
        || ["/accounts/", "/zones/", "/user/"]
            .iter()
            .any(|prefix| path.starts_with(prefix))
}

/// What the API serves, in one line: for the message of a path it does not serve.
pub fn served() -> String {
    ROUTES
        .iter()
        .map(|(methods, path)| format!("{methods} {path}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The route of `path`, when it is an API path.
pub fn route(path: &str) -> Option<Route> {
    let path = path.strip_prefix(CLOUDFLARE_BASE).unwrap_or(path);
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    if segments.iter().any(|s| s.is_empty()) {
        return None;
    }
    let decoded: Vec<String> = segments
        .iter()
        .map(|s| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .into_owned()
        })
        .collect();
    let s: Vec<&str> = decoded.iter().map(String::as_str).collect();
    let account_kind = |k: &str| match k {
        "monitors" => Some(Kind::Monitor),
        "monitor_groups" => Some(Kind::MonitorGroup),
        "pools" => Some(Kind::Pool),
        _ => None,
    };
    match s.as_slice() {
        ["config"] => Some(Route::Config),
        ["config", "document"] => Some(Route::Document),
        ["user", "load_balancing_analytics", "events"] => Some(Route::Events),
        ["zones", zone, "load_balancers"] => Some(Route::Collection {
            kind: Kind::LoadBalancer,
            zone: Some((*zone).to_string()),
        }),
        ["zones", _, "load_balancers", id] => Some(Route::Item {
            kind: Kind::LoadBalancer,
            id: (*id).to_string(),
        }),
        ["accounts", _, "load_balancers", rest @ ..] | ["user", "load_balancers", rest @ ..] => {
            match rest {
                ["search"] => Some(Route::Search),
                ["regions"] => Some(Route::Regions { region: None }),
                ["regions", region] => Some(Route::Regions {
                    region: Some((*region).to_string()),
                }),
                ["preview", id] => Some(Route::PreviewResult {
                    id: (*id).to_string(),
                }),
                [kind @ ("monitors" | "pools"), id, "preview"] => Some(Route::Preview {
                    kind: account_kind(kind)?,
                    id: (*id).to_string(),
                }),
                [kind] => Some(Route::Collection {
                    kind: account_kind(kind)?,
                    zone: None,
                }),
                [kind, id] => Some(Route::Item {
                    kind: account_kind(kind)?,
                    id: (*id).to_string(),
                }),
                ["pools", id, "health"] => Some(Route::PoolHealth {
                    id: (*id).to_string(),
                }),
                [kind, id, "references"] => Some(Route::References {
                    kind: account_kind(kind)?,
                    id: (*id).to_string(),
                }),
                _ => None,
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod api_path_tests {
    use super::*;

    #[test]
    fn cloudflare_paths_are_api_paths_and_the_admin_endpoints_are_not() {
        for p in [
            "/client/v4/accounts/a/load_balancers/monitors/m/preview",
            "/accounts/a/load_balancers/search",
            "/zones/z/load_balancers/x/y",
            "/user/load_balancers/pools/p/references",
        ] {
            assert!(is_api_path(p), "{p}");
        }
        for p in ["/status", "/drain", "/-/reload", "/metrics", "/config"] {
            assert!(!is_api_path(p), "{p}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cloudflare_paths_with_or_without_the_base() {
        let pools = Some(Route::Collection {
            kind: Kind::Pool,
            zone: None,
        });
        assert_eq!(route("/client/v4/accounts/abc/load_balancers/pools"), pools);
        assert_eq!(route("/accounts/abc/load_balancers/pools/"), pools);
        assert_eq!(route("/user/load_balancers/pools"), pools);
        assert_eq!(
            route("/accounts/a/load_balancers/monitors/0123"),
            Some(Route::Item {
                kind: Kind::Monitor,
                id: "0123".into()
            })
        );
        assert_eq!(
            route("/accounts/a/load_balancers/pools/eu%20west/health"),
            Some(Route::PoolHealth {
                id: "eu west".into()
            })
        );
        assert_eq!(
            route("/zones/example.com/load_balancers/www.example.com"),
            Some(Route::Item {
                kind: Kind::LoadBalancer,
                id: "www.example.com".into()
            })
        );
        assert_eq!(
            route("/client/v4/user/load_balancing_analytics/events"),
            Some(Route::Events)
        );
        assert_eq!(route("/config/document"), Some(Route::Document));
    }

    #[test]
    fn every_listed_route_routes() {
        for (_, template) in ROUTES {
            let path = template
                .replace("{account}", "023e105f4ecef8ad9ca31a8372d0c353")
                .replace("{zone}", "example.com")
                .replace("{id}", "x");
            assert!(route(&path).is_some(), "{template}");
        }
    }

    #[test]
    fn anything_else_is_not_the_api() {
        for p in [
            "/status",
            "/",
            "/accounts/a/load_balancers/zebras",
            "/accounts/a/load_balancers/monitors/x/health",
            "/accounts//load_balancers/pools",
            "/zones/z/load_balancers/a/b",
        ] {
            assert_eq!(route(p), None, "{p}");
        }
    }
}
