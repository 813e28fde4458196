//! The http and https monitor types: their settings (method, path, headers, expected codes
//! and body, redirects, TLS trust), Cloudflare's defaults for them, and their validation from
//! the monitor's fields. The probe is `prober/src/monitors/http.rs`.

use crate::choice::Choice;
use crate::config::raw::RawMonitor;
use crate::config::validate::Validator;

/// HTTP and HTTPS monitor settings.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpCheck {
    pub method: HttpMethod,
    /// Request path, starting with `/` (default `/`).
    pub path: String,
    /// Port; 0 leaves it to the endpoint's own port, else 80 for http and 443 for https (the
    /// monitor's port, when set, wins over the endpoint's: `MonitorKind::resolve_port`).
    pub port: u16,
    /// Request headers, names as written; `Host` here is overridden by the endpoint's.
    pub headers: Vec<(String, Vec<String>)>,
    pub expected_codes: ExpectedCodes,
    /// Case-insensitive substring of the first 10 KiB of the body, if set.
    pub expected_body: Option<String>,
    /// Cloudflare: a 3xx fails unless redirects are followed.
    pub follow_redirects: bool,
    /// Accept self-signed or expired certificates and name mismatches.
    pub allow_insecure: bool,
    /// Extra trust anchors (PEM), for origins behind a private CA.
    pub ca_file: Option<std::path::PathBuf>,
}

crate::choice! {
    /// Cloudflare allows GET and HEAD for HTTP monitors.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum HttpMethod {
        Get => "GET",
        Head => "HEAD",
    }
}

/// `expected_codes`: a comma-separated list of codes (`200`) and classes (`2xx`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectedCodes(Vec<CodePattern>);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CodePattern {
    Exact(u16),
    /// The hundreds digit: `2xx` is `Class(2)`.
    Class(u16),
}

impl Default for ExpectedCodes {
    /// Cloudflare's default, `"200"`.
    fn default() -> Self {
        ExpectedCodes(vec![CodePattern::Exact(200)])
    }
}

/// A part of `expected_codes` that is neither a code nor a class.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodesError {
    #[error("`{0}` is not a status class such as 2xx")]
    NotAClass(String),
    #[error("`{0}` is not a status code (100-599) or class (2xx)")]
    NotACode(String),
}

impl ExpectedCodes {
    /// Parses `"200"`, `"2xx"`, `"200,301"`, `"2xx,304"`.
    pub fn parse(text: &str) -> Result<Self, CodesError> {
        let mut patterns = Vec::new();
        for part in text.split(',').map(str::trim) {
            let lower = part.to_ascii_lowercase();
            let pattern = if let Some(d) = lower.strip_suffix("xx") {
                match d.parse::<u16>() {
                    Ok(c) if (1..=5).contains(&c) && d.len() == 1 => CodePattern::Class(c),
                    _ => return Err(CodesError::NotAClass(part.to_string())),
                }
            } else {
                match part.parse::<u16>() {
                    Ok(c) if (100..=599).contains(&c) => CodePattern::Exact(c),
                    _ => return Err(CodesError::NotACode(part.to_string())),
                }
            };
            patterns.push(pattern);
        }
        Ok(ExpectedCodes(patterns))
    }

    pub fn matches(&self, status: u16) -> bool {
        self.0.iter().any(|p| match *p {
            CodePattern::Exact(c) => c == status,
            CodePattern::Class(c) => status / 100 == c,
        })
    }
}

impl Validator<'_> {
    /// An http or https monitor's settings from its fields, each error reported.
    pub(in crate::config) fn http_check(
        &mut self,
        path: &str,
        m: &RawMonitor,
        port: u16,
    ) -> HttpCheck {
        let method = match m.method.as_deref().map(str::to_ascii_uppercase).as_deref() {
            None | Some("GET") => HttpMethod::Get,
            Some("HEAD") => HttpMethod::Head,
            Some(_) => {
                self.sink.push(
                    format!("{path}.method"),
                    format!(
                        "HTTP monitors use {} (Cloudflare's choice: probes must not change state)",
                        <HttpMethod as Choice>::expected()
                    ),
                );
                HttpMethod::Get
            }
        };
        if !m.path.starts_with('/') {
            self.sink
                .push(format!("{path}.path"), "must start with `/`");
        }
        let expected_codes =
            match ExpectedCodes::parse(m.expected_codes.as_deref().unwrap_or("200")) {
                Ok(c) => c,
                Err(e) => {
                    self.sink
                        .push(format!("{path}.expected_codes"), e.to_string());
                    ExpectedCodes::default()
                }
            };
        let headers = self.headers(&format!("{path}.header"), &m.header, false);
        HttpCheck {
            method,
            path: m.path.clone(),
            port,
            headers,
            expected_codes,
            expected_body: (!m.expected_body.is_empty()).then(|| m.expected_body.clone()),
            follow_redirects: m.follow_redirects,
            allow_insecure: m.allow_insecure,
            ca_file: m.ca_file.as_ref().map(Into::into),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_codes_forms() {
        let c = ExpectedCodes::parse("2xx,304").unwrap();
        assert!(c.matches(200) && c.matches(299) && c.matches(304));
        assert!(!c.matches(301) && !c.matches(500));
        let c = ExpectedCodes::parse("200, 301").unwrap();
        assert!(c.matches(301) && !c.matches(204));
        assert!(ExpectedCodes::parse("2x").is_err());
        assert!(ExpectedCodes::parse("600").is_err());
        assert!(ExpectedCodes::parse("").is_err());
        assert!(ExpectedCodes::parse("9xx").is_err());
    }
}
