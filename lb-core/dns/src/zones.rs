//! Where a query name falls: outside every zone (REFUSED), at a zone's apex (SOA, NS), on a
//! load-balanced name, on an empty non-terminal above one (NODATA), or nowhere in its zone
//! (NXDOMAIN). Built once per configuration; lookups borrow.

use std::collections::{HashMap, HashSet};

use hickory_proto::rr::rdata::{NS, SOA};
use hickory_proto::rr::{LowerName, Name, RData, Record};

use lb_core::config::{Config, LbId, Zone};

/// A zone with its apex records, ready to answer.
#[derive(Debug)]
pub(crate) struct ServedZone {
    pub apex: LowerName,
    pub soa: Record,
    /// The SOA of negative answers: its TTL is min(TTL, MINIMUM), how long resolvers cache
    /// the NXDOMAIN or NODATA (RFC 2308 section 5).
    pub negative_soa: Record,
    pub ns: Vec<Record>,
}

/// What a query name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    Outside,
    /// In zone `zone`: the apex, a load balancer's name, an existing name with no records of
    /// its own (an empty non-terminal), or a name that does not exist.
    Inside {
        zone: usize,
        apex: bool,
        lb: Option<LbId>,
        exists: bool,
    },
}

#[derive(Debug)]
pub(crate) struct ZoneSet {
    zones: Vec<ServedZone>,
    lbs: HashMap<LowerName, LbId>,
    nonterminals: HashSet<LowerName>,
}

/// Why the DNS frontend cannot serve a configuration.
#[derive(Debug, thiserror::Error)]
pub enum DnsConfigError {
    #[error("`{text}` is not a DNS name: {reason}")]
    Name { text: String, reason: String },
    #[error("pool {pool}: endpoint {endpoint}")]
    Endpoint { pool: String, endpoint: String },
    #[error(transparent)]
    Geolocation(#[from] lb_core::geolocation::GeolocationError),
}

pub(crate) fn name(text: &str) -> Result<Name, DnsConfigError> {
    let fqdn = if text.ends_with('.') {
        text.to_string()
    } else {
        format!("{text}.")
    };
    Name::from_ascii(&fqdn).map_err(|e| DnsConfigError::Name {
        text: text.to_string(),
        reason: e.to_string(),
    })
}

impl ZoneSet {
    /// `default_serial` is used by zones that do not set one.
    pub fn build(config: &Config, default_serial: u32) -> Result<ZoneSet, DnsConfigError> {
        let zones: Vec<Zone> = if config.zones.is_empty() {
            config
                .load_balancers
                .iter()
                .map(|lb| Zone::implicit(&lb.name))
                .collect()
        } else {
            config.zones.clone()
        };
        let mut served = Vec::with_capacity(zones.len());
        for z in &zones {
            let apex = name(&z.name)?;
            let mname = name(z.nameservers.first().map_or("localhost", String::as_str))?;
            let soa = SOA::new(
                mname,
                name(&z.hostmaster)?,
                z.serial.unwrap_or(default_serial),
                3600,
                600,
                604_800,
                z.negative_ttl,
            );
            let ns = z
                .nameservers
                .iter()
                .map(|n| {
                    Ok(Record::from_rdata(
                        apex.clone(),
                        z.ttl,
                        RData::NS(NS(name(n)?)),
                    ))
                })
                .collect::<Result<Vec<_>, DnsConfigError>>()?;
            let soa = Record::from_rdata(apex.clone(), z.ttl, RData::SOA(soa));
            let mut negative_soa = soa.clone();
            negative_soa.set_ttl(z.ttl.min(z.negative_ttl));
            served.push(ServedZone {
                apex: LowerName::new(&apex),
                soa,
                negative_soa,
                ns,
            });
        }
        let mut lbs = HashMap::new();
        let mut nonterminals = HashSet::new();
        for (i, lb) in config.lbs() {
            let n = LowerName::new(&name(&lb.name)?);
            let mut parent = n.base_name();
            while parent.num_labels() > 0 {
                nonterminals.insert(parent.clone());
                parent = parent.base_name();
            }
            lbs.insert(n, i);
        }
        Ok(ZoneSet {
            zones: served,
            lbs,
            nonterminals,
        })
    }

    pub fn zone(&self, i: usize) -> &ServedZone {
        &self.zones[i]
    }

    pub fn place(&self, qname: &LowerName) -> Place {
        // The most specific zone wins (a delegated child zone served here too).
        let Some(zone) = self
            .zones
            .iter()
            .enumerate()
            .filter(|(_, z)| z.apex.zone_of(qname))
            .max_by_key(|(_, z)| z.apex.num_labels())
            .map(|(i, _)| i)
        else {
            return Place::Outside;
        };
        let apex = self.zones[zone].apex == *qname;
        let lb = self.lbs.get(qname).copied();
        Place::Inside {
            zone,
            apex,
            lb,
            exists: apex || lb.is_some() || self.nonterminals.contains(qname),
        }
    }
}
