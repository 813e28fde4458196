//! meshlb's own edge as DNS answers it: the PoPs (aggregators serving the proxy) that clients
//! of a proxied load balancer are sent to, nearest first. A proxied load balancer hides its
//! origins (Cloudflare: proxied hides the endpoints, DNS-only exposes them), so its name is
//! answered with the addresses of live, ready PoPs — what Cloudflare does with anycast, done
//! with DNS. Pure: the aggregator gathers the PoPs from gossip, the DNS frontend asks here.

use std::net::IpAddr;

use crate::geo::Coordinates;
use crate::region::Region;
use crate::regions_table::RegionsTable;

/// One PoP that serves the proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyPop {
    /// The aggregator's node id.
    pub node: String,
    pub region: Region,
    /// Where clients reach its proxy (`--advertise-proxy`).
    pub addresses: Vec<IpAddr>,
}

/// A PoP with its distance from the client.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ranked<'a> {
    pub pop: &'a ProxyPop,
    pub distance_km: f64,
}

/// The PoPs ordered for a client at `client`: by great-circle distance from the client to the
/// representative point of each PoP's region (regions.toml), then by node id, so every node
/// orders alike. PoPs without an address are left out.
pub fn nearest_first<'a>(
    pops: &'a [ProxyPop],
    client: Coordinates,
    regions: &RegionsTable,
) -> Vec<Ranked<'a>> {
    let mut ranked: Vec<Ranked<'a>> = pops
        .iter()
        .filter(|p| !p.addresses.is_empty())
        .map(|pop| Ranked {
            pop,
            distance_km: client.distance_km(regions.region(pop.region).coordinates),
        })
        .collect();
    ranked.sort_by(|a, b| {
        a.distance_km
            .total_cmp(&b.distance_km)
            .then_with(|| a.pop.node.cmp(&b.pop.node))
    });
    ranked
}

/// The addresses to answer with, of the family the query asks for (`v6`: AAAA), nearest PoP
/// first, at most `max`.
pub fn answer_addresses(ranked: &[Ranked<'_>], v6: bool, max: usize) -> Vec<IpAddr> {
    ranked
        .iter()
        .flat_map(|r| r.pop.addresses.iter().copied())
        .filter(|a| a.is_ipv6() == v6)
        .take(max)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pop(node: &str, region: Region, addrs: &[&str]) -> ProxyPop {
        ProxyPop {
            node: node.into(),
            region,
            addresses: addrs.iter().map(|a| a.parse().expect("ip")).collect(),
        }
    }

    #[test]
    fn the_nearest_pop_comes_first_and_families_are_kept_apart() {
        let regions = RegionsTable::embedded().expect("regions");
        let pops = vec![
            pop("agg-weu", Region::Weu, &["192.0.2.1", "2001:db8::1"]),
            pop("agg-enam", Region::Enam, &["192.0.2.2"]),
            pop("agg-seas", Region::Seas, &["192.0.2.3"]),
            pop("agg-none", Region::Weu, &[]),
        ];
        let from = |r: Region| regions.region(r).coordinates;
        let order = |r: Region| -> Vec<String> {
            nearest_first(&pops, from(r), &regions)
                .iter()
                .map(|x| x.pop.node.clone())
                .collect()
        };
        assert_eq!(order(Region::Eeu), ["agg-weu", "agg-enam", "agg-seas"]);
        assert_eq!(order(Region::Wnam)[0], "agg-enam");
        assert_eq!(order(Region::Oc)[0], "agg-seas");
        let ranked = nearest_first(&pops, from(Region::Enam), &regions);
        assert_eq!(
            answer_addresses(&ranked, false, 8),
            ["192.0.2.2", "192.0.2.1", "192.0.2.3"].map(|a| a.parse::<IpAddr>().expect("ip"))
        );
        assert_eq!(
            answer_addresses(&ranked, true, 8),
            ["2001:db8::1".parse::<IpAddr>().expect("ip")]
        );
        assert_eq!(answer_addresses(&ranked, false, 1).len(), 1);
        assert!(nearest_first(&[], from(Region::Weu), &regions).is_empty());
    }

    #[test]
    fn pops_of_one_region_are_ordered_by_node_id() {
        let regions = RegionsTable::embedded().expect("regions");
        let pops = vec![
            pop("b", Region::Weu, &["192.0.2.2"]),
            pop("a", Region::Weu, &["192.0.2.1"]),
        ];
        let ranked = nearest_first(&pops, regions.region(Region::Weu).coordinates, &regions);
        assert_eq!(ranked[0].pop.node, "a");
    }
}
