//! The clients the trials send traffic with: HTTP/1.1 exchanges on a kept-alive connection
//! (by Content-Length or chunks), who answered on a new connection, and `dig`.

use std::process::Command;
use std::time::Duration;

/// One request on `s` (kept alive): the status and the body, read by Content-Length or chunks.
pub fn exchange(s: &mut std::net::TcpStream, host: &str, path: &str) -> Option<(u16, Vec<u8>)> {
    exchange_with(s, host, path, "").map(|(status, _, body)| (status, body))
}

/// An answer: status, fields (names in lower case), body.
pub type Answer = (u16, Vec<(String, String)>, Vec<u8>);

/// `exchange` with extra header lines (each ending in CRLF); the answer's fields too.
pub fn exchange_with(
    s: &mut std::net::TcpStream,
    host: &str,
    path: &str,
    extra: &str,
) -> Option<Answer> {
    use std::io::{BufRead, BufReader, Read, Write};
    write!(s, "GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n").ok()?;
    let mut r = BufReader::new(s.try_clone().ok()?);
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    let status: u16 = line.split_whitespace().nth(1)?.parse().ok()?;
    let (mut length, mut chunked) = (0usize, false);
    let mut fields = Vec::new();
    loop {
        line.clear();
        r.read_line(&mut line).ok()?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (k, v) = l.split_once(':')?;
        fields.push((k.to_ascii_lowercase(), v.trim().to_string()));
        if k.eq_ignore_ascii_case("content-length") {
            length = v.trim().parse().ok()?;
        }
        if k.eq_ignore_ascii_case("transfer-encoding") && v.trim().eq_ignore_ascii_case("chunked") {
            chunked = true;
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            line.clear();
            r.read_line(&mut line).ok()?;
            let size = usize::from_str_radix(line.trim(), 16).ok()?;
            let mut chunk = vec![0u8; size + 2];
            r.read_exact(&mut chunk).ok()?;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else {
        body.resize(length, 0);
        r.read_exact(&mut body).ok()?;
    }
    // Whatever the reader buffered beyond the answer would be the next one's: none here.
    if !r.buffer().is_empty() {
        return None;
    }
    Some((status, fields, body))
}

/// The origin that answered `www.reload.test`, on a new connection.
pub fn answered_by(proxy: std::net::SocketAddr) -> Option<String> {
    let mut s = std::net::TcpStream::connect(proxy).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let (status, body) = exchange(&mut s, "www.reload.test", "/")?;
    (status == 200).then(|| {
        String::from_utf8_lossy(&body)
            .lines()
            .next()
            .unwrap_or("")
            .to_string()
    })
}

/// Whether `dig` gets a NOERROR answer with at least one address for `name`.
pub fn dig_answers(dns: std::net::SocketAddr, name: &str) -> bool {
    let Ok(out) = Command::new("dig")
        .args([
            &format!("@{}", dns.ip()),
            "-p",
            &dns.port().to_string(),
            "+tries=1",
            "+time=2",
            name,
            "A",
        ])
        .output()
    else {
        return false;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    text.contains("status: NOERROR") && !text.contains("ANSWER: 0,")
}
