//! SMTP (Cloudflare): TCP, a 220 greeting, EHLO (or HELO) answered 250, QUIT answered 221.
//! Any other code fails the probe with that code.

use std::time::{Duration, Instant};

use super::{socket_addr, Check, Dialer};
use crate::failure::Failure;
use crate::outcome::Attempt;
use crate::target::ProbeTarget;
use futures::future::BoxFuture;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};

/// Longest reply line read, and most lines in one reply: a hostile server cannot make the
/// prober buffer without bound.
const MAX_LINE: u64 = 1024;
const MAX_LINES: usize = 64;

pub(super) struct SmtpMonitor(pub(super) Dialer);

impl Check for SmtpMonitor {
    fn attempt<'a>(&'a self, target: &'a ProbeTarget, timeout: Duration) -> BoxFuture<'a, Attempt> {
        Box::pin(async move {
            let start = Instant::now();
            match tokio::time::timeout(timeout, dialogue(&self.0, target)).await {
                Ok(Ok(code)) => Attempt::pass(start.elapsed(), Some(code)),
                Ok(Err((code, reason))) => Attempt::fail(start.elapsed(), code, reason),
                Err(_) => Attempt::fail(start.elapsed(), None, Failure::Timeout),
            }
        })
    }
}

/// A failure and the reply code that caused it, when there was one.
type Failed = (Option<u32>, Failure);

async fn dialogue(dial: &Dialer, target: &ProbeTarget) -> Result<u32, Failed> {
    let addr = socket_addr(&target.address, target.port)
        .await
        .map_err(|e| (None, e))?;
    let stream = dial.connect(target, addr).await.map_err(|e| (None, e))?;
    let (read, mut write) = tokio::io::split(stream);
    let mut read = BufReader::new(read);
    expect(&mut read, 220, "greeting").await?;
    write
        .write_all(b"EHLO meshlb.probe\r\n")
        .await
        .map_err(|e| (None, Failure::from_io(&e)))?;
    match reply(&mut read).await? {
        250 => {}
        // EHLO not understood: an old server; HELO is what Cloudflare sends anyway.
        500 | 502 => {
            write
                .write_all(b"HELO meshlb.probe\r\n")
                .await
                .map_err(|e| (None, Failure::from_io(&e)))?;
            expect(&mut read, 250, "HELO").await?;
        }
        other => {
            return Err((
                Some(other),
                Failure::SmtpCode {
                    code: other,
                    step: "EHLO",
                    expected: None,
                },
            ))
        }
    }
    write
        .write_all(b"QUIT\r\n")
        .await
        .map_err(|e| (None, Failure::from_io(&e)))?;
    expect(&mut read, 221, "QUIT").await
}

async fn expect<R: AsyncRead + Unpin>(
    read: &mut BufReader<R>,
    want: u32,
    step: &'static str,
) -> Result<u32, Failed> {
    match reply(read).await? {
        code if code == want => Ok(code),
        code => Err((
            Some(code),
            Failure::SmtpCode {
                code,
                step,
                expected: Some(want),
            },
        )),
    }
}

/// Reads one (possibly multi-line, `250-...`) reply and returns its code.
async fn reply<R: AsyncRead + Unpin>(read: &mut BufReader<R>) -> Result<u32, Failed> {
    for _ in 0..MAX_LINES {
        let mut line = Vec::new();
        let n = (&mut *read)
            .take(MAX_LINE)
            .read_until(b'\n', &mut line)
            .await
            .map_err(|e| (None, Failure::from_io(&e)))?;
        if n == 0 {
            return Err((None, Failure::Closed));
        }
        let code = line
            .get(..3)
            .and_then(|c| std::str::from_utf8(c).ok())
            .and_then(|c| c.parse::<u32>().ok())
            .ok_or_else(|| {
                (
                    None,
                    Failure::NotSmtp(String::from_utf8_lossy(&line).trim_end().to_string()),
                )
            })?;
        // `250-` continues, `250 ` (or a bare `250`) ends the reply.
        if line.get(3) != Some(&b'-') {
            return Ok(code);
        }
    }
    Err((None, Failure::LongReply(MAX_LINES)))
}
