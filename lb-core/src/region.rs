//! The 13 load-balancing regions (Cloudflare's geo steering codes) and a dense map keyed by them.

use std::fmt;
use std::str::FromStr;

/// One of Cloudflare's 13 geographic regions. Every prober, PoP and geo mapping names one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Region {
    Wnam,
    Enam,
    Weu,
    Eeu,
    Nsam,
    Ssam,
    Oc,
    Me,
    Naf,
    Saf,
    Sas,
    Seas,
    Neas,
}

impl Region {
    /// All regions, in the canonical order of `regions.toml`.
    pub const ALL: [Region; 13] = [
        Region::Wnam,
        Region::Enam,
        Region::Weu,
        Region::Eeu,
        Region::Nsam,
        Region::Ssam,
        Region::Oc,
        Region::Me,
        Region::Naf,
        Region::Saf,
        Region::Sas,
        Region::Seas,
        Region::Neas,
    ];

    /// The upper-case code used in configs and APIs (`"WEU"`).
    pub const fn code(self) -> &'static str {
        match self {
            Region::Wnam => "WNAM",
            Region::Enam => "ENAM",
            Region::Weu => "WEU",
            Region::Eeu => "EEU",
            Region::Nsam => "NSAM",
            Region::Ssam => "SSAM",
            Region::Oc => "OC",
            Region::Me => "ME",
            Region::Naf => "NAF",
            Region::Saf => "SAF",
            Region::Sas => "SAS",
            Region::Seas => "SEAS",
            Region::Neas => "NEAS",
        }
    }

    /// Dense index 0..13, for [`RegionMap`].
    pub const fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Region {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// The text was not one of the 13 region codes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown region `{0}` (expected one of WNAM ENAM WEU EEU NSAM SSAM OC ME NAF SAF SAS SEAS NEAS)")]
pub struct UnknownRegion(pub String);

impl FromStr for Region {
    type Err = UnknownRegion;

    /// Case-insensitive, so `weu` and `WEU` both work on the command line.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Region::ALL
            .into_iter()
            .find(|r| r.code().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownRegion(s.to_string()))
    }
}

/// A value per region, stored densely so that the hot path indexes instead of hashing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RegionMap<T>([Option<T>; 13]);

impl<T: Copy> Default for RegionMap<T> {
    fn default() -> Self {
        Self::EMPTY
    }
}

impl<T: Copy> RegionMap<T> {
    /// No region has a value.
    pub const EMPTY: Self = RegionMap([None; 13]);

    pub fn get(&self, region: Region) -> Option<T> {
        self.0[region.index()]
    }

    pub fn set(&mut self, region: Region, value: Option<T>) {
        self.0[region.index()] = value;
    }

    /// The regions that have a value, in canonical order.
    pub fn iter(&self) -> impl Iterator<Item = (Region, T)> + '_ {
        Region::ALL
            .into_iter()
            .filter_map(|r| self.0[r.index()].map(|v| (r, v)))
    }

    pub fn is_empty(&self) -> bool {
        self.0.iter().all(Option::is_none)
    }
}

impl<T: Copy> FromIterator<(Region, T)> for RegionMap<T> {
    fn from_iter<I: IntoIterator<Item = (Region, T)>>(iter: I) -> Self {
        let mut map = RegionMap::default();
        for (r, v) in iter {
            map.set(r, Some(v));
        }
        map
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_case_insensitively() {
        for r in Region::ALL {
            assert_eq!(r.code().parse::<Region>(), Ok(r));
            assert_eq!(r.code().to_lowercase().parse::<Region>(), Ok(r));
            assert_eq!(Region::ALL[r.index()], r);
        }
        assert!("EU".parse::<Region>().is_err());
    }

    #[test]
    fn region_map_keeps_values_apart() {
        let mut m = RegionMap::default();
        m.set(Region::Weu, Some(10.0));
        m.set(Region::Neas, Some(20.0));
        assert_eq!(m.get(Region::Weu), Some(10.0));
        assert_eq!(m.get(Region::Eeu), None);
        assert_eq!(m.iter().count(), 2);
    }
}
