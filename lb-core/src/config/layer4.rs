//! Layer-4 load balancers (Cloudflare Spectrum's model): TCP or UDP on listed ports, always
//! proxied, each ingress port kept to the origin unless `origin_port` maps it, the client's
//! address passed on by a PROXY header when asked, no custom rules, affinity only by the
//! pools' client-IP `hash` steering.

/// The largest number of ports one layer-4 load balancer listens on (each is a socket per
/// `--l4` address).
pub const MAX_LAYER4_PORTS: usize = 1024;

crate::choice! {
    /// What a layer-4 load balancer carries.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum Transport {
        Tcp => "tcp",
        Udp => "udp",
    }
}

crate::choice! {
    /// How an origin learns the client's address.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub enum ProxyProtocol {
        #[default]
        Off => "off",
        /// The text header of the PROXY protocol (TCP only).
        V1 => "v1",
        /// The binary header of the PROXY protocol: once per TCP connection; in front of every
        /// datagram of a UDP flow.
        V2 => "v2",
        /// Cloudflare's Simple Proxy Protocol for UDP: a 38-byte header in front of every
        /// datagram (UDP only).
        Simple => "simple",
    }
}

/// One ingress port and the origin port it goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PortMap {
    pub listen: u16,
    /// `origin_port`'s mapping; `None`: the endpoint's own port, else the ingress port.
    pub origin: Option<u16>,
}

/// A layer-4 load balancer's own settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layer4 {
    pub transport: Transport,
    /// Sorted by ingress port, each once.
    pub ports: Vec<PortMap>,
    pub proxy_protocol: ProxyProtocol,
}

impl Layer4 {
    /// Where a connection or flow that came in on `listen` goes at an endpoint whose own port
    /// is `endpoint_port` (0: none set): the mapped port, else the endpoint's, else `listen`.
    pub fn origin_port(&self, listen: u16, endpoint_port: u16) -> u16 {
        let mapped = self
            .ports
            .binary_search_by_key(&listen, |p| p.listen)
            .ok()
            .and_then(|i| self.ports[i].origin);
        match (mapped, endpoint_port) {
            (Some(p), _) => p,
            (None, 0) => listen,
            (None, p) => p,
        }
    }

    pub fn listens_on(&self, port: u16) -> bool {
        self.ports.binary_search_by_key(&port, |p| p.listen).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mapped_port_wins_then_the_endpoints_then_the_ingress_port() {
        let l4 = Layer4 {
            transport: Transport::Tcp,
            ports: vec![
                PortMap {
                    listen: 22,
                    origin: None,
                },
                PortMap {
                    listen: 8000,
                    origin: Some(9000),
                },
            ],
            proxy_protocol: ProxyProtocol::Off,
        };
        assert_eq!(l4.origin_port(22, 0), 22);
        assert_eq!(l4.origin_port(22, 2222), 2222);
        assert_eq!(l4.origin_port(8000, 2222), 9000);
        assert!(l4.listens_on(8000) && !l4.listens_on(8001));
    }
}
