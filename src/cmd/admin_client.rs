//! The one client of the aggregator's admin API, for `meshlb status`, `meshlb explain`, the
//! resource commands and the demo's live view: reqwest's blocking client.

use std::io::Read;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
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
        AdminClient::new(self.admin, token)
    }

    /// GET `path`, returning the JSON body; API errors become readable messages.
    pub fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.client()?.get(path)
    }
}

/// Largest answer read from the admin API.
const MAX_REPLY: usize = 64 << 20;

/// A blocking client of one aggregator's admin API.
#[derive(Debug, Clone)]
pub struct AdminClient {
    addr: SocketAddr,
    token: Option<String>,
    http: reqwest::blocking::Client,
}

impl AdminClient {
    pub fn new(addr: SocketAddr, token: Option<String>) -> anyhow::Result<AdminClient> {
        AdminClient::with_timeouts(addr, token, Duration::from_secs(3), Duration::from_secs(10))
    }

    /// With its own waits: to connect, and for the whole answer (the demo's live view polls
    /// with shorter ones).
    pub fn with_timeouts(
        addr: SocketAddr,
        token: Option<String>,
        connect: Duration,
        answer: Duration,
    ) -> anyhow::Result<AdminClient> {
        // https:// addresses trust what a webhook's do (`lb-tls`).
        let tls = lb_tls::client_config(false, None).context("TLS settings")?;
        let http = reqwest::blocking::Client::builder()
            .use_preconfigured_tls((*tls).clone())
            .connect_timeout(connect)
            .timeout(answer)
            .build()
            .context("the admin API's HTTP client")?;
        Ok(AdminClient { addr, token, http })
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
        let method = reqwest::Method::from_bytes(method.as_bytes())?;
        let mut request = self.http.request(method, format!("http://{addr}{path}"));
        if let Some(t) = &self.token {
            request = request.bearer_auth(t);
        }
        for (k, v) in headers {
            request = request.header(*k, v);
        }
        if let Some(body) = body {
            request = request.body(body.to_vec());
        }
        let reply = request.send().with_context(|| {
            format!(
                "cannot reach the admin API at {addr} (is `meshlb aggregator --admin {addr}` running?)"
            )
        })?;
        let status = reply.status().as_u16();
        let etag = reply
            .headers()
            .get(reqwest::header::ETAG)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.trim().trim_matches('"').to_string());
        let mut bytes = Vec::new();
        reply
            .take(MAX_REPLY as u64 + 1)
            .read_to_end(&mut bytes)
            .with_context(|| format!("the answer of {addr}"))?;
        if bytes.len() > MAX_REPLY {
            bail!("{addr} answered more than {MAX_REPLY} bytes");
        }
        Ok((status, etag, String::from_utf8_lossy(&bytes).into_owned()))
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
