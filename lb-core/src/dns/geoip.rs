//! Where an address is: the config's CIDR table first (the operator's own knowledge), then a
//! MaxMind-format database when one is configured. Returns the location and the prefix length
//! of the network that decided, which becomes the EDNS Client Subnet scope (RFC 7871).

use std::net::IpAddr;

use maxminddb::{geoip2, Reader};

use crate::config::Geolocation;
use crate::geo::Coordinates;
use crate::regions_table::CountryCode;
use crate::request::Location;

pub struct Geolocator {
    table: Geolocation,
    database: Option<Reader<Vec<u8>>>,
}

impl std::fmt::Debug for Geolocator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Geolocator")
            .field("networks", &self.table.networks.len())
            .field("database", &self.database.is_some())
            .finish()
    }
}

impl Geolocator {
    /// Opens the configured database, if any.
    pub fn new(table: &Geolocation) -> Result<Geolocator, String> {
        let database = match &table.database {
            Some(path) => Some(Reader::open_readfile(path).map_err(|e| {
                format!("geolocation.database: cannot open {}: {e}", path.display())
            })?),
            None => None,
        };
        Ok(Geolocator {
            table: table.clone(),
            database,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.table.networks.is_empty() && self.database.is_none()
    }

    /// The location of `ip` and the prefix length that decided it.
    pub fn locate(&self, ip: IpAddr) -> Option<(Location, u8)> {
        if let Some(n) = self.table.networks.iter().find(|n| n.net.contains(&ip)) {
            return Some((n.location, n.net.prefix_len()));
        }
        let db = self.database.as_ref()?;
        let (city, prefix) = db.lookup_prefix::<geoip2::City>(ip).ok()?;
        let city = city?;
        let country = city
            .country
            .and_then(|c| c.iso_code)
            .and_then(|c| c.parse::<CountryCode>().ok());
        let coordinates = city.location.and_then(|l| match (l.latitude, l.longitude) {
            (Some(latitude), Some(longitude)) => Some(Coordinates {
                latitude,
                longitude,
            }),
            _ => None,
        });
        if country.is_none() && coordinates.is_none() {
            return None;
        }
        // An IPv4 address in an IPv6 database is found under ::/96; report its IPv4 prefix.
        let prefix = if ip.is_ipv4() && prefix > 32 {
            prefix.saturating_sub(96)
        } else {
            prefix
        };
        let prefix = u8::try_from(prefix).unwrap_or(0);
        Some((
            Location {
                country,
                region: None,
                coordinates,
            },
            prefix,
        ))
    }
}
