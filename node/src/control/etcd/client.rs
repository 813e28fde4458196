//! A client of etcd's JSON gateway (etcd 3.4+, under `/v3/`): read a key, put it on the
//! condition that its revision is the one read (a transaction), and watch it. Spoken over
//! reqwest rather than gRPC so that nothing runs at build time (the gRPC clients generate their
//! code with `protoc`). Keys and values travel base64-encoded, 64-bit numbers as strings
//! (proto3's JSON mapping, which also leaves out zero and false fields).
//!
//! Each request goes to the member that last answered, and on a connection error, a timeout,
//! a 5xx or an "unavailable" answer (no leader yet, leader changed) to the next, each member
//! once: a killed leader costs one timeout at most.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde_json::{json, Value};

use super::settings::StoreSettings;
use crate::control::follower::causes;

/// Why the store did not answer.
#[derive(Debug, thiserror::Error)]
pub enum EtcdError {
    /// No member answered (each tried once): the store is down or unreachable from here.
    #[error("no member of the config store answered ({0})")]
    Unreachable(String),
    /// A member answered with an error that another member would answer too.
    #[error("the config store refused: {0}")]
    Refused(String),
    #[error("the config store's answer was not understood: {0}")]
    Malformed(String),
    #[error("the config store's client: {0}")]
    Setup(String),
}

/// A key's value and the revision that last changed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kv {
    pub value: Vec<u8>,
    pub mod_revision: u64,
}

/// A read: the key (if it exists) and the store's revision when it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Read {
    pub kv: Option<Kv>,
    pub revision: u64,
}

/// What a conditional put came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Put {
    /// Written: the revision of the write.
    Done { revision: u64 },
    /// The key had another revision: what it holds now.
    Conflict { current: Option<Kv> },
}

pub struct EtcdClient {
    http: reqwest::Client,
    endpoints: Vec<String>,
    /// The member tried first: the last that answered.
    preferred: AtomicUsize,
    /// etcd's user and password (read from its file at start), and the token it gave.
    user: Option<(String, String)>,
    token: tokio::sync::Mutex<Option<String>>,
    timeout: Duration,
    /// The largest answer read from a member, and the longest line of a watch.
    max_answer: usize,
}

fn b64(bytes: &[u8]) -> String {
    B64.encode(bytes)
}

/// A revision: a proto3 JSON int64 (a string, or absent for 0), never negative. Anything else
/// is refused rather than read as 0 or as a huge generation: a member answering
/// `"18446744073709551615"` would otherwise make a generation no later write could pass.
fn int(v: &Value) -> Result<u64, EtcdError> {
    let parsed = match v {
        Value::Null => Some(0),
        Value::String(s) => s.parse::<i64>().ok(),
        Value::Number(n) => n.as_i64(),
        _ => None,
    };
    parsed
        .and_then(|r| u64::try_from(r).ok())
        .ok_or_else(|| EtcdError::Malformed("a revision that is not a non-negative int64".into()))
}

fn kv_of(v: &Value) -> Result<Kv, EtcdError> {
    let value = match v.get("value").and_then(Value::as_str) {
        Some(s) => B64
            .decode(s)
            .map_err(|e| EtcdError::Malformed(format!("a value is not base64: {e}")))?,
        None => Vec::new(),
    };
    Ok(Kv {
        value,
        mod_revision: int(&v["mod_revision"])?,
    })
}

/// An error answer's message (etcd puts it in `error` and again in `message`).
fn error_of(answer: &Value) -> &str {
    answer["error"]
        .as_str()
        .or_else(|| answer["message"].as_str())
        .unwrap_or("")
}

/// Whether an error answer is one another member may not give (gRPC Unavailable, or a
/// leader that changed or is missing).
fn retryable(answer: &Value) -> bool {
    let code = answer["code"].as_u64().unwrap_or(0);
    let message = answer["error"]
        .as_str()
        .or_else(|| answer["message"].as_str())
        .unwrap_or("");
    code == 14 || message.contains("leader") || message.contains("timed out")
}

impl EtcdClient {
    /// A client of the members `settings` name, for documents of at most `max_document_bytes`
    /// (`--config-max-bytes`).
    pub fn new(
        settings: &StoreSettings,
        max_document_bytes: usize,
    ) -> Result<EtcdClient, EtcdError> {
        let tls = settings
            .tls
            .config()
            .map_err(|e| EtcdError::Setup(e.to_string()))?;
        let http = reqwest::Client::builder()
            .use_preconfigured_tls((*tls).clone())
            .connect_timeout(settings.request_timeout)
            .build()
            .map_err(|e| EtcdError::Setup(e.to_string()))?;
        let user = match &settings.user {
            None => None,
            Some((name, file)) => {
                let password = std::fs::read_to_string(file).map_err(|e| {
                    EtcdError::Setup(format!("cannot read {}: {e}", file.display()))
                })?;
                Some((name.clone(), password.trim().to_string()))
            }
        };
        Ok(EtcdClient {
            http,
            endpoints: settings.url.endpoints.clone(),
            preferred: AtomicUsize::new(0),
            user,
            token: tokio::sync::Mutex::new(None),
            timeout: settings.request_timeout,
            max_answer: max_answer(max_document_bytes),
        })
    }

    /// The members in the order to try them: the preferred one first.
    fn order(&self) -> impl Iterator<Item = (usize, &str)> {
        let n = self.endpoints.len();
        let first = self.preferred.load(Ordering::Relaxed) % n.max(1);
        (0..n).map(move |i| {
            let at = (first + i) % n;
            (at, self.endpoints[at].as_str())
        })
    }

    /// etcd's token for `user`, asked for once and again when refused: `Ok(Err(answer))`
    /// when etcd refused the user or password (its answer, which says why).
    async fn token(
        &self,
        endpoint: &str,
        fresh: bool,
    ) -> Result<Result<Option<String>, Value>, reqwest::Error> {
        let Some((name, password)) = &self.user else {
            return Ok(Ok(None));
        };
        let mut token = self.token.lock().await;
        if token.is_none() || fresh {
            let response = self
                .http
                .post(format!("{endpoint}/v3/auth/authenticate"))
                .timeout(self.timeout)
                .json(&json!({ "name": name, "password": password }))
                .send()
                .await?;
            let status = response.status();
            let mut answer = answer_of(response, self.max_answer).await?;
            match answer["token"].as_str() {
                Some(t) => *token = Some(t.to_string()),
                // A user configured before `etcdctl auth enable`: requests go without a
                // token until etcd asks for one ("user name is empty", then a fresh try).
                None if error_of(&answer).contains("authentication is not enabled") => {
                    *token = None;
                    return Ok(Ok(None));
                }
                None => {
                    *token = None;
                    if status.is_server_error() && !retryable(&answer) {
                        // Another member may answer (a proxy's 502 page, a member shutting down).
                        answer["code"] = json!(14);
                    }
                    return Ok(Err(answer));
                }
            }
        }
        Ok(Ok(token.clone()))
    }

    /// POSTs `body` to `path` on the members in turn; the first answer that is not a
    /// member's failure.
    async fn post(&self, path: &str, body: &Value) -> Result<Value, EtcdError> {
        let mut why = Vec::new();
        for (at, endpoint) in self.order() {
            match self.post_to(endpoint, path, body).await {
                Ok(Ok(answer)) => {
                    self.preferred.store(at, Ordering::Relaxed);
                    return Ok(answer);
                }
                Ok(Err(answer)) if retryable(&answer) => why.push(format!("{endpoint}: {answer}")),
                Ok(Err(answer)) => return Err(EtcdError::Refused(answer.to_string())),
                Err(e) => why.push(format!("{endpoint}: {}", causes(&e))),
            }
        }
        Err(EtcdError::Unreachable(why.join("; ")))
    }

    /// One member's answer: `Ok(Ok)` a success, `Ok(Err)` an error answer, `Err` no answer.
    async fn post_to(
        &self,
        endpoint: &str,
        path: &str,
        body: &Value,
    ) -> Result<Result<Value, Value>, reqwest::Error> {
        for attempt in 0..2 {
            let mut request = self
                .http
                .post(format!("{endpoint}{path}"))
                .timeout(self.timeout)
                .json(body);
            match self.token(endpoint, attempt > 0).await? {
                Ok(Some(token)) => request = request.header(http::header::AUTHORIZATION, token),
                Ok(None) => {}
                Err(refused) => return Ok(Err(refused)),
            }
            let response = request.send().await?;
            let status = response.status();
            let answer = answer_of(response, self.max_answer).await?;
            if status.is_success() && answer.get("error").is_none() {
                return Ok(Ok(answer));
            }
            // An expired or unknown token; or none sent because auth was off when it was asked
            // for and has been enabled since.
            let error = error_of(&answer);
            let invalid_token = error.contains("token") || error.contains("user name is empty");
            if attempt == 0 && invalid_token && self.user.is_some() {
                continue;
            }
            if status.is_server_error() && !retryable(&answer) {
                let mut answer = answer;
                answer["code"] = json!(14);
                return Ok(Err(answer));
            }
            return Ok(Err(answer));
        }
        Ok(Err(json!({ "error": "authentication failed" })))
    }

    /// Reads `key`.
    pub async fn get(&self, key: &str) -> Result<Read, EtcdError> {
        let answer = self
            .post("/v3/kv/range", &json!({ "key": b64(key.as_bytes()) }))
            .await?;
        let kv = match answer["kvs"].as_array().and_then(|k| k.first()) {
            Some(kv) => Some(kv_of(kv)?),
            None => None,
        };
        let revision = int(&answer["header"]["revision"])?;
        if kv.as_ref().is_some_and(|kv| kv.mod_revision > revision) {
            return Err(EtcdError::Malformed(format!(
                "the key's revision is past the store's ({revision})"
            )));
        }
        Ok(Read { kv, revision })
    }

    /// Puts `value` at `key` if its last change is revision `expected` (0: if it does not
    /// exist).
    pub async fn put_if(&self, key: &str, expected: u64, value: &[u8]) -> Result<Put, EtcdError> {
        let k = b64(key.as_bytes());
        let body = json!({
            "compare": [{ "target": "MOD", "key": k, "result": "EQUAL", "mod_revision": expected.to_string() }],
            "success": [{ "request_put": { "key": k, "value": b64(value) } }],
            "failure": [{ "request_range": { "key": k } }],
        });
        let answer = self.post("/v3/kv/txn", &body).await?;
        if answer["succeeded"].as_bool().unwrap_or(false) {
            return Ok(Put::Done {
                revision: int(&answer["header"]["revision"])?,
            });
        }
        let current = answer["responses"]
            .as_array()
            .and_then(|r| r.first())
            .and_then(|r| r["response_range"]["kvs"].as_array())
            .and_then(|kvs| kvs.first())
            .map(kv_of)
            .transpose()?;
        Ok(Put::Conflict { current })
    }

    /// Opens a watch of `key` from revision `from`, on the first member that takes it.
    pub async fn watch(&self, key: &str, from: u64) -> Result<Watch, EtcdError> {
        let body = json!({ "create_request": {
            "key": b64(key.as_bytes()),
            "start_revision": from.to_string(),
        }});
        let mut why = Vec::new();
        for (at, endpoint) in self.order() {
            let mut request = self.http.post(format!("{endpoint}/v3/watch")).json(&body);
            match self.token(endpoint, false).await {
                Ok(Ok(Some(token))) => request = request.header(http::header::AUTHORIZATION, token),
                Ok(Ok(None)) => {}
                Ok(Err(refused)) => {
                    why.push(format!("{endpoint}: {refused}"));
                    continue;
                }
                Err(e) => {
                    why.push(format!("{endpoint}: {}", causes(&e)));
                    continue;
                }
            }
            match tokio::time::timeout(self.timeout, request.send()).await {
                Ok(Ok(r)) if r.status().is_success() => {
                    self.preferred.store(at, Ordering::Relaxed);
                    return Ok(Watch {
                        response: r,
                        buffer: Vec::new(),
                        scanned: 0,
                        max_line: self.max_answer,
                    });
                }
                Ok(Ok(r)) => why.push(format!("{endpoint}: {}", r.status())),
                Ok(Err(e)) => why.push(format!("{endpoint}: {}", causes(&e))),
                Err(_) => why.push(format!("{endpoint}: no answer within {:?}", self.timeout)),
            }
        }
        Err(EtcdError::Unreachable(why.join("; ")))
    }
}

/// The largest answer read from a member, or line of a watch: a document of
/// `max_document_bytes` (`--config-max-bytes`) base64-encoded, in etcd's JSON, with room for
/// the rest of the answer.
fn max_answer(max_document_bytes: usize) -> usize {
    max_document_bytes.saturating_mul(4) / 3 + (64 << 10)
}

/// A member's answer as a JSON object: etcd's own, or, for a body that is not one (a proxy's
/// error page; etcd 3.4's gateway refusing a client certificate that has a CommonName), an
/// `error` that says what came instead. Read up to `max` bytes.
async fn answer_of(mut response: reqwest::Response, max: usize) -> Result<Value, reqwest::Error> {
    let status = response.status();
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if body.len() + chunk.len() > max {
            return Ok(json!({ "error": format!(
                "HTTP {status}: an answer beyond {max} bytes (a document over --config-max-bytes)"
            ) }));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(answer_from(status, &body))
}

fn answer_from(status: http::StatusCode, body: &[u8]) -> Value {
    match serde_json::from_slice::<Value>(body) {
        Ok(answer) if answer.is_object() => answer,
        _ => {
            let shown = String::from_utf8_lossy(&body[..body.len().min(300)]);
            json!({ "error": format!("HTTP {status}: {}", shown.trim()) })
        }
    }
}

/// What a watch says next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchEvent {
    /// The key was written (or deleted: an empty value) at `kv.mod_revision`.
    Changed(Kv),
    /// The revisions asked for are compacted away, or the watch was cancelled: read the key
    /// again.
    Lost,
}

/// An open watch: etcd's gateway streams one JSON message per line.
pub struct Watch {
    response: reqwest::Response,
    buffer: Vec<u8>,
    /// How much of `buffer` is known to hold no line end (a long line arrives in many chunks).
    scanned: usize,
    /// The longest line taken (`max_answer`).
    max_line: usize,
}

impl Watch {
    /// The next events; `Err` when the stream ended or broke.
    pub async fn next(&mut self) -> Result<Vec<WatchEvent>, EtcdError> {
        loop {
            let unread = &self.buffer[self.scanned..];
            if let Some(at) = unread.iter().position(|&b| b == b'\n') {
                let end = self.scanned + at;
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                self.scanned = 0;
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                return parse_watch_line(&line);
            }
            self.scanned = self.buffer.len();
            if self.buffer.len() > self.max_line {
                return Err(EtcdError::Malformed(format!(
                    "a watch message beyond {} bytes (a document over --config-max-bytes)",
                    self.max_line
                )));
            }
            match self.response.chunk().await {
                Ok(Some(bytes)) => self.buffer.extend_from_slice(&bytes),
                Ok(None) => {
                    if self.buffer.iter().all(u8::is_ascii_whitespace) {
                        return Err(EtcdError::Unreachable("the watch stream ended".into()));
                    }
                    let line = std::mem::take(&mut self.buffer);
                    return parse_watch_line(&line);
                }
                Err(e) => return Err(EtcdError::Unreachable(format!("the watch broke: {e}"))),
            }
        }
    }
}

fn parse_watch_line(line: &[u8]) -> Result<Vec<WatchEvent>, EtcdError> {
    let message: Value = serde_json::from_slice(line)
        .map_err(|e| EtcdError::Malformed(format!("a watch message: {e}")))?;
    if message.get("error").is_some() {
        return Err(EtcdError::Unreachable(format!(
            "the watch failed: {message}"
        )));
    }
    let result = &message["result"];
    if int(&result["compact_revision"])? > 0 || result["canceled"].as_bool().unwrap_or(false) {
        return Ok(vec![WatchEvent::Lost]);
    }
    let mut events = Vec::new();
    for e in result["events"].as_array().into_iter().flatten() {
        let mut kv = kv_of(&e["kv"])?;
        if e["type"].as_str() == Some("DELETE") {
            kv.value.clear();
        }
        events.push(WatchEvent::Changed(kv));
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_messages_read_as_etcd_writes_them() {
        let put = br#"{"result":{"header":{"revision":"9"},"events":[{"kv":{"key":"L2svY29uZmln","value":"YSA9IDE=","mod_revision":"9"}}]}}"#;
        assert_eq!(
            parse_watch_line(put).expect("parses"),
            [WatchEvent::Changed(Kv {
                value: b"a = 1".to_vec(),
                mod_revision: 9
            })]
        );
        let created = br#"{"result":{"header":{"revision":"9"},"created":true}}"#;
        assert_eq!(parse_watch_line(created).expect("parses"), []);
        // etcd 3.4.23's answer to a watch from a revision compacted away.
        let compacted = br#"{"result":{"header":{"cluster_id":"8140765981764738059","member_id":"185828541645115251","raft_term":"2"},"canceled":true,"compact_revision":"4"}}"#;
        assert_eq!(
            parse_watch_line(compacted).expect("parses"),
            [WatchEvent::Lost]
        );
        assert!(parse_watch_line(br#"{"error":{"grpc_code":14}}"#).is_err());
        // A revision etcd cannot have (its revisions are int64) is refused, not taken.
        let huge = br#"{"result":{"events":[{"kv":{"value":"YSA9IDE=","mod_revision":"18446744073709551615"}}]}}"#;
        assert!(matches!(
            parse_watch_line(huge),
            Err(EtcdError::Malformed(_))
        ));
        let negative =
            br#"{"result":{"events":[{"kv":{"value":"YSA9IDE=","mod_revision":"-1"}}]}}"#;
        assert!(parse_watch_line(negative).is_err());
        assert!(parse_watch_line(b"not json").is_err());
    }

    #[test]
    fn an_answer_that_is_not_etcds_json_is_an_error_that_shows_it() {
        let refused = b"CommonName of client sending a request against gateway will be ignored and not used as expected\n";
        let answer = answer_from(http::StatusCode::BAD_REQUEST, refused);
        let error = answer["error"].as_str().expect("an error");
        assert!(
            error.starts_with("HTTP 400 Bad Request: CommonName"),
            "{error}"
        );
        assert!(!retryable(&answer), "another member refuses it too");
        assert!(answer_from(http::StatusCode::OK, b"[1]")["error"].is_string());
        let range = br#"{"header":{"revision":"3"}}"#;
        assert_eq!(
            answer_from(http::StatusCode::OK, range)["header"]["revision"],
            "3"
        );
    }
}
