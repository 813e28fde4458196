//! The API's routes: one line per method and path, each naming its handler (`handlers/`).
//! Paths are Cloudflare's (`/client/v4` optional): monitors, monitor groups and pools under
//! `/accounts/{account}/load_balancers/` (or `/user/load_balancers/`, the same paths at user
//! level), load balancers under `/zones/{zone}/load_balancers`, the events under
//! `/user/load_balancing_analytics/events`; plus meshlb's `/config` and `/config/document`.
//! meshlb is one account: the account id in a path is not checked.
//!
//! Adding a route is one line here and one handler function; the methods a path takes, the
//! list of what the API serves and docs/api.md's route table are all read from [`ROUTES`]
//! (`doc_tests.rs` checks the table against the docs both ways).

use http::Method;
use lb_core::config::document::Kind;

use super::call::Call;
use super::handlers::{config, previews, resources, teamnet, views};
use super::handlers::{Answer, Handler};

/// One method on one path template, and what serves it.
pub struct Route {
    pub method: Method,
    /// Segments are literal or a `{param}` that any segment fills; `{account}` is not checked.
    pub path: &'static str,
    /// The kind of resource the path names, for the handlers shared by every kind.
    pub kind: Option<Kind>,
    pub handler: Handler,
}

/// The `Handler` of an `async fn(Call<'_>) -> Result<Reply, Refusal>`.
macro_rules! handler {
    ($f:path) => {{
        fn boxed(call: Call<'_>) -> Answer<'_> {
            Box::pin($f(call))
        }
        boxed as Handler
    }};
}

macro_rules! routes {
    ($( $method:ident $path:literal $kind:expr => $f:path ;)*) => {
        &[$( Route {
            method: Method::$method,
            path: $path,
            kind: $kind,
            handler: handler!($f),
        } ),*]
    };
}

const MONITOR: Option<Kind> = Some(Kind::Monitor);
const GROUP: Option<Kind> = Some(Kind::MonitorGroup);
const POOL: Option<Kind> = Some(Kind::Pool);
const LB: Option<Kind> = Some(Kind::LoadBalancer);

/// Every route the API serves.
pub static ROUTES: &[Route] = routes! {
    GET "/accounts/{account}/load_balancers/monitors" MONITOR => resources::list;
    POST "/accounts/{account}/load_balancers/monitors" MONITOR => resources::create;
    GET "/accounts/{account}/load_balancers/monitors/{id}" MONITOR => resources::get;
    PUT "/accounts/{account}/load_balancers/monitors/{id}" MONITOR => resources::replace;
    PATCH "/accounts/{account}/load_balancers/monitors/{id}" MONITOR => resources::patch;
    DELETE "/accounts/{account}/load_balancers/monitors/{id}" MONITOR => resources::delete;
    GET "/accounts/{account}/load_balancers/monitor_groups" GROUP => resources::list;
    POST "/accounts/{account}/load_balancers/monitor_groups" GROUP => resources::create;
    GET "/accounts/{account}/load_balancers/monitor_groups/{id}" GROUP => resources::get;
    PUT "/accounts/{account}/load_balancers/monitor_groups/{id}" GROUP => resources::replace;
    PATCH "/accounts/{account}/load_balancers/monitor_groups/{id}" GROUP => resources::patch;
    DELETE "/accounts/{account}/load_balancers/monitor_groups/{id}" GROUP => resources::delete;
    GET "/accounts/{account}/load_balancers/pools" POOL => resources::list;
    POST "/accounts/{account}/load_balancers/pools" POOL => resources::create;
    PATCH "/accounts/{account}/load_balancers/pools" POOL => resources::patch_every_pool;
    GET "/accounts/{account}/load_balancers/pools/{id}" POOL => resources::get;
    PUT "/accounts/{account}/load_balancers/pools/{id}" POOL => resources::replace;
    PATCH "/accounts/{account}/load_balancers/pools/{id}" POOL => resources::patch;
    DELETE "/accounts/{account}/load_balancers/pools/{id}" POOL => resources::delete;
    GET "/accounts/{account}/load_balancers/pools/{id}/health" POOL => views::pool_health;
    GET "/accounts/{account}/load_balancers/monitors/{id}/references" MONITOR => views::references;
    GET "/accounts/{account}/load_balancers/monitor_groups/{id}/references" GROUP => views::references;
    GET "/accounts/{account}/load_balancers/pools/{id}/references" POOL => views::references;
    POST "/accounts/{account}/load_balancers/monitors/{id}/preview" MONITOR => previews::start;
    POST "/accounts/{account}/load_balancers/pools/{id}/preview" POOL => previews::start;
    GET "/accounts/{account}/load_balancers/preview/{id}" None => previews::result;
    GET "/accounts/{account}/load_balancers/search" None => views::search;
    GET "/accounts/{account}/load_balancers/regions" None => views::regions;
    GET "/accounts/{account}/load_balancers/regions/{id}" None => views::regions;
    GET "/zones/{zone}/load_balancers" LB => resources::list;
    POST "/zones/{zone}/load_balancers" LB => resources::create;
    GET "/zones/{zone}/load_balancers/{id}" LB => resources::get;
    PUT "/zones/{zone}/load_balancers/{id}" LB => resources::replace;
    PATCH "/zones/{zone}/load_balancers/{id}" LB => resources::patch;
    DELETE "/zones/{zone}/load_balancers/{id}" LB => resources::delete;
    GET "/user/load_balancing_analytics/events" None => views::events;
    GET "/accounts/{account}/cfd_tunnel" None => teamnet::list_tunnels;
    POST "/accounts/{account}/cfd_tunnel" None => teamnet::create_tunnel;
    GET "/accounts/{account}/cfd_tunnel/{id}" None => teamnet::get_tunnel;
    PATCH "/accounts/{account}/cfd_tunnel/{id}" None => teamnet::patch_tunnel;
    DELETE "/accounts/{account}/cfd_tunnel/{id}" None => teamnet::delete_tunnel;
    GET "/accounts/{account}/cfd_tunnel/{id}/token" None => teamnet::tunnel_token;
    GET "/accounts/{account}/cfd_tunnel/{id}/connections" None => teamnet::tunnel_connections;
    GET "/accounts/{account}/teamnet/virtual_networks" None => teamnet::list_networks;
    POST "/accounts/{account}/teamnet/virtual_networks" None => teamnet::create_network;
    GET "/accounts/{account}/teamnet/virtual_networks/{id}" None => teamnet::get_network;
    PATCH "/accounts/{account}/teamnet/virtual_networks/{id}" None => teamnet::patch_network;
    DELETE "/accounts/{account}/teamnet/virtual_networks/{id}" None => teamnet::delete_network;
    GET "/accounts/{account}/teamnet/routes" None => teamnet::list_routes;
    POST "/accounts/{account}/teamnet/routes" None => teamnet::create_route;
    GET "/accounts/{account}/teamnet/routes/{id}" None => teamnet::get_route;
    PATCH "/accounts/{account}/teamnet/routes/{id}" None => teamnet::patch_route;
    DELETE "/accounts/{account}/teamnet/routes/{id}" None => teamnet::delete_route;
    GET "/config" None => config::state;
    GET "/config/document" None => config::document;
    PUT "/config/document" None => config::replace_document;
};

/// The prefix a Cloudflare client puts before every path.
pub const CLOUDFLARE_BASE: &str = "/client/v4";

/// What a path's `{param}` segments held (percent-decoded).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Params {
    /// The account of the path: not checked (meshlb is one account), only echoed where
    /// Cloudflare echoes it (a tunnel's `account_tag`).
    pub account: Option<String>,
    pub id: Option<String>,
    pub zone: Option<String>,
}

/// The routes of one path: every method it takes, with what its segments held.
#[derive(Debug)]
pub struct Matched {
    pub routes: Vec<&'static Route>,
    pub params: Params,
}

impl std::fmt::Debug for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.method, self.path)
    }
}

impl Matched {
    /// The route for `method`, when the path takes it.
    pub fn for_method(&self, method: &Method) -> Option<&'static Route> {
        self.routes.iter().copied().find(|r| r.method == *method)
    }

    /// The methods the path takes, for a 405's message: `GET, POST or PATCH`.
    pub fn allowed(&self) -> String {
        let methods: Vec<&str> = self.routes.iter().map(|r| r.method.as_str()).collect();
        match methods.split_last() {
            None => String::new(),
            Some((last, [])) => (*last).to_string(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        }
    }
}

/// Whether `path` is under the API (Cloudflare's prefix, or one of its top-level
/// collections), so that a path it does not serve is answered in the API's envelope.
pub fn is_api_path(path: &str) -> bool {
    path.starts_with(CLOUDFLARE_BASE)
        || ["/accounts/", "/zones/", "/user/"]
            .iter()
            .any(|prefix| path.starts_with(prefix))
}

/// The table's paths with their methods, in the table's order: `("GET, POST", path)`, as
/// docs/api.md's route table lists them.
pub fn documented() -> Vec<(String, &'static str)> {
    let mut rows: Vec<(String, &'static str)> = Vec::new();
    for r in ROUTES {
        match rows.iter_mut().find(|(_, p)| *p == r.path) {
            Some((methods, _)) => {
                methods.push_str(", ");
                methods.push_str(r.method.as_str());
            }
            None => rows.push((r.method.as_str().to_string(), r.path)),
        }
    }
    rows
}

/// What the API serves, in one line: for the message of a path it does not serve.
pub fn served() -> String {
    documented()
        .iter()
        .map(|(methods, path)| format!("{methods} {path}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The routes of `path`, when the API serves it with any method.
pub fn find(path: &str) -> Option<Matched> {
    let path = path.strip_prefix(CLOUDFLARE_BASE).unwrap_or(path);
    let raw: Vec<&str> = path.trim_matches('/').split('/').collect();
    if raw.iter().any(|s| s.is_empty()) {
        return None;
    }
    let mut segments: Vec<String> = raw
        .iter()
        .map(|s| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .into_owned()
        })
        .collect();
    // Cloudflare's user-level paths are the account-level ones of the user's account.
    if segments.len() >= 2 && segments[0] == "user" && segments[1] == "load_balancers" {
        segments.splice(0..1, ["accounts".to_string(), String::new()]);
    }
    let mut matched: Option<Matched> = None;
    for route in ROUTES {
        let Some(params) = fill(route.path, &segments) else {
            continue;
        };
        match &mut matched {
            Some(m) => m.routes.push(route),
            None => {
                matched = Some(Matched {
                    routes: vec![route],
                    params,
                })
            }
        }
    }
    matched
}

/// The params of `segments` when they fit `template`.
fn fill(template: &str, segments: &[String]) -> Option<Params> {
    let parts: Vec<&str> = template.trim_matches('/').split('/').collect();
    if parts.len() != segments.len() {
        return None;
    }
    let mut params = Params::default();
    for (part, segment) in parts.iter().zip(segments) {
        match *part {
            "{account}" => params.account = Some(segment.clone()).filter(|a| !a.is_empty()),
            "{id}" => params.id = Some(segment.clone()),
            "{zone}" => params.zone = Some(segment.clone()),
            literal if literal == segment => {}
            _ => return None,
        }
    }
    Some(params)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(path: &str, method: Method) -> Option<(&'static str, Option<Kind>, Params)> {
        let m = find(path)?;
        let r = m.for_method(&method)?;
        Some((r.path, r.kind, m.params))
    }

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

    #[test]
    fn cloudflare_paths_route_with_or_without_the_base_and_at_user_level() {
        let pools = Some((
            "/accounts/{account}/load_balancers/pools",
            Some(Kind::Pool),
            Params {
                account: Some("abc".into()),
                ..Params::default()
            },
        ));
        assert_eq!(
            one("/client/v4/accounts/abc/load_balancers/pools", Method::GET),
            pools
        );
        assert_eq!(
            one("/accounts/abc/load_balancers/pools/", Method::GET),
            pools
        );
        assert_eq!(
            one("/user/load_balancers/pools", Method::GET),
            pools.clone().map(|(p, k, _)| (p, k, Params::default()))
        );
        let id = |account: Option<&str>, s: &str| Params {
            account: account.map(str::to_string),
            id: Some(s.to_string()),
            zone: None,
        };
        assert_eq!(
            one("/user/load_balancers/monitors/0123", Method::DELETE).map(|r| (r.1, r.2)),
            Some((Some(Kind::Monitor), id(None, "0123")))
        );
        assert_eq!(
            one(
                "/accounts/a/load_balancers/pools/eu%20west/health",
                Method::GET
            )
            .map(|r| r.2),
            Some(id(Some("a"), "eu west"))
        );
        assert_eq!(
            one(
                "/zones/example.com/load_balancers/www.example.com",
                Method::PUT
            )
            .map(|r| (r.1, r.2)),
            Some((
                Some(Kind::LoadBalancer),
                Params {
                    account: None,
                    id: Some("www.example.com".into()),
                    zone: Some("example.com".into())
                }
            ))
        );
        assert!(one(
            "/client/v4/user/load_balancing_analytics/events",
            Method::GET
        )
        .is_some());
        assert!(one("/config/document", Method::PUT).is_some());
    }

    #[test]
    fn a_path_names_the_methods_it_takes() {
        let m = find("/accounts/a/load_balancers/pools").expect("routes");
        assert_eq!(m.allowed(), "GET, POST or PATCH");
        assert!(m.for_method(&Method::DELETE).is_none());
        let m = find("/config").expect("routes");
        assert_eq!(m.allowed(), "GET");
    }

    #[test]
    fn every_documented_route_routes_with_each_of_its_methods() {
        for (methods, template) in documented() {
            let path = template
                .replace("{account}", "023e105f4ecef8ad9ca31a8372d0c353")
                .replace("{zone}", "example.com")
                .replace("{id}", "x");
            let m = find(&path).unwrap_or_else(|| panic!("{template}"));
            for method in methods.split(", ") {
                let method: Method = method.parse().expect("a method");
                assert_eq!(
                    m.for_method(&method).map(|r| r.path),
                    Some(template),
                    "{method} {template}"
                );
            }
        }
    }

    #[test]
    fn no_two_routes_share_a_method_and_path() {
        for (i, a) in ROUTES.iter().enumerate() {
            for b in &ROUTES[i + 1..] {
                assert!(a.method != b.method || a.path != b.path, "{a:?} twice");
            }
        }
    }

    #[test]
    fn only_the_views_of_no_resource_kind_route_without_a_kind() {
        // `Call::kind` is read by every handler of a resource; these alone have none.
        let kindless: Vec<&str> = ROUTES
            .iter()
            .filter(|r| r.kind.is_none())
            .map(|r| r.path)
            .collect();
        assert_eq!(
            kindless,
            [
                "/accounts/{account}/load_balancers/preview/{id}",
                "/accounts/{account}/load_balancers/search",
                "/accounts/{account}/load_balancers/regions",
                "/accounts/{account}/load_balancers/regions/{id}",
                "/user/load_balancing_analytics/events",
                "/accounts/{account}/cfd_tunnel",
                "/accounts/{account}/cfd_tunnel",
                "/accounts/{account}/cfd_tunnel/{id}",
                "/accounts/{account}/cfd_tunnel/{id}",
                "/accounts/{account}/cfd_tunnel/{id}",
                "/accounts/{account}/cfd_tunnel/{id}/token",
                "/accounts/{account}/cfd_tunnel/{id}/connections",
                "/accounts/{account}/teamnet/virtual_networks",
                "/accounts/{account}/teamnet/virtual_networks",
                "/accounts/{account}/teamnet/virtual_networks/{id}",
                "/accounts/{account}/teamnet/virtual_networks/{id}",
                "/accounts/{account}/teamnet/virtual_networks/{id}",
                "/accounts/{account}/teamnet/routes",
                "/accounts/{account}/teamnet/routes",
                "/accounts/{account}/teamnet/routes/{id}",
                "/accounts/{account}/teamnet/routes/{id}",
                "/accounts/{account}/teamnet/routes/{id}",
                "/config",
                "/config/document",
                "/config/document",
            ]
        );
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
            "/user/load_balancers",
        ] {
            assert!(find(p).is_none(), "{p}");
        }
    }
}
