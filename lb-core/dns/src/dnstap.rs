//! dnstap (dnstap.info, `dnstap.proto`): each query the server answers is logged as an
//! `AUTH_QUERY` and an `AUTH_RESPONSE` message — the wire query and answer, both addresses
//! and ports, the transport and both times — with the steering decision for a load-balanced
//! name in the `extra` field. The messages travel as Frame Streams (`lb_records`) to a file
//! or a collector's socket; they are encoded there, off the answering thread, which only
//! copies the two messages.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use lb_core::config::Config;
use prost::Message as _;

use crate::answer::Steered;

/// dnstap's Frame Streams content type.
pub const CONTENT_TYPE: &str = "protobuf:dnstap.Dnstap";

/// Where the DNS server's dnstap messages go, and the identity they carry.
#[derive(Debug, Clone)]
pub struct Dnstap {
    pub sink: Arc<lb_records::Sink<Box<DnstapRecord>>>,
    /// The `identity` field: the node's name.
    pub identity: Arc<str>,
}

/// One query and, unless it was dropped (RRL), its response.
#[derive(Debug)]
pub struct DnstapRecord {
    pub(crate) identity: Arc<str>,
    pub(crate) tcp: bool,
    pub(crate) client: SocketAddr,
    pub(crate) server: SocketAddr,
    /// The query's bytes, then the response's (one allocation for both).
    pub(crate) wire: Vec<u8>,
    pub(crate) query_len: usize,
    pub(crate) query_time: SystemTime,
    /// When the response went out; `None`: no response (dropped by RRL, or nothing to send).
    pub(crate) response_time: Option<SystemTime>,
    pub(crate) config: Arc<Config>,
    pub(crate) steered: Steered,
}

impl Dnstap {
    /// Hands a query and its response to the log, when the sampling keeps it. The response's
    /// code decides whether it is an error (SERVFAIL, REFUSED, FORMERR, NOTIMP and the like:
    /// anything but NOERROR and NXDOMAIN).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn log(
        &self,
        tcp: bool,
        (client, server): (SocketAddr, SocketAddr),
        query: &[u8],
        query_time: SystemTime,
        response: Option<&[u8]>,
        config: &Arc<Config>,
        steered: Steered,
    ) {
        let rcode = response.and_then(|r| r.get(3)).map_or(0, |b| b & 0x0f);
        if !self.sink.keeps(!matches!(rcode, 0 | 3)) {
            return;
        }
        self.sink.push(Box::new(DnstapRecord {
            identity: Arc::clone(&self.identity),
            tcp,
            client,
            server,
            wire: [query, response.unwrap_or_default()].concat(),
            query_len: query.len(),
            query_time,
            response_time: response.map(|_| SystemTime::now()),
            config: Arc::clone(config),
            steered,
        }));
    }
}

/// `dnstap.proto`'s messages, as far as an authoritative server fills them.
mod proto {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Dnstap {
        #[prost(bytes = "vec", optional, tag = "1")]
        pub identity: Option<Vec<u8>>,
        #[prost(bytes = "vec", optional, tag = "2")]
        pub version: Option<Vec<u8>>,
        #[prost(bytes = "vec", optional, tag = "3")]
        pub extra: Option<Vec<u8>>,
        #[prost(message, optional, tag = "14")]
        pub message: Option<Message>,
        /// `Dnstap.Type`: 1 is MESSAGE.
        #[prost(int32, required, tag = "15")]
        pub r#type: i32,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Message {
        /// `Message.Type`: 1 AUTH_QUERY, 2 AUTH_RESPONSE.
        #[prost(int32, required, tag = "1")]
        pub r#type: i32,
        /// 1 INET, 2 INET6.
        #[prost(int32, optional, tag = "2")]
        pub socket_family: Option<i32>,
        /// 1 UDP, 2 TCP.
        #[prost(int32, optional, tag = "3")]
        pub socket_protocol: Option<i32>,
        #[prost(bytes = "vec", optional, tag = "4")]
        pub query_address: Option<Vec<u8>>,
        #[prost(bytes = "vec", optional, tag = "5")]
        pub response_address: Option<Vec<u8>>,
        #[prost(uint32, optional, tag = "6")]
        pub query_port: Option<u32>,
        #[prost(uint32, optional, tag = "7")]
        pub response_port: Option<u32>,
        #[prost(uint64, optional, tag = "8")]
        pub query_time_sec: Option<u64>,
        #[prost(fixed32, optional, tag = "9")]
        pub query_time_nsec: Option<u32>,
        #[prost(bytes = "vec", optional, tag = "10")]
        pub query_message: Option<Vec<u8>>,
        #[prost(uint64, optional, tag = "12")]
        pub response_time_sec: Option<u64>,
        #[prost(fixed32, optional, tag = "13")]
        pub response_time_nsec: Option<u32>,
        #[prost(bytes = "vec", optional, tag = "14")]
        pub response_message: Option<Vec<u8>>,
    }
}

pub(crate) use proto::Dnstap as DnstapMessage;

const AUTH_QUERY: i32 = 1;
const AUTH_RESPONSE: i32 = 2;

fn address(ip: IpAddr) -> Vec<u8> {
    match ip {
        IpAddr::V4(v4) => v4.octets().to_vec(),
        IpAddr::V6(v6) => v6.octets().to_vec(),
    }
}

fn split(t: SystemTime) -> (u64, u32) {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    (d.as_secs(), d.subsec_nanos())
}

impl DnstapRecord {
    /// `lb=NAME pool=NAME policy=POLICY` for a load-balanced name, else nothing.
    fn extra(&self) -> Option<Vec<u8>> {
        let lb = self.config.load_balancers.get(self.steered.lb?.0)?;
        let mut extra = format!(
            "lb={} policy={}",
            lb.name,
            lb.settings.steering_policy.name()
        );
        if let Some(pool) = self.steered.pool.and_then(|p| self.config.pools.get(p.0)) {
            extra.push_str(" pool=");
            extra.push_str(&pool.name);
        }
        Some(extra.into_bytes())
    }

    fn message(&self, kind: i32) -> DnstapMessage {
        let (qs, qn) = split(self.query_time);
        let mut m = proto::Message {
            r#type: kind,
            socket_family: Some(if self.client.is_ipv4() { 1 } else { 2 }),
            socket_protocol: Some(if self.tcp { 2 } else { 1 }),
            query_address: Some(address(self.client.ip())),
            response_address: Some(address(self.server.ip())),
            query_port: Some(u32::from(self.client.port())),
            response_port: Some(u32::from(self.server.port())),
            query_time_sec: Some(qs),
            query_time_nsec: Some(qn),
            ..Default::default()
        };
        let (query, response) = self.wire.split_at(self.query_len.min(self.wire.len()));
        if kind == AUTH_QUERY {
            m.query_message = Some(query.to_vec());
        } else if let Some(at) = self.response_time {
            let (rs, rn) = split(at);
            m.response_message = Some(response.to_vec());
            m.response_time_sec = Some(rs);
            m.response_time_nsec = Some(rn);
        }
        DnstapMessage {
            identity: Some(self.identity.as_bytes().to_vec()),
            version: Some(
                concat!("meshlb ", env!("CARGO_PKG_VERSION"))
                    .as_bytes()
                    .to_vec(),
            ),
            extra: self.extra(),
            message: Some(m),
            r#type: 1,
        }
    }
}

impl lb_records::Record for DnstapRecord {
    fn is_error(&self) -> bool {
        let rcode = self
            .response_time
            .and_then(|_| self.wire.get(self.query_len + 3))
            .map_or(0, |b| b & 0x0f);
        !matches!(rcode, 0 | 3)
    }

    fn encode(&self, out: &mut Vec<u8>) {
        self.encode_unit(0, out);
    }

    fn units(&self) -> usize {
        if self.response_time.is_some() {
            2
        } else {
            1
        }
    }

    fn encode_unit(&self, unit: usize, out: &mut Vec<u8>) {
        let kind = if unit == 0 { AUTH_QUERY } else { AUTH_RESPONSE };
        // Encoding into a Vec cannot run out of room.
        let _ = self.message(kind).encode(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lb_core::RegionsTable;
    use lb_records::Record;

    fn record(response: Option<&[u8]>) -> DnstapRecord {
        let config = Config::parse(
            "t.toml",
            "[[pools]]\nname = \"eu\"\norigins = [{ name = \"a\", address = \"192.0.2.1\" }]\n[[load_balancers]]\nname = \"www.example.test\"\ndefault_pools = [\"eu\"]\n",
            &RegionsTable::embedded().expect("regions"),
        )
        .expect("config");
        DnstapRecord {
            identity: Arc::from("node-1"),
            tcp: false,
            client: "127.0.0.1:5353".parse().expect("addr"),
            server: "127.0.0.1:53".parse().expect("addr"),
            wire: [&[1u8, 2, 3][..], response.unwrap_or_default()].concat(),
            query_len: 3,
            query_time: UNIX_EPOCH + std::time::Duration::new(1_700_000_000, 5),
            response_time: response.map(|_| SystemTime::now()),
            config: Arc::new(config),
            steered: Steered {
                lb: Some(lb_core::config::LbId(0)),
                pool: Some(lb_core::config::PoolId(0)),
            },
        }
    }

    #[test]
    fn a_query_and_its_response_are_two_messages_carrying_the_decision() {
        let r = record(Some(&[0, 0, 0x84, 0x00]));
        assert_eq!(r.units(), 2);
        let mut out = Vec::new();
        r.encode_unit(1, &mut out);
        let m = DnstapMessage::decode(&out[..]).expect("decode");
        assert_eq!(m.identity.as_deref(), Some(&b"node-1"[..]));
        assert_eq!(
            m.extra.as_deref(),
            Some(&b"lb=www.example.test policy=off pool=eu"[..])
        );
        let msg = m.message.expect("message");
        assert_eq!(msg.r#type, AUTH_RESPONSE);
        assert_eq!(msg.query_address.as_deref(), Some(&[127, 0, 0, 1][..]));
        assert_eq!((msg.query_port, msg.response_port), (Some(5353), Some(53)));
        assert_eq!(msg.query_time_sec, Some(1_700_000_000));
        assert!(msg.response_message.is_some() && msg.query_message.is_none());
        assert!(!r.is_error());
    }

    #[test]
    fn a_dropped_query_is_one_message_and_a_servfail_an_error() {
        assert_eq!(record(None).units(), 1);
        assert!(record(Some(&[0, 0, 0x80, 0x02])).is_error());
        assert!(!record(Some(&[0, 0, 0x80, 0x03])).is_error());
    }
}
