//! `regions.toml`: the 13 regions with their representative coordinates and three default
//! datacenters each, and the ISO 3166-1 alpha-2 country -> region table of geo steering.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use serde::Deserialize;

use crate::error::{parse_toml_strict, ConfigErrors, ErrorSink};
use crate::geo::Coordinates;
use crate::region::Region;

/// The table shipped with meshlb; the binary uses it unless `--regions FILE` is given.
pub const EMBEDDED_REGIONS_TOML: &str = include_str!("../../regions.toml");

/// An ISO 3166-1 alpha-2 code, stored upper-case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CountryCode([u8; 2]);

impl CountryCode {
    pub fn as_str(&self) -> &str {
        // Constructed only from two ASCII letters, so this cannot fail.
        std::str::from_utf8(&self.0).unwrap_or("??")
    }
}

impl fmt::Display for CountryCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for CountryCode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.as_bytes() {
            [a, b] if a.is_ascii_alphabetic() && b.is_ascii_alphabetic() => Ok(CountryCode([
                a.to_ascii_uppercase(),
                b.to_ascii_uppercase(),
            ])),
            _ => Err(format!(
                "`{s}` is not an ISO 3166-1 alpha-2 country code (two letters, such as DE)"
            )),
        }
    }
}

/// A datacenter where probers (and PoPs) run.
#[derive(Debug, Clone, PartialEq)]
pub struct Datacenter {
    /// Lower-case code, unique over the table (`ams`).
    pub code: String,
    pub city: String,
    /// The datacenter's country: what a PoP-located client's country is for `country_pools`.
    pub country: CountryCode,
    pub coordinates: Coordinates,
    pub region: Region,
}

/// One region's description.
#[derive(Debug, Clone, PartialEq)]
pub struct RegionInfo {
    pub region: Region,
    pub name: String,
    /// The representative point used for a client known only by its region.
    pub coordinates: Coordinates,
    pub datacenters: Vec<Datacenter>,
}

/// The validated regions table.
#[derive(Debug, Clone)]
pub struct RegionsTable {
    regions: Vec<RegionInfo>,
    countries: HashMap<CountryCode, Region>,
}

#[derive(Deserialize)]
struct RawTable {
    regions: Vec<RawRegion>,
    countries: HashMap<String, String>,
}

#[derive(Deserialize)]
struct RawRegion {
    code: String,
    name: String,
    latitude: f64,
    longitude: f64,
    datacenters: Vec<RawDatacenter>,
}

#[derive(Deserialize)]
struct RawDatacenter {
    code: String,
    city: String,
    country: String,
    latitude: f64,
    longitude: f64,
}

impl RegionsTable {
    /// The embedded default table.
    pub fn embedded() -> Result<Self, ConfigErrors> {
        Self::parse("regions.toml (embedded)", EMBEDDED_REGIONS_TOML)
    }

    /// Parses and validates a regions file: all 13 regions exactly once, three or more
    /// datacenters each with unique codes and valid coordinates, countries mapped to regions.
    /// Every error is reported, in the file's order (the countries by code, after the regions).
    pub fn parse(file: &str, text: &str) -> Result<Self, ConfigErrors> {
        let (raw, mut sink): (RawTable, ErrorSink) = parse_toml_strict(file, text)?;
        let mut by_region: Vec<Option<RegionInfo>> = vec![None; 13];
        let mut dc_codes = HashMap::new();
        for (i, r) in raw.regions.iter().enumerate() {
            let path = format!("regions[{i}]");
            let Some(info) = region_info(&path, r, &mut dc_codes, &mut sink) else {
                continue;
            };
            let slot = &mut by_region[info.region.index()];
            if slot.is_some() {
                sink.push(
                    format!("{path}.code"),
                    format!("region {} is listed twice", info.region),
                );
            }
            *slot = Some(info);
        }
        for region in Region::ALL {
            if by_region[region.index()].is_none() {
                sink.push("regions", format!("region {region} is missing"));
            }
        }
        let countries = countries(&raw.countries, &mut sink);
        let regions: Vec<RegionInfo> = by_region.into_iter().flatten().collect();
        sink.finish(RegionsTable { regions, countries })
    }

    pub fn region(&self, region: Region) -> &RegionInfo {
        // Validation guarantees all 13 in canonical order.
        &self.regions[region.index()]
    }

    pub fn regions(&self) -> &[RegionInfo] {
        &self.regions
    }

    pub fn country_region(&self, country: CountryCode) -> Option<Region> {
        self.countries.get(&country).copied()
    }

    /// The countries of `region`, sorted by code.
    pub fn countries_of(&self, region: Region) -> Vec<CountryCode> {
        let mut out: Vec<CountryCode> = self
            .countries
            .iter()
            .filter(|(_, r)| **r == region)
            .map(|(c, _)| *c)
            .collect();
        out.sort();
        out
    }

    pub fn country_count(&self) -> usize {
        self.countries.len()
    }

    /// Whether `datacenter` is one of `region`'s (case-insensitively): only such a prober's
    /// votes count (a node's region and datacenter are its own claim).
    pub fn on_roster(&self, region: Region, datacenter: &str) -> bool {
        self.region(region)
            .datacenters
            .iter()
            .any(|d| d.code.eq_ignore_ascii_case(datacenter))
    }

    /// Finds a datacenter by code, case-insensitively.
    pub fn datacenter(&self, code: &str) -> Option<&Datacenter> {
        self.regions
            .iter()
            .flat_map(|r| r.datacenters.iter())
            .find(|d| d.code.eq_ignore_ascii_case(code))
    }
}

/// The region a `[[regions]]` entry at `path` describes, with its datacenters; errors go to
/// `sink`, and `None` when its code names no region. `dc_codes` holds the datacenter codes
/// seen so far, each with where it was.
fn region_info(
    path: &str,
    r: &RawRegion,
    dc_codes: &mut HashMap<String, String>,
    sink: &mut ErrorSink,
) -> Option<RegionInfo> {
    let region = match r.code.parse::<Region>() {
        Ok(region) => region,
        Err(e) => {
            sink.push(format!("{path}.code"), e.to_string());
            return None;
        }
    };
    let coordinates = Coordinates::new(r.latitude, r.longitude);
    if !coordinates.is_valid() {
        sink.push(
            path,
            "latitude must be within -90..90 and longitude within -180..180",
        );
    }
    if r.datacenters.len() < 3 {
        sink.push(
            format!("{path}.datacenters"),
            format!("needs at least 3 datacenters (a region verdict is a majority of its datacenters), found {}", r.datacenters.len()),
        );
    }
    let datacenters = r
        .datacenters
        .iter()
        .enumerate()
        .filter_map(|(j, d)| {
            let dpath = format!("{path}.datacenters[{j}]");
            datacenter(&dpath, d, region, dc_codes, sink)
        })
        .collect();
    Some(RegionInfo {
        region,
        name: r.name.clone(),
        coordinates,
        datacenters,
    })
}

/// The datacenter a `datacenters` entry at `dpath` describes, in `region`; errors go to
/// `sink`, and `None` when its country is no country code.
fn datacenter(
    dpath: &str,
    d: &RawDatacenter,
    region: Region,
    dc_codes: &mut HashMap<String, String>,
    sink: &mut ErrorSink,
) -> Option<Datacenter> {
    let code = d.code.to_ascii_lowercase();
    if code.is_empty() || !code.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        sink.push(format!("{dpath}.code"), "must be letters, digits or '-'");
    }
    if let Some(other) = dc_codes.insert(code.clone(), dpath.to_owned()) {
        sink.push(
            format!("{dpath}.code"),
            format!("duplicate datacenter code `{code}` (also at {other})"),
        );
    }
    let country = match d.country.parse::<CountryCode>() {
        Ok(cc) => cc,
        Err(e) => {
            sink.push(format!("{dpath}.country"), e);
            return None;
        }
    };
    let c = Coordinates::new(d.latitude, d.longitude);
    if !c.is_valid() {
        sink.push(
            dpath,
            "latitude must be within -90..90 and longitude within -180..180",
        );
    }
    Some(Datacenter {
        code,
        city: d.city.clone(),
        country,
        coordinates: c,
        region,
    })
}

/// The `[countries]` table, taken in code order: each code upper-case and a country code,
/// each mapped to a region; errors go to `sink`.
fn countries(raw: &HashMap<String, String>, sink: &mut ErrorSink) -> HashMap<CountryCode, Region> {
    let mut countries = HashMap::new();
    let mut keys: Vec<_> = raw.iter().collect();
    keys.sort();
    for (cc, region) in keys {
        let path = format!("countries.{cc}");
        let code = match cc.parse::<CountryCode>() {
            Ok(code) if cc.chars().all(|c| c.is_ascii_uppercase()) => code,
            Ok(_) => {
                sink.push(&path, "country codes are written upper-case");
                continue;
            }
            Err(e) => {
                sink.push(&path, e);
                continue;
            }
        };
        match region.parse::<Region>() {
            Ok(r) => {
                countries.insert(code, r);
            }
            Err(e) => sink.push(&path, e.to_string()),
        }
    }
    countries
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_table_is_complete() {
        let t = RegionsTable::embedded().expect("embedded regions.toml is valid");
        assert_eq!(t.regions().len(), 13);
        for (i, r) in t.regions().iter().enumerate() {
            assert_eq!(r.region, Region::ALL[i]);
            assert!(r.datacenters.len() >= 3, "{}", r.region);
        }
        // ISO 3166-1 has 249 officially assigned alpha-2 codes.
        assert_eq!(t.country_count(), 249);
        let de: CountryCode = "de".parse().unwrap();
        assert_eq!(t.country_region(de), Some(Region::Weu));
        assert_eq!(t.country_region("JP".parse().unwrap()), Some(Region::Neas));
        assert_eq!(t.country_region("AU".parse().unwrap()), Some(Region::Oc));
        // Split countries take the region of most of their population.
        assert_eq!(t.country_region("US".parse().unwrap()), Some(Region::Enam));
        assert_eq!(t.country_region("BR".parse().unwrap()), Some(Region::Ssam));
        assert_eq!(t.country_region("RU".parse().unwrap()), Some(Region::Eeu));
        assert_eq!(t.country_region("ZA".parse().unwrap()), Some(Region::Saf));
        assert_eq!(t.country_region("IN".parse().unwrap()), Some(Region::Sas));
        assert!(t.datacenter("AMS").is_some());
    }

    #[test]
    fn bad_tables_are_rejected_with_paths() {
        let text = r#"
[[regions]]
code = "XX"
name = "nowhere"
latitude = 100.0
longitude = 0.0
datacenters = []

[countries]
de = "WEU"
FR = "EU"
"#;
        let err = RegionsTable::parse("r.toml", text).unwrap_err();
        let all = err.to_string();
        assert!(
            all.contains("r.toml: regions[0].code: unknown region `XX`"),
            "{all}"
        );
        assert!(
            all.contains("countries.de: country codes are written upper-case"),
            "{all}"
        );
        assert!(all.contains("countries.FR: unknown region `EU`"), "{all}");
    }

    #[test]
    fn unknown_fields_are_errors() {
        let text = EMBEDDED_REGIONS_TOML.replacen("name = ", "nmae = \"x\"\nname = ", 1);
        let err = RegionsTable::parse("r.toml", &text).unwrap_err();
        assert_eq!(err.0[0].path, "regions[0].nmae");
        assert_eq!(err.0[0].reason, "unknown field");
    }
}
