//! Where an address is: the config's CIDR table first (the operator's own knowledge), then a
//! MaxMind-format database when one is configured. Returns the location and the prefix length
//! of the network that decided, which becomes the EDNS Client Subnet scope (RFC 7871).

use std::net::IpAddr;
use std::path::PathBuf;

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

/// The configured database could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("geolocation.database: cannot open {}: {error}", path.display())]
pub struct GeolocationError {
    pub path: PathBuf,
    error: maxminddb::MaxMindDbError,
}

impl Geolocator {
    /// Opens the configured database, if any.
    pub fn new(table: &Geolocation) -> Result<Geolocator, GeolocationError> {
        let database = match &table.database {
            Some(path) => Some(
                Reader::open_readfile(path).map_err(|error| GeolocationError {
                    path: path.clone(),
                    error,
                })?,
            ),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::GeoNetwork;
    use crate::region::Region;

    fn fixture() -> Geolocation {
        Geolocation {
            database: Some(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/geo-test.mmdb").into()),
            networks: vec![GeoNetwork {
                net: "203.0.113.0/28".parse().unwrap(),
                location: Location {
                    region: Some(Region::Weu),
                    ..Location::default()
                },
            }],
        }
    }

    #[test]
    fn the_table_wins_then_the_database_with_its_prefix() {
        let g = Geolocator::new(&fixture()).expect("fixture opens");
        let (table, prefix) = g.locate("203.0.113.5".parse().unwrap()).unwrap();
        assert_eq!((table.region, prefix), (Some(Region::Weu), 28));
        let (jp, prefix) = g.locate("203.0.113.77".parse().unwrap()).unwrap();
        assert_eq!(jp.country.map(|c| c.to_string()).as_deref(), Some("JP"));
        assert_eq!(prefix, 24, "an IPv4 prefix, not the ::/96-mapped one");
        let c = jp.coordinates.unwrap();
        assert!((c.latitude - 35.68).abs() < 1e-9 && (c.longitude - 139.69).abs() < 1e-9);
        let (br, prefix) = g.locate("198.51.100.9".parse().unwrap()).unwrap();
        assert_eq!(br.country.map(|c| c.to_string()).as_deref(), Some("BR"));
        assert_eq!((br.coordinates, prefix), (None, 25));
        let (de, prefix) = g.locate("2001:db8:42::1".parse().unwrap()).unwrap();
        assert_eq!(de.country.map(|c| c.to_string()).as_deref(), Some("DE"));
        assert_eq!(prefix, 48);
        assert!(g.locate("192.0.2.1".parse().unwrap()).is_none());
    }

    #[test]
    fn a_missing_database_is_a_clear_error() {
        let mut bad = fixture();
        bad.database = Some("/nonexistent/GeoLite2-City.mmdb".into());
        let e = Geolocator::new(&bad).unwrap_err().to_string();
        assert!(
            e.starts_with("geolocation.database: cannot open /nonexistent/GeoLite2-City.mmdb"),
            "{e}"
        );
    }
}
