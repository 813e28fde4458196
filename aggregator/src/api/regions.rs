//! `GET /accounts/{a}/load_balancers/regions[/{region}]` (Cloudflare's Region Mapping API):
//! the 13 regions and the countries each holds, from the regions table this aggregator runs
//! (`--regions`, or the embedded `regions.toml`). A country is one region here: meshlb does not
//! split countries by subdivision (regions.toml says which ones Cloudflare splits).

use lb_core::{Region, RegionsTable};
use serde_json::{json, Value};

/// What the answer says of its codes, as Cloudflare's does.
const ISO_STANDARD: &str =
    "Country codes follow ISO 3166-1 alpha-2; countries are not split by subdivision";

/// The regions (all, or `only`), each with its countries; with `country` (`country_code_a2`)
/// only the region holding it.
pub fn regions(table: &RegionsTable, only: Option<Region>, country: Option<&str>) -> Value {
    let regions: Vec<Value> = table
        .regions()
        .iter()
        .filter(|info| only.is_none_or(|r| r == info.region))
        .filter_map(|info| {
            let countries = table.countries_of(info.region);
            if let Some(c) = country {
                if !countries.iter().any(|k| k.as_str().eq_ignore_ascii_case(c)) {
                    return None;
                }
            }
            let countries: Vec<Value> = countries
                .iter()
                .map(|c| json!({ "country_code_a2": c.as_str() }))
                .collect();
            Some(json!({
                "region_code": info.region.code(),
                "region_name": info.name,
                "countries": countries,
            }))
        })
        .collect();
    json!({ "iso_standard": ISO_STANDARD, "regions": regions })
}

/// The query's `country_code_a2`, when given.
pub fn country_arg(query: &str) -> Option<String> {
    url::form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "country_code_a2")
        .map(|(_, v)| v.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_region_is_listed_with_its_countries() {
        let table = RegionsTable::embedded().expect("regions.toml");
        let v = regions(&table, None, None);
        assert_eq!(v["regions"].as_array().map(Vec::len), Some(13));
        let weu = v["regions"]
            .as_array()
            .and_then(|r| r.iter().find(|r| r["region_code"] == "WEU"))
            .expect("WEU");
        assert!(weu["countries"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["country_code_a2"] == "FR")));
    }

    #[test]
    fn a_country_filter_leaves_the_region_holding_it() {
        let table = RegionsTable::embedded().expect("regions.toml");
        let v = regions(&table, None, Some("jp"));
        assert_eq!(v["regions"][0]["region_code"], json!("NEAS"));
        assert_eq!(v["regions"].as_array().map(Vec::len), Some(1));
    }
}
