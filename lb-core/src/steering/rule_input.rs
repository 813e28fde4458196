//! The view of a request that custom-rule conditions evaluate, borrowed without copying.

use crate::config::LoadBalancer;
use crate::request::RequestContext;
use crate::rules::RuleInput;

pub(super) fn build<'a>(lb: &'a LoadBalancer, ctx: &'a RequestContext<'a>) -> RuleInput<'a> {
    let mut input = RuleInput {
        client_ip: ctx.client_ip,
        country: country_str(ctx),
        pop_region: Some(ctx.pop.region.code()),
        lb_name: Some(&lb.name),
        ..RuleInput::default()
    };
    if let Some(http) = &ctx.http {
        input.method = Some(http.method);
        input.host = Some(http.host);
        input.path = Some(http.path);
        input.query = Some(http.query);
        input.headers = http.headers;
        input.cookies = http.cookies;
        input.tls = Some(http.tls);
    }
    if let Some(dns) = &ctx.dns {
        input.dns_qname = Some(dns.qname);
        input.dns_qtype = Some(dns.qtype);
    }
    input
}

/// The client's country: the ECS's geolocation first, then the client address's.
fn country_str<'a>(ctx: &'a RequestContext<'a>) -> Option<&'a str> {
    if let Some((_, loc)) = &ctx.ecs {
        if let Some(c) = &loc.country {
            return Some(c.as_str());
        }
    }
    ctx.client_location
        .as_ref()
        .and_then(|l| l.country.as_ref())
        .map(|c| c.as_str())
}
