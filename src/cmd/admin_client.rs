//! A small client of the aggregator's admin API for `meshlb status` and `meshlb explain`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use serde_json::Value;

#[derive(Debug, Clone, clap::Args)]
pub struct AdminArgs {
    /// The aggregator's admin API address.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9090")]
    pub admin: SocketAddr,
    /// File holding the admin bearer token (else MESHLB_ADMIN_TOKEN).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Print the raw JSON.
    #[arg(long)]
    pub json: bool,
}

impl AdminArgs {
    /// GET `path`, returning the JSON body; API errors become readable messages.
    pub fn get(&self, path: &str) -> anyhow::Result<Value> {
        let token = match &self.token_file {
            Some(f) => Some(
                std::fs::read_to_string(f)
                    .with_context(|| format!("cannot read {}", f.display()))?
                    .trim()
                    .to_string(),
            ),
            None => std::env::var("MESHLB_ADMIN_TOKEN").ok(),
        };
        let mut s =
            TcpStream::connect_timeout(&self.admin, Duration::from_secs(3)).with_context(|| {
                format!(
                    "cannot reach the admin API at {} (is `meshlb aggregator --admin {}` running?)",
                    self.admin, self.admin
                )
            })?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
        write!(
            s,
            "GET {path} HTTP/1.0\r\nHost: {}\r\n{auth}\r\n",
            self.admin
        )?;
        let mut raw = Vec::new();
        s.take(64 << 20).read_to_end(&mut raw)?;
        let text = String::from_utf8_lossy(&raw);
        let (head, body) = text
            .split_once("\r\n\r\n")
            .ok_or_else(|| anyhow!("malformed reply from {}", self.admin))?;
        let status: u16 = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let value: Value = serde_json::from_str(body)
            .with_context(|| format!("the admin API at {} did not answer JSON", self.admin))?;
        if status != 200 {
            bail!(
                "{} answered {status}: {}",
                self.admin,
                value["error"].as_str().unwrap_or(body)
            );
        }
        Ok(value)
    }
}
