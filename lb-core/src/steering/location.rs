//! Where the client is, per `location_strategy` (Cloudflare): the EDNS Client Subnet when
//! `prefer_ecs` allows it for this policy, else the resolver's geolocation in `resolver_ip`
//! mode, else the PoP.

use crate::config::{LocationMode, LocationStrategy, SteeringPolicy};
use crate::geo::Coordinates;
use crate::region::Region;
use crate::regions_table::{CountryCode, RegionsTable};
use crate::request::{Location, RequestContext};

/// Which input located the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LocationSource {
    Ecs,
    Resolver,
    Pop,
}

impl LocationSource {
    /// A short name for logs: `ecs`, `resolver`, `pop`.
    pub fn code(self) -> &'static str {
        match self {
            LocationSource::Ecs => "ecs",
            LocationSource::Resolver => "resolver",
            LocationSource::Pop => "pop",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            LocationSource::Ecs => "EDNS client subnet",
            LocationSource::Resolver => "resolver geolocation",
            LocationSource::Pop => "PoP",
        }
    }
}

/// The client's effective location: always a region and coordinates, a country when known.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClientLocation {
    pub region: Region,
    pub country: Option<CountryCode>,
    pub coordinates: Coordinates,
    pub source: LocationSource,
}

/// Where the client of `ctx` is, by `strategy` (and the policy, which `prefer_ecs` may name).
pub fn locate(
    strategy: LocationStrategy,
    policy: SteeringPolicy,
    ctx: &RequestContext<'_>,
    regions: &RegionsTable,
) -> ClientLocation {
    let use_ecs = strategy.prefer_ecs.applies_to(policy);
    let from = |loc: &Location, source| complete(loc, source, regions);
    if use_ecs {
        if let Some(found) = ctx
            .ecs
            .as_ref()
            .and_then(|(_, loc)| from(loc, LocationSource::Ecs))
        {
            return found;
        }
    }
    if strategy.mode == LocationMode::ResolverIp {
        if let Some(found) = ctx
            .client_location
            .as_ref()
            .and_then(|loc| from(loc, LocationSource::Resolver))
        {
            return found;
        }
    }
    ClientLocation {
        region: ctx.pop.region,
        country: ctx.pop.country,
        coordinates: ctx.pop.coordinates,
        source: LocationSource::Pop,
    }
}

/// Fills a partial geolocation: the region from the country, the coordinates from the
/// region's representative point. `None` when not even a region can be told.
fn complete(
    loc: &Location,
    source: LocationSource,
    regions: &RegionsTable,
) -> Option<ClientLocation> {
    let region = loc
        .region
        .or_else(|| loc.country.and_then(|c| regions.country_region(c)))?;
    Some(ClientLocation {
        region,
        country: loc.country,
        coordinates: loc
            .coordinates
            .unwrap_or(regions.region(region).coordinates),
        source,
    })
}
