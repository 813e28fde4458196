//! A monitor preview in gossip (docs/api.md#previews-run-by-the-mesh). The aggregator that
//! took `POST .../preview` publishes the request under `preview/<id>` in its own state: when
//! it expires, the pools it covers, and a config document holding only the previewed monitor
//! and those pools. Each prober of a pool's `check_regions` runs that monitor once against the
//! pool's endpoints and publishes what it saw under the same key in its own state. Both are
//! deleted when the preview expires.

use std::collections::BTreeMap;

use crate::keys::{decode_pool, encode_pool, EndpointResult, MEMBER_SEPARATOR};

/// Prefix of preview keys (requests on aggregators, outcomes on probers).
pub const PREVIEW_PREFIX: &str = "preview/";

/// The key of preview `id`.
pub fn preview_key(id: &str) -> String {
    format!("{PREVIEW_PREFIX}{id}")
}

/// What an aggregator asks the probers to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreviewRequest {
    /// When it expires (unix ms): probers neither start it nor keep its outcomes after.
    pub expires_ms: u64,
    /// The pools it covers, as (id, name).
    pub pools: Vec<(String, String)>,
    /// A config document (TOML) of the previewed monitor and those pools, nothing else.
    pub document: String,
}

impl PreviewRequest {
    /// `expires_ms`, a line per pool (`id \t name`), an empty line, the document.
    pub fn encode(&self) -> String {
        let mut out = format!("{}\n", self.expires_ms);
        for (id, name) in &self.pools {
            out.push_str(&format!("{}\t{}\n", clean(id), clean(name)));
        }
        out.push('\n');
        out.push_str(&self.document);
        out
    }

    /// `None` for a value that is not a request (another version, a bug).
    pub fn decode(value: &str) -> Option<PreviewRequest> {
        let (head, document) = value.split_once("\n\n")?;
        let mut lines = head.lines();
        let expires_ms = lines.next()?.parse().ok()?;
        let pools = lines
            .map(|l| {
                l.split_once('\t')
                    .map(|(id, name)| (id.to_string(), name.to_string()))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(PreviewRequest {
            expires_ms,
            pools,
            document: document.to_string(),
        })
    }
}

fn clean(s: &str) -> String {
    s.replace(['\t', '\n', '\r'], " ")
}

/// One endpoint's outcome in a prober's answer to a preview.
#[derive(Debug, Clone, PartialEq)]
pub struct PreviewOutcome {
    pub pool: String,
    pub endpoint: String,
    /// The endpoint's address as configured (Cloudflare's previews key origins by it).
    pub address: String,
    pub result: EndpointResult,
}

/// A prober's outcomes: the lines of `keys::encode_pool`, each named `pool US endpoint US
/// address`.
pub fn encode_outcomes(outcomes: &[PreviewOutcome]) -> String {
    let named: BTreeMap<String, EndpointResult> = outcomes
        .iter()
        .map(|o| {
            let s = MEMBER_SEPARATOR;
            (
                format!("{}{s}{}{s}{}", o.pool, o.endpoint, o.address),
                o.result.clone(),
            )
        })
        .collect();
    encode_pool(&named)
}

/// Parses a prober's outcomes; malformed lines are skipped.
pub fn decode_outcomes(value: &str) -> Vec<PreviewOutcome> {
    decode_pool(value)
        .into_iter()
        .filter_map(|(name, result)| {
            let mut parts = name.split(MEMBER_SEPARATOR);
            let (pool, endpoint, address) = (parts.next()?, parts.next()?, parts.next()?);
            Some(PreviewOutcome {
                pool: pool.to_string(),
                endpoint: endpoint.to_string(),
                address: address.to_string(),
                result,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_reads_back_as_written() {
        let request = PreviewRequest {
            expires_ms: 1_700_000_000_000,
            pools: vec![
                ("eu".into(), "eu".into()),
                ("0a1b".into(), "us west".into()),
            ],
            document: "[[monitors]]\nname = \"m\"\n\n[[pools]]\nname = \"eu\"\n".into(),
        };
        assert_eq!(PreviewRequest::decode(&request.encode()), Some(request));
    }

    #[test]
    fn a_value_that_is_not_a_request_reads_as_none() {
        for v in ["", "soon\n\n", "1\nno-tab\n\n", "1\n"] {
            assert_eq!(PreviewRequest::decode(v), None, "{v:?}");
        }
    }

    #[test]
    fn outcomes_read_back_with_pool_endpoint_and_address() {
        let outcomes = vec![
            PreviewOutcome {
                pool: "eu".into(),
                endpoint: "a".into(),
                address: "127.0.0.2".into(),
                result: EndpointResult {
                    healthy: true,
                    rtt_ms: Some(1.5),
                    code: Some(200),
                    reason: None,
                },
            },
            PreviewOutcome {
                pool: "eu".into(),
                endpoint: "b".into(),
                address: "origin.example".into(),
                result: EndpointResult {
                    healthy: false,
                    rtt_ms: None,
                    code: Some(404),
                    reason: Some("HTTP 404: expected 2xx".into()),
                },
            },
        ];
        assert_eq!(decode_outcomes(&encode_outcomes(&outcomes)), outcomes);
    }
}
