//! The one client of the aggregator's admin API, for `meshlb status`, `meshlb explain` and the
//! demo's live view.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use serde_json::Value;

#[derive(Debug, Clone, clap::Args)]
pub struct AdminArgs {
    /// The aggregator's admin API address.
    #[arg(
        long,
        value_name = "ADDR",
        default_value = "127.0.0.1:9090",
        global = true
    )]
    pub admin: SocketAddr,
    /// File holding the admin bearer token (else MESHLB_ADMIN_TOKEN).
    #[arg(long, value_name = "FILE", global = true)]
    pub token_file: Option<PathBuf>,
    /// Print the raw JSON.
    #[arg(long, global = true)]
    pub json: bool,
}

impl AdminArgs {
    /// A client of the API these arguments name, its token read now.
    pub fn client(&self) -> anyhow::Result<AdminClient> {
        let token = match &self.token_file {
            Some(f) => Some(
                std::fs::read_to_string(f)
                    .with_context(|| format!("cannot read {}", f.display()))?
                    .trim()
                    .to_string(),
            ),
            None => std::env::var("MESHLB_ADMIN_TOKEN").ok(),
        };
        Ok(AdminClient::new(self.admin, token))
    }

    /// GET `path`, returning the JSON body; API errors become readable messages.
    pub fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.client()?.get(path)
    }
}

/// Largest answer read from the admin API.
const MAX_REPLY: u64 = 64 << 20;

/// A blocking client of one aggregator's admin API, for `status`, `explain` and `demo`.
#[derive(Debug, Clone)]
pub struct AdminClient {
    addr: SocketAddr,
    token: Option<String>,
    connect_timeout: Duration,
    read_timeout: Duration,
}

impl AdminClient {
    pub fn new(addr: SocketAddr, token: Option<String>) -> AdminClient {
        AdminClient {
            addr,
            token,
            connect_timeout: Duration::from_secs(3),
            read_timeout: Duration::from_secs(10),
        }
    }

    /// Shorter waits, for a caller that polls (the demo's live view).
    pub fn with_timeouts(self, connect: Duration, read: Duration) -> AdminClient {
        AdminClient {
            connect_timeout: connect,
            read_timeout: read,
            ..self
        }
    }

    /// One request: (status, the `ETag`, the body). `headers` are added as given.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        headers: &[(&str, String)],
    ) -> anyhow::Result<(u16, Option<String>, String)> {
        let addr = self.addr;
        let mut s = TcpStream::connect_timeout(&addr, self.connect_timeout).with_context(|| {
            format!(
                "cannot reach the admin API at {addr} (is `meshlb aggregator --admin {addr}` running?)"
            )
        })?;
        s.set_read_timeout(Some(self.read_timeout))?;
        let mut head = format!("{method} {path} HTTP/1.0\r\nHost: {addr}\r\n");
        if let Some(t) = &self.token {
            head.push_str(&format!("Authorization: Bearer {t}\r\n"));
        }
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        let body = body.unwrap_or_default();
        head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        s.write_all(head.as_bytes())?;
        s.write_all(body)?;
        let mut raw = Vec::new();
        s.take(MAX_REPLY).read_to_end(&mut raw)?;
        let text = String::from_utf8_lossy(&raw);
        let (head, body) = text
            .split_once("\r\n\r\n")
            .ok_or_else(|| anyhow!("malformed reply from {addr}"))?;
        let status: u16 = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let etag = head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("etag")
                .then(|| v.trim().trim_matches('"').to_string())
        });
        Ok((status, etag, body.to_string()))
    }

    /// GET `path`, returning the JSON body; API errors become readable messages.
    pub fn get(&self, path: &str) -> anyhow::Result<Value> {
        let addr = self.addr;
        let (status, _, body) = self.request("GET", path, None, &[])?;
        let value: Value = serde_json::from_str(&body)
            .with_context(|| format!("the admin API at {addr} did not answer JSON"))?;
        if status != 200 {
            bail!(
                "{addr} answered {status}: {}",
                value["error"].as_str().unwrap_or(&body)
            );
        }
        Ok(value)
    }
}
