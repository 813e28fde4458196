//! An HTTP origin that says who it is and what it received, with the routes the proxy tests
//! need: a held answer, slow and big chunked downloads, trailers, uploads, a protocol switch
//! and a real WebSocket.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::origins::{serve, Origin};

/// An HTTP origin on `ip` that answers with its `name` and what it received (`Host`,
/// `X-Forwarded-For`, `X-Forwarded-Proto`, `TE` and the body, one per line). `GET /hold` waits
/// `hold` before answering; `/drip` sends 80 KiB over 8 s, `/big` 1 MiB, `/trailers` a chunked
/// answer with a trailer field, `/upload` what an upload brought; a request with
/// `Upgrade: echo` gets `101` and then every byte echoed back (a protocol switch like
/// WebSocket's, without the framing), one with `Upgrade: websocket` a real WebSocket echo.
/// `Connection: close` on every answer.
pub fn named_origin(ip: &str, name: &str, hold: Duration) -> Origin {
    let name = name.to_string();
    serve(ip, move |s| serve_named(s, &name, hold))
}

/// A request as the origin read it.
struct Request {
    /// The head's bytes, as received (a WebSocket handshake reads them again).
    head: Vec<u8>,
    text: String,
    path: String,
    body: Vec<u8>,
    /// Trailer fields of a chunked body (`name: value`, as sent).
    trailers: Vec<String>,
}

impl Request {
    /// The value of header `name` (any case), empty when absent.
    fn header(&self, name: &str) -> String {
        self.text
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.trim()
                    .eq_ignore_ascii_case(name)
                    .then(|| v.trim().to_string())
            })
            .unwrap_or_default()
    }
}

fn serve_named(mut s: TcpStream, name: &str, hold: Duration) {
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let Some(req) = read_request(&mut s) else {
        return;
    };
    if req.header("upgrade").eq_ignore_ascii_case("websocket") {
        websocket_echo(Replay {
            head: std::io::Cursor::new(req.head),
            s,
        });
        return;
    }
    if req.header("upgrade").eq_ignore_ascii_case("echo") {
        echo_bytes(&mut s);
        return;
    }
    match req.path.as_str() {
        "/drip" => drip(&mut s),
        "/big" => big(&mut s),
        "/trailers" => trailers(&mut s),
        "/upload" => upload(&mut s, name, &req),
        path => {
            if path == "/hold" {
                std::thread::sleep(hold);
            }
            what_was_received(&mut s, name, &req);
        }
    }
}

/// The request head and body; `None` when the connection breaks off before their end.
fn read_request(s: &mut TcpStream) -> Option<Request> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 65536 {
        match s.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return None,
        }
    }
    let text = String::from_utf8_lossy(&head).to_string();
    let path = text.split_whitespace().nth(1).unwrap_or("/").to_string();
    let mut req = Request {
        head,
        text,
        path,
        body: Vec::new(),
        trailers: Vec::new(),
    };
    if req
        .header("transfer-encoding")
        .eq_ignore_ascii_case("chunked")
    {
        (req.body, req.trailers) = read_chunked(s)?;
    } else {
        let length: usize = req.header("content-length").parse().unwrap_or(0);
        req.body = vec![0u8; length];
        s.read_exact(&mut req.body).ok()?;
    }
    Some(req)
}

/// A chunked request body, decoded, and its trailer fields (`name: value`, as sent); `None`
/// when it breaks off.
fn read_chunked(s: &mut TcpStream) -> Option<(Vec<u8>, Vec<String>)> {
    use std::io::BufRead;
    let mut r = std::io::BufReader::new(s);
    let mut body = Vec::new();
    let mut trailers = Vec::new();
    loop {
        let mut line = String::new();
        r.read_line(&mut line).ok()?;
        let size = line.trim().split(';').next()?;
        let size = usize::from_str_radix(size, 16).ok()?;
        if size == 0 {
            // Trailer fields, up to the empty line.
            loop {
                line.clear();
                if r.read_line(&mut line).ok()? == 0 || line.trim().is_empty() {
                    return Some((body, trailers));
                }
                trailers.push(line.trim().to_string());
            }
        }
        let start = body.len();
        body.resize(start + size + 2, 0);
        r.read_exact(&mut body[start..]).ok()?;
        body.truncate(start + size);
    }
}

/// `101`, then every byte echoed back until the client closes.
fn echo_bytes(s: &mut TcpStream) {
    let _ = s.write_all(
        b"HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: echo\r\n\r\n",
    );
    let mut buf = [0u8; 4096];
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 || s.write_all(&buf[..n]).is_err() {
            break;
        }
    }
}

/// A slow download: 80 chunks of 1 KiB of `d`, one every 100 ms (8 s in all).
fn drip(s: &mut TcpStream) {
    let chunk = format!("400\r\n{}\r\n", "d".repeat(0x400));
    let _ =
        s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
    for _ in 0..80 {
        if s.write_all(chunk.as_bytes()).is_err() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = s.write_all(b"0\r\n\r\n");
}

/// A 1 MiB answer of 64 chunks of `x`.
fn big(s: &mut TcpStream) {
    let chunk = format!("4000\r\n{}\r\n", "x".repeat(0x4000));
    let _ =
        s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
    for _ in 0..64 {
        if s.write_all(chunk.as_bytes()).is_err() {
            return;
        }
    }
    let _ = s.write_all(b"0\r\n\r\n");
}

/// A chunked answer with a trailer field it announces.
fn trailers(s: &mut TcpStream) {
    let _ = s.write_all(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Checksum\r\n\
          Connection: close\r\n\r\n5\r\nhello\r\n0\r\nX-Checksum: sha256=2cf2\r\n\r\n",
    );
}

/// What an upload brought: its length, the sum of its bytes and its trailer fields.
fn upload(s: &mut TcpStream, name: &str, req: &Request) {
    let sum: u64 = req.body.iter().map(|&b| u64::from(b)).sum();
    let reply = format!(
        "{name}\nreceived={}\nsum={sum}\ntrailers={}\n",
        req.body.len(),
        req.trailers.join("; ")
    );
    answer(s, &reply);
}

/// The origin's name and what it received.
fn what_was_received(s: &mut TcpStream, name: &str, req: &Request) {
    let reply = format!(
        "{name}\nhost={}\nxff={}\nproto={}\nte={}\nbody={}\nrequest_id={}\nupgrade={}\nhttp2_settings={}\n",
        req.header("host"),
        req.header("x-forwarded-for"),
        req.header("x-forwarded-proto"),
        req.header("te"),
        String::from_utf8_lossy(&req.body),
        req.header("x-request-id"),
        req.header("upgrade"),
        req.header("http2-settings")
    );
    answer(s, &reply);
}

/// `200` with `body`.
fn answer(s: &mut TcpStream, body: &str) {
    let _ = write!(
        s,
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// A connection whose request head was already read: the head again, then the connection.
/// (tungstenite's server handshake reads the head itself.)
struct Replay {
    head: std::io::Cursor<Vec<u8>>,
    s: TcpStream,
}

impl Read for Replay {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self.head.read(buf)? {
            0 => self.s.read(buf),
            n => Ok(n),
        }
    }
}

impl Write for Replay {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.s.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.s.flush()
    }
}

/// A real WebSocket server (tungstenite): every text and binary message echoed, pings
/// answered, the closing handshake completed.
fn websocket_echo(stream: Replay) {
    let Ok(mut ws) = tungstenite::accept(stream) else {
        return;
    };
    while let Ok(message) = ws.read() {
        if (message.is_text() || message.is_binary()) && ws.send(message).is_err() {
            return;
        }
    }
}
