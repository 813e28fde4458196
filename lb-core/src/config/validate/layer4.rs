//! Validation of layer-4 load balancers' own fields (`config/layer4.rs`), and of the ports
//! they share a node's `--l4` addresses on.

use std::collections::BTreeMap;

use super::*;

use crate::config::{Layer4, PortMap, ProxyProtocol, Transport, MAX_LAYER4_PORTS};

/// Why a port or range as written is none.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum PortsError {
    #[error("{0} is not a port (1..=65535)")]
    NotAPort(i64),
    #[error("`{0}` is not a port or a `first-last` range")]
    NotPortOrRange(String),
    #[error("`{0}` is not a `first-last` range of ports")]
    NotRange(String),
    #[error("`{0}`: the first port is above the last")]
    Reversed(String),
}

/// A port or range as written: the ports, or why not.
fn ports_of(raw: &RawPorts) -> Result<std::ops::RangeInclusive<u16>, PortsError> {
    let port = |n: i64| -> Result<u16, PortsError> {
        u16::try_from(n)
            .ok()
            .filter(|&p| p != 0)
            .ok_or(PortsError::NotAPort(n))
    };
    match raw {
        RawPorts::One(n) => port(*n).map(|p| p..=p),
        RawPorts::Range(text) => {
            let Some((first, last)) = text.split_once('-') else {
                return match text.trim().parse::<i64>() {
                    Ok(n) => port(n).map(|p| p..=p),
                    Err(_) => Err(PortsError::NotPortOrRange(text.clone())),
                };
            };
            let (Ok(first), Ok(last)) = (first.trim().parse::<i64>(), last.trim().parse::<i64>())
            else {
                return Err(PortsError::NotRange(text.clone()));
            };
            let (first, last) = (port(first)?, port(last)?);
            if first > last {
                return Err(PortsError::Reversed(text.clone()));
            }
            Ok(first..=last)
        }
    }
}

impl Validator<'_> {
    /// The layer-4 settings of load balancer `path` (`None` for HTTP), each error reported.
    pub(super) fn layer4(&mut self, path: &str, lb: &RawLoadBalancer) -> Option<Layer4> {
        let transport = self.transport(path, lb)?;
        let listen = self.listen_ports(path, lb);
        let origins = self.origin_ports(path, lb, listen.len());
        let proxy_protocol = self.proxy_protocol(path, lb, transport);
        self.http_only_fields_refused(path, lb);
        Some(Layer4 {
            transport,
            ports: listen
                .into_iter()
                .zip(origins)
                .map(|(listen, origin)| PortMap { listen, origin })
                .collect(),
            proxy_protocol,
        })
    }

    /// The load balancer's transport: `None` for HTTP (whose layer-4 fields are refused) and
    /// for an unknown protocol (refused).
    fn transport(&mut self, path: &str, lb: &RawLoadBalancer) -> Option<Transport> {
        let transport = match lb.protocol.as_deref().unwrap_or("http") {
            "http" => None,
            "tcp" => Some(Transport::Tcp),
            "udp" => Some(Transport::Udp),
            other => {
                self.sink.push(
                    format!("{path}.protocol"),
                    format!(
                        "unknown protocol `{other}` (expected {})",
                        crate::choice::one_of(
                            std::iter::once("http").chain(Transport::ALL.iter().map(|t| t.name()))
                        )
                    ),
                );
                return None;
            }
        };
        let Some(transport) = transport else {
            for (field, set) in [
                ("listen", lb.listen.is_some()),
                ("origin_port", lb.origin_port.is_some()),
                ("proxy_protocol", lb.proxy_protocol.is_some()),
            ] {
                if set {
                    self.sink.push(
                        format!("{path}.{field}"),
                        "only a layer-4 load balancer (protocol = \"tcp\" or \"udp\") takes it",
                    );
                }
            }
            return None;
        };
        Some(transport)
    }

    /// `listen`: its ports and ranges, sorted, at most [`MAX_LAYER4_PORTS`], each once.
    fn listen_ports(&mut self, path: &str, lb: &RawLoadBalancer) -> Vec<u16> {
        let mut listen: Vec<u16> = Vec::new();
        match lb.listen.as_deref() {
            None | Some([]) => self.sink.push(
                format!("{path}.listen"),
                "a layer-4 load balancer needs the ports it listens on (numbers or \"first-last\" ranges)",
            ),
            Some(entries) => {
                for (j, entry) in entries.iter().enumerate() {
                    match ports_of(entry) {
                        Ok(range) => {
                            if listen.len() + range.len() > MAX_LAYER4_PORTS {
                                self.sink.push(
                                    format!("{path}.listen[{j}]"),
                                    format!("more than {MAX_LAYER4_PORTS} ports in all"),
                                );
                                break;
                            }
                            listen.extend(range);
                        }
                        Err(why) => self.sink.push(format!("{path}.listen[{j}]"), why.to_string()),
                    }
                }
            }
        }
        listen.sort_unstable();
        let before = listen.len();
        listen.dedup();
        if listen.len() != before {
            self.sink
                .push(format!("{path}.listen"), "a port is listed more than once");
        }
        listen
    }

    /// `origin_port` for each of `count` listened ports: one port for all, or a range as
    /// long as `listen`; `None` (the endpoint's own port) when unset or refused.
    fn origin_ports(&mut self, path: &str, lb: &RawLoadBalancer, count: usize) -> Vec<Option<u16>> {
        match &lb.origin_port {
            None => vec![None; count],
            Some(raw) => match ports_of(raw) {
                Ok(range) if range.start() == range.end() => {
                    vec![Some(*range.start()); count]
                }
                Ok(range) if range.len() == count => range.map(Some).collect(),
                Ok(range) => {
                    self.sink.push(
                        format!("{path}.origin_port"),
                        format!(
                            "a range of {} ports for {} listened ports: give one port, or a range as long as `listen`",
                            range.len(),
                            count
                        ),
                    );
                    vec![None; count]
                }
                Err(why) => {
                    self.sink
                        .push(format!("{path}.origin_port"), why.to_string());
                    vec![None; count]
                }
            },
        }
    }

    /// `proxy_protocol`, which the transport must carry (v1 is TCP's, simple UDP's).
    fn proxy_protocol(
        &mut self,
        path: &str,
        lb: &RawLoadBalancer,
        transport: Transport,
    ) -> ProxyProtocol {
        match (lb.proxy_protocol.as_deref().unwrap_or("off"), transport) {
            ("off", _) => ProxyProtocol::Off,
            ("v1", Transport::Tcp) => ProxyProtocol::V1,
            ("v2", _) => ProxyProtocol::V2,
            ("simple", Transport::Udp) => ProxyProtocol::Simple,
            ("v1", Transport::Udp) => {
                self.sink.push(
                    format!("{path}.proxy_protocol"),
                    "v1 is a text header for TCP: use v2 or simple for UDP",
                );
                ProxyProtocol::Off
            }
            ("simple", Transport::Tcp) => {
                self.sink.push(
                    format!("{path}.proxy_protocol"),
                    "simple is for UDP: use v1 or v2 for TCP",
                );
                ProxyProtocol::Off
            }
            (other, _) => {
                self.sink.push(
                    format!("{path}.proxy_protocol"),
                    format!(
                        "unknown value `{other}` (expected {})",
                        <ProxyProtocol as crate::choice::Choice>::expected()
                    ),
                );
                ProxyProtocol::Off
            }
        }
    }

    /// The HTTP load balancer's fields layer 4 does not have (Spectrum's limits), refused.
    fn http_only_fields_refused(&mut self, path: &str, lb: &RawLoadBalancer) {
        if !lb.rules.is_empty() {
            self.sink.push(
                format!("{path}.rules"),
                "a layer-4 load balancer takes no custom rules (they match HTTP requests)",
            );
        }
        if lb.session_affinity != "none" {
            self.sink.push(
                format!("{path}.session_affinity"),
                "a layer-4 load balancer's only affinity is by client IP: set its pools' origin_steering policy = \"hash\"",
            );
        }
        for (field, set) in [
            ("session_affinity_ttl", lb.session_affinity_ttl.is_some()),
            (
                "session_affinity_attributes",
                lb.session_affinity_attributes.is_some(),
            ),
        ] {
            if set {
                self.sink.push(
                    format!("{path}.{field}"),
                    "a layer-4 load balancer has no session affinity to set",
                );
            }
        }
        if lb.origin_tls.as_deref().is_some_and(|t| t != "off") {
            self.sink.push(
                format!("{path}.origin_tls"),
                "a layer-4 load balancer carries TLS through untouched: leave origin_tls out",
            );
        }
    }

    /// Two layer-4 load balancers cannot listen on the same port of the same transport.
    pub(super) fn layer4_ports(&mut self, lbs: &[(usize, &LoadBalancer)]) {
        let mut owner: BTreeMap<(Transport, u16), (usize, &str)> = BTreeMap::new();
        for (i, lb) in lbs {
            let Some(l4) = &lb.layer4 else {
                continue;
            };
            for p in &l4.ports {
                let key = (l4.transport, p.listen);
                match owner.get(&key) {
                    Some((j, other)) => {
                        let message = format!(
                            "port {}/{} is also load_balancers[{j}]'s (`{other}`)",
                            p.listen,
                            l4.transport.name()
                        );
                        self.sink
                            .push(format!("load_balancers[{i}].listen"), message);
                    }
                    None => {
                        owner.insert(key, (*i, &lb.name));
                    }
                }
            }
        }
    }
}
