//! The one client of the aggregator's admin API, for `meshlb status`, `meshlb explain`, the
//! resource commands and the demo's live view: reqwest's blocking client.

use std::io::Read;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use serde_json::Value;

#[derive(Debug, Clone, clap::Args)]
pub struct AdminArgs {
    /// The aggregator's admin API: HOST:PORT (plain HTTP) or a URL, https:// for a listener
    /// started with --admin-tls-cert.
    #[arg(
        long,
        value_name = "ADDR|URL",
        default_value = "127.0.0.1:9090",
        global = true
    )]
    pub admin: String,
    /// Verify an https:// admin API against this CA (PEM) alone [default: the public web
    /// PKI].
    #[arg(long, value_name = "FILE", global = true)]
    pub cacert: Option<PathBuf>,
    /// Present this client certificate (PEM) to an admin API that asks for one
    /// (--admin-client-ca).
    #[arg(long, value_name = "FILE", global = true, requires = "key")]
    pub cert: Option<PathBuf>,
    /// The private key (PEM) of --cert.
    #[arg(long, value_name = "FILE", global = true, requires = "cert")]
    pub key: Option<PathBuf>,
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
        let trust = lb_tls::ClientTrust {
            ca_file: self.cacert.clone(),
            pin: None,
            identity: self.cert.clone().zip(self.key.clone()),
        };
        AdminClient::with_timeouts(
            base_url(&self.admin)?,
            token,
            &trust,
            Duration::from_secs(3),
            Duration::from_secs(10),
        )
    }

    /// GET `path`, returning the JSON body; API errors become readable messages.
    pub fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.client()?.get(path)
    }
}

/// Largest answer read from the admin API.
const MAX_REPLY: usize = 64 << 20;

/// `HOST:PORT` -> `http://HOST:PORT`; an `http://` or `https://` URL as given, without a
/// trailing slash.
fn base_url(admin: &str) -> anyhow::Result<String> {
    let admin = admin.trim().trim_end_matches('/');
    if admin.starts_with("http://") || admin.starts_with("https://") {
        return Ok(admin.to_string());
    }
    if admin.contains("://") {
        bail!("--admin {admin}: the admin API is http:// or https://");
    }
    Ok(format!("http://{admin}"))
}

/// A blocking client of one aggregator's admin API.
#[derive(Debug, Clone)]
pub struct AdminClient {
    /// `http://host:port` or `https://host:port`.
    addr: String,
    token: Option<String>,
    http: reqwest::blocking::Client,
}

impl AdminClient {
    /// With its own waits: to connect, and for the whole answer (the demo's live view polls
    /// with shorter ones).
    pub fn with_timeouts(
        addr: String,
        token: Option<String>,
        trust: &lb_tls::ClientTrust,
        connect: Duration,
        answer: Duration,
    ) -> anyhow::Result<AdminClient> {
        let tls = trust.config().context("TLS settings")?;
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
        let addr = &self.addr;
        let method = reqwest::Method::from_bytes(method.as_bytes())?;
        let mut request = self.http.request(method, format!("{addr}{path}"));
        if let Some(t) = &self.token {
            request = request.bearer_auth(t);
        }
        for (k, v) in headers {
            request = request.header(*k, v);
        }
        if let Some(body) = body {
            request = request.body(body.to_vec());
        }
        let reply = request.send().map_err(|e| {
            // reqwest's own message is "error sending request": the cause (refused, a
            // certificate that does not verify) is in its chain.
            let mut why = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                why = format!("{why}: {s}");
                source = s.source();
            }
            anyhow::anyhow!(
                "cannot reach the admin API at {addr} ({why}); is an aggregator serving it?"
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
        let addr = &self.addr;
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
