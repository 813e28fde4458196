//! The records an aggregator keeps of what it served (docs/operations.md#records): the
//! proxy's access log, the layer-4 log and dnstap, each with its destination, format,
//! sampling and queue.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use lb_records::{Destination, Framing, Sampling, SinkSettings};

use super::FlagError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AccessLogFormat {
    /// One JSON object per line, every field (docs/operations.md#access-logs).
    Json,
    /// Apache's combined format, for tools that read it.
    Combined,
}

#[derive(Debug, clap::Args)]
pub struct RecordArgs {
    /// Write the proxy's access log here, one record per request (`-`: stdout). With it,
    /// every request gets an X-Request-Id (the client's when well-formed), sent to the origin
    /// and returned.
    #[arg(long, value_name = "PATH")]
    access_log: Option<PathBuf>,
    /// The access log's format.
    #[arg(long, value_enum, default_value_t = AccessLogFormat::Json)]
    access_log_format: AccessLogFormat,
    /// Keep query strings in the access log (they may carry tokens: left out by default).
    #[arg(long)]
    access_log_query: bool,
    /// Keep one access record in N (errors, 5xx, always kept unless --records-sample-errors).
    #[arg(long, value_name = "N", default_value_t = 1)]
    access_log_sample: u64,
    /// Write the layer-4 log here, one JSON record per TCP connection and UDP flow (`-`:
    /// stdout).
    #[arg(long, value_name = "PATH")]
    l4_log: Option<PathBuf>,
    /// Keep one layer-4 record in N (failed connections always kept).
    #[arg(long, value_name = "N", default_value_t = 1)]
    l4_log_sample: u64,
    /// Write dnstap (Frame Streams, `protobuf:dnstap.Dnstap`) to this file, started afresh
    /// at each open as fstrm's own file writer does.
    #[arg(long, value_name = "PATH", conflicts_with = "dnstap_socket")]
    dnstap: Option<PathBuf>,
    /// Send dnstap to a Frame Streams collector listening on this Unix socket
    /// (fstrm_capture, vector, dnstap), reconnecting with backoff.
    #[arg(long, value_name = "PATH")]
    dnstap_socket: Option<PathBuf>,
    /// Keep one dnstap query in N (SERVFAIL, REFUSED and the like always kept).
    #[arg(long, value_name = "N", default_value_t = 1)]
    dnstap_sample: u64,
    /// Sample error records like the others, instead of keeping them all.
    #[arg(long)]
    records_sample_errors: bool,
    /// Records each log holds for its writer; beyond, they are dropped and counted
    /// (meshlb_log_records_dropped_total).
    #[arg(long, value_name = "N", default_value_t = 65_536)]
    records_queue: usize,
    /// How long a busy log lets records gather between writes.
    #[arg(long, value_name = "MS", default_value_t = 20)]
    records_flush_ms: u64,
    /// The longest a write to a dnstap collector may block before it is reconnected.
    #[arg(long, value_name = "MS", default_value_t = 5_000)]
    records_write_timeout_ms: u64,
}

impl RecordArgs {
    fn settings(&self, one_in: u64) -> SinkSettings {
        SinkSettings {
            queue: self.records_queue.max(1),
            sampling: Sampling {
                one_in: one_in.max(1),
                errors_always: !self.records_sample_errors,
            },
            flush_interval: Duration::from_millis(self.records_flush_ms.max(1)),
            write_timeout: Duration::from_millis(self.records_write_timeout_ms.max(1)),
        }
    }

    /// The proxy's access log, started.
    pub fn access_log(&self) -> Result<Option<lb_proxy::AccessLog>, FlagError> {
        let Some(path) = &self.access_log else {
            return Ok(None);
        };
        let sink = lb_records::start(
            "access",
            Destination::file_or_stdout(path),
            Framing::Lines,
            self.settings(self.access_log_sample),
        )
        .map_err(|error| FlagError::Records {
            flag: "--access-log",
            error,
        })?;
        Ok(Some(lb_proxy::AccessLog {
            sink,
            format: match self.access_log_format {
                AccessLogFormat::Json => lb_proxy::AccessFormat::Json,
                AccessLogFormat::Combined => lb_proxy::AccessFormat::Combined,
            },
            query: self.access_log_query,
        }))
    }

    /// The layer-4 log, started.
    pub fn l4_log(&self) -> Result<Option<lb_l4::L4Log>, FlagError> {
        let Some(path) = &self.l4_log else {
            return Ok(None);
        };
        let sink = lb_records::start(
            "l4",
            Destination::file_or_stdout(path),
            Framing::Lines,
            self.settings(self.l4_log_sample),
        )
        .map_err(|error| FlagError::Records {
            flag: "--l4-log",
            error,
        })?;
        Ok(Some(lb_l4::L4Log(sink)))
    }

    /// dnstap, started, naming this node in every message.
    pub fn dnstap(&self, identity: &str) -> Result<Option<lb_dns::Dnstap>, FlagError> {
        let destination = match (&self.dnstap, &self.dnstap_socket) {
            (Some(file), _) => Destination::File(file.clone()),
            (None, Some(socket)) => Destination::Socket(socket.clone()),
            (None, None) => return Ok(None),
        };
        let sink = lb_records::start(
            "dnstap",
            destination,
            Framing::FrameStream {
                content_type: lb_dns::DNSTAP_CONTENT_TYPE,
            },
            self.settings(self.dnstap_sample),
        )
        .map_err(|error| FlagError::Records {
            flag: "--dnstap",
            error,
        })?;
        Ok(Some(lb_dns::Dnstap {
            sink,
            identity: Arc::from(identity),
        }))
    }

    /// Whether any record was asked for where there is nothing to record.
    pub fn unused(&self, proxy: bool, l4: bool, dns: bool) -> Option<&'static str> {
        if self.access_log.is_some() && !proxy {
            return Some("--access-log needs --proxy or --proxy-tls");
        }
        if self.l4_log.is_some() && !l4 {
            return Some("--l4-log needs --l4");
        }
        if (self.dnstap.is_some() || self.dnstap_socket.is_some()) && !dns {
            return Some("--dnstap and --dnstap-socket need --dns");
        }
        None
    }
}
