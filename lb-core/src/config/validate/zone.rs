//! `[[zones]]` and `[geolocation]`.

use ipnet::IpNet;

use super::{is_hostname, Validator};
use crate::config::load_balancer::LoadBalancer;
use crate::config::raw::{RawGeolocation, RawZone};
use crate::config::zone::{GeoNetwork, Geolocation, Zone};
use crate::region::Region;
use crate::regions_table::CountryCode;
use crate::request::Location;

fn normal(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

impl Validator<'_> {
    pub(super) fn zones(&mut self, raw: &[RawZone], lbs: &[LoadBalancer]) -> Vec<Zone> {
        let mut zones: Vec<Zone> = Vec::new();
        for (i, z) in raw.iter().enumerate() {
            let path = format!("zones[{i}]");
            let name = normal(&z.name);
            if !is_hostname(&name) {
                self.sink.push(
                    format!("{path}.name"),
                    format!("`{}` is not a DNS name", z.name),
                );
                continue;
            }
            if zones.iter().any(|other| other.name == name) {
                self.sink
                    .push(format!("{path}.name"), format!("duplicate zone `{name}`"));
            }
            for (j, ns) in z.nameservers.iter().enumerate() {
                if !is_hostname(ns) {
                    self.sink.push(
                        format!("{path}.nameservers[{j}]"),
                        format!("`{ns}` is not a host name"),
                    );
                }
            }
            if let Some(h) = &z.hostmaster {
                if !is_hostname(h) {
                    self.sink.push(
                        format!("{path}.hostmaster"),
                        format!("`{h}` is not a host name (write the mailbox's @ as a dot)"),
                    );
                }
            }
            if !(1..=604_800).contains(&z.ttl) {
                self.sink.push(
                    format!("{path}.ttl"),
                    format!("must be 1..=604800 seconds (got {})", z.ttl),
                );
            }
            if z.negative_ttl > 86_400 {
                self.sink.push(
                    format!("{path}.negative_ttl"),
                    format!("must be 0..=86400 seconds (got {})", z.negative_ttl),
                );
            }
            let mut zone = Zone::implicit(&name);
            if !z.nameservers.is_empty() {
                zone.nameservers = z.nameservers.iter().map(|n| normal(n)).collect();
            }
            if let Some(h) = &z.hostmaster {
                zone.hostmaster = normal(h);
            }
            zone.ttl = u32::try_from(z.ttl).unwrap_or(u32::MAX);
            zone.negative_ttl = u32::try_from(z.negative_ttl).unwrap_or(u32::MAX);
            zone.serial = z.serial;
            zones.push(zone);
        }
        if !zones.is_empty() {
            for (i, lb) in lbs.iter().enumerate() {
                if !zones.iter().any(|z| z.contains(&lb.name)) {
                    self.sink.push(
                        format!("load_balancers[{i}].name"),
                        format!(
                            "`{}` is inside none of the [[zones]] ({})",
                            lb.name,
                            zones
                                .iter()
                                .map(|z| z.name.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    );
                }
            }
        }
        zones
    }

    pub(super) fn geolocation(&mut self, raw: &RawGeolocation) -> Geolocation {
        let mut networks = Vec::new();
        for (i, n) in raw.networks.iter().enumerate() {
            let path = format!("geolocation.networks[{i}]");
            let net = match n.cidr.parse::<IpNet>() {
                Ok(net) => net.trunc(),
                Err(_) => match n.cidr.parse::<std::net::IpAddr>() {
                    Ok(ip) => IpNet::from(ip),
                    Err(_) => {
                        self.sink.push(
                            format!("{path}.cidr"),
                            format!("`{}` is not an address or CIDR network", n.cidr),
                        );
                        continue;
                    }
                },
            };
            let mut location = Location::default();
            match (&n.country, &n.region) {
                (None, None) => {
                    self.sink
                        .push(path.clone(), "give a `country` or a `region` (or both)");
                    continue;
                }
                (country, region) => {
                    if let Some(c) = country {
                        match c.parse::<CountryCode>() {
                            Ok(code) if self.regions.country_region(code).is_some() => {
                                location.country = Some(code);
                            }
                            _ => self.sink.push(
                                format!("{path}.country"),
                                format!("`{c}` is not a country of regions.toml"),
                            ),
                        }
                    }
                    if let Some(r) = region {
                        match r.parse::<Region>() {
                            Ok(region) => location.region = Some(region),
                            Err(e) => self.sink.push(format!("{path}.region"), e.to_string()),
                        }
                    }
                }
            }
            networks.push(GeoNetwork { net, location });
        }
        // Longest prefix first, so the first match is the most specific.
        networks.sort_by_key(|n| std::cmp::Reverse(n.net.prefix_len()));
        Geolocation {
            database: raw.database.as_ref().map(std::path::PathBuf::from),
            networks,
        }
    }
}
