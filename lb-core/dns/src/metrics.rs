//! Per-query metrics with handles registered up front, so a query costs a few atomic adds and
//! no label lookup: `meshlb_dns_queries_total{load_balancer, qtype, rcode}` and
//! `meshlb_dns_answer_duration_seconds` (of one answer in `TIMED_ONE_IN`).

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;
use lb_core::metric::{Metric, MetricUnit};
use metrics::{counter, histogram, Counter, Histogram};

use lb_core::config::{Config, LbId};

const QTYPES: [&str; 8] = ["A", "AAAA", "CNAME", "SOA", "NS", "ANY", "TXT", "other"];
const RCODES: [&str; 7] = [
    "NOERROR", "NXDOMAIN", "REFUSED", "FORMERR", "SERVFAIL", "NOTIMP", "BADVERS",
];

pub(crate) fn qtype_index(t: RecordType) -> usize {
    match t {
        RecordType::A => 0,
        RecordType::AAAA => 1,
        RecordType::CNAME => 2,
        RecordType::SOA => 3,
        RecordType::NS => 4,
        RecordType::ANY => 5,
        RecordType::TXT => 6,
        _ => 7,
    }
}

pub(crate) fn rcode_index(r: ResponseCode) -> usize {
    match r {
        ResponseCode::NoError => 0,
        ResponseCode::NXDomain => 1,
        ResponseCode::Refused => 2,
        ResponseCode::FormErr => 3,
        ResponseCode::NotImp => 5,
        ResponseCode::BADVERS => 6,
        _ => 4,
    }
}

#[derive(Debug)]
pub(crate) struct DnsMetrics {
    /// `[lb + 1][qtype][rcode]`; index 0 is "no load balancer" (apex, other names, refused).
    queries: Vec<Counter>,
    duration: Histogram,
}

impl DnsMetrics {
    pub fn new(config: &Config) -> Self {
        let names: Vec<&str> = std::iter::once("")
            .chain(config.load_balancers.iter().map(|lb| lb.name.as_str()))
            .collect();
        let mut queries = Vec::with_capacity(names.len() * QTYPES.len() * RCODES.len());
        for lb in &names {
            for q in QTYPES {
                for r in RCODES {
                    queries.push(counter!(
                        "meshlb_dns_queries_total",
                        "load_balancer" => lb.to_string(),
                        "qtype" => q,
                        "rcode" => r
                    ));
                }
            }
        }
        DnsMetrics {
            queries,
            duration: histogram!("meshlb_dns_answer_duration_seconds"),
        }
    }

    /// Counts one query; `seconds`, when it was timed, goes to the duration histogram.
    pub fn record(&self, lb: Option<LbId>, qtype: usize, rcode: usize, seconds: Option<f64>) {
        let i = (lb.map_or(0, |l| l.0 + 1) * QTYPES.len() + qtype) * RCODES.len() + rcode;
        if let Some(c) = self.queries.get(i) {
            c.increment(1);
        }
        if let Some(seconds) = seconds {
            self.duration.record(seconds);
        }
    }
}

/// One answer in this many is timed for `meshlb_dns_answer_duration_seconds`: two clock
/// reads and a histogram insert per query are a tenth of what the fast path costs
/// (docs/performance.md, "DNS"). The counters count every query.
pub(crate) const TIMED_ONE_IN: u32 = 16;

thread_local! {
    static UNTIL_TIMED: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Whether this thread's next answer is one of the timed ones.
pub(crate) fn timed() -> bool {
    UNTIL_TIMED.with(|n| {
        let left = n.get();
        if left == 0 {
            n.set(TIMED_ONE_IN - 1);
            true
        } else {
            n.set(left - 1);
            false
        }
    })
}

/// The metrics this crate records (docs/operations.md#metrics lists them; `tests/metrics_catalogue.rs`
/// holds the code and the docs to this table).
pub const METRICS: &[Metric] = &[
    Metric::counter(
        "meshlb_dns_tcp_refused_total",
        &[],
        "DNS TCP connections closed at accept because --dns-tcp-max-connections were open.",
    ),
    Metric::counter(
        "meshlb_dns_rrl_total",
        &["action"],
        "UDP DNS answers and the response-rate limit, by action: slipped (sent truncated, or BADCOOKIE to a client cookie), dropped, or cookie_exempt (a valid server cookie: not limited).",
    ),
    Metric::counter(
        "meshlb_dns_queries_total",
        &["load_balancer", "qtype", "rcode"],
        "DNS queries answered, by load balancer, query type and response code.",
    ),
    Metric::histogram(
        "meshlb_dns_answer_duration_seconds",
        &[],
        "Time to parse, steer and encode one DNS answer.",
    )
    .in_unit(MetricUnit::Seconds),
];

/// HELP text of the metrics recorded here (`promtool check metrics` requires it;
/// tests/deploy.rs runs it).
pub fn describe_metrics() {
    lb_core::describe_metrics!(METRICS);
}
