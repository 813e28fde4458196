//! What one probe found: pass or fail, how long it took, the response code, and a short reason.

use std::time::Duration;

use serde::Serialize;

use crate::failure::Failure;

/// One attempt at one endpoint.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Attempt {
    pub passed: bool,
    /// Time to the verdict: for HTTP, to the first byte of the response.
    #[serde(serialize_with = "as_millis")]
    pub rtt: Duration,
    /// HTTP status, SMTP reply code or LDAP result code, when there is one.
    pub code: Option<u32>,
    /// Why it failed (`timeout`, `connection refused`, `unexpected code 503`, ...).
    pub reason: Option<Failure>,
    /// HTTP(S) phase timings, kept apart so a slow TLS handshake is told from a slow app.
    pub timings: Option<HttpTimings>,
}

impl Attempt {
    pub fn pass(rtt: Duration, code: Option<u32>) -> Self {
        Attempt {
            passed: true,
            rtt,
            code,
            reason: None,
            timings: None,
        }
    }

    pub fn fail(rtt: Duration, code: Option<u32>, reason: Failure) -> Self {
        Attempt {
            passed: false,
            rtt,
            code,
            reason: Some(reason),
            timings: None,
        }
    }
}

/// Phases of an HTTP(S) probe, each measured from the start of the attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct HttpTimings {
    #[serde(serialize_with = "as_millis")]
    pub connect: Duration,
    /// TLS handshake done (equal to `connect` for plain HTTP).
    #[serde(serialize_with = "as_millis")]
    pub tls: Duration,
    /// Response headers received.
    #[serde(serialize_with = "as_millis")]
    pub first_byte: Duration,
    /// Verdict reached (body read when an expected body is set).
    #[serde(serialize_with = "as_millis")]
    pub total: Duration,
}

/// A probe: the last attempt and how many attempts it took (1 + retries used).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProbeResult {
    #[serde(flatten)]
    pub attempt: Attempt,
    pub tries: u32,
}

fn as_millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1000.0)
}
