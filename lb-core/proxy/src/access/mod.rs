//! The proxy's access log (docs/operations.md#access-logs): one record per request, with
//! meshlb's decision — load balancer, pool, endpoint, policy and why that pool, the retry
//! taken — beside what every proxy logs. Records are built on the request's path but encoded
//! and written by the log's own thread (`lb_records`); a full queue drops them, counted.
//!
//! A record is finished when the answer is: at once for a buffered body (most answers), and
//! when a streamed body has been sent or dropped (`live::Counted` carries it there), so its
//! time and bytes are the whole response's.

mod record;
mod request_id;
mod texts;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use http::{HeaderValue, Request};
use lb_core::config::{Config, LbId};
use lb_core::steering::{AffinityUpdate, Decision, Target};

pub use record::{AccessFormat, AccessRecord};
pub(crate) use request_id::X_REQUEST_ID;
use texts::Texts;

/// The access log of a proxy: where records go and how they are written.
#[derive(Debug, Clone)]
pub struct AccessLog {
    pub sink: Arc<lb_records::Sink<Box<AccessRecord>>>,
    pub format: AccessFormat,
    /// Whether records carry the query string (it may hold tokens: off by default).
    pub query: bool,
}

/// What a TLS client connection negotiated, for its requests' records.
#[derive(Debug, Clone)]
pub struct TlsFacts {
    pub version: &'static str,
    pub sni: Option<Arc<str>>,
}

impl TlsFacts {
    pub fn of(conn: &rustls::ServerConnection) -> TlsFacts {
        let version = match conn.protocol_version() {
            Some(rustls::ProtocolVersion::TLSv1_3) => "TLSv1.3",
            Some(rustls::ProtocolVersion::TLSv1_2) => "TLSv1.2",
            _ => "TLS",
        };
        TlsFacts {
            version,
            sni: conn.server_name().map(Arc::from),
        }
    }
}

/// A record on its way: started with the request, finished with the answer.
pub(crate) type Pending = Box<AccessRecord>;

/// Starts a request's record, and gives the request its id: the client's `X-Request-Id` when
/// it is well-formed (`request_id.rs`), else a new one, set on the request so that the origin
/// gets it.
pub(crate) fn start<B>(
    log: &AccessLog,
    req: &mut Request<B>,
    client: SocketAddr,
    tls: Option<&TlsFacts>,
    bytes_in: u64,
) -> Pending {
    let request_id = request_id::keep_or_make(req.headers_mut());
    let headers = req.headers();
    let header = |name| headers.get(name).map(HeaderValue::as_bytes);
    let uri = req.uri();
    let texts = Texts::new([
        Some(req.method().as_str().as_bytes()),
        header(http::header::HOST).or_else(|| uri.authority().map(|a| a.as_str().as_bytes())),
        Some(uri.path().as_bytes()),
        uri.query().map(str::as_bytes),
        header(http::header::USER_AGENT),
        header(http::header::REFERER),
    ]);
    Box::new(AccessRecord {
        format: log.format,
        query: log.query,
        time: SystemTime::now(),
        start: Instant::now(),
        client,
        tls: tls.cloned(),
        version: req.version(),
        texts,
        request_id,
        bytes_in,
        config: None,
        lb: None,
        decision: None,
        affinity_hit: false,
        first: None,
        served_by: None,
        origin_tls: false,
        connect: None,
        first_byte: None,
        status: 0,
        bytes_out: None,
        total: Duration::ZERO,
    })
}

/// What the steering decided, on the record.
pub(crate) fn decided(
    record: &mut AccessRecord,
    config: &Arc<Config>,
    lb: LbId,
    decision: &Decision,
    had_binding: bool,
) {
    record.config = Some(Arc::clone(config));
    record.lb = Some(lb);
    record.affinity_hit = had_binding
        && matches!(
            decision.affinity,
            AffinityUpdate::None | AffinityUpdate::TouchHeaderSession { .. }
        );
    record.decision = Some(record::Decided {
        why: decision.why,
        rules: decision.matched_rules.clone(),
    });
}

/// Where the request went: the first endpoint tried and the one that answered or failed
/// last (they differ when the zero-downtime retry was taken), over TLS or not.
pub(crate) fn sent(record: &mut AccessRecord, (first, last): (Target, Target), tls: bool) {
    record.first = Some(first);
    record.served_by = Some(last);
    record.origin_tls = tls;
}

/// Finishes the record with the answer's status and body length (`None`: streamed, counted
/// elsewhere) and hands it to the log.
pub(crate) fn finish(mut record: Pending, log: &AccessLog, status: u16, bytes_out: Option<u64>) {
    record.status = status;
    record.bytes_out = bytes_out;
    record.total = record.start.elapsed();
    if log.sink.keeps(status >= 500) {
        log.sink.push(record);
    }
}

/// A response made here (a 404, a fixed response, a 530, an error): the request id added,
/// the record finished.
pub(crate) fn answered_here<B: hyper::body::Body>(
    record: Pending,
    log: &AccessLog,
    response: &mut http::Response<B>,
) {
    response
        .headers_mut()
        .insert(X_REQUEST_ID.clone(), record.request_id.clone());
    let length = response.body().size_hint().exact();
    finish(record, log, response.status().as_u16(), length);
}
