//! Test origins on loopback that can be stopped (connections refused) and started again on the
//! same port.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};

/// Whether an origin's listener is open; `Stop` is asked for and `Closed` confirmed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Power {
    On,
    Stop,
    Closed,
}

/// A test origin: its port, and a switch that closes its listener (connections are then
/// refused) and opens it again on the same port.
#[derive(Clone)]
pub struct Origin {
    pub port: u16,
    addr: SocketAddr,
    power: Arc<(Mutex<Power>, Condvar)>,
}

impl Origin {
    /// Closes the listener; returns once it is closed.
    pub fn stop(&self) {
        let (lock, cv) = &*self.power;
        *lock.lock().unwrap() = Power::Stop;
        // Wake the accept loop, which then sees `Stop` and closes the listener.
        let _ = TcpStream::connect(self.addr);
        let mut p = lock.lock().unwrap();
        while *p != Power::Closed {
            p = cv.wait(p).unwrap();
        }
    }

    /// Opens the listener again.
    pub fn start(&self) {
        let (lock, cv) = &*self.power;
        *lock.lock().unwrap() = Power::On;
        cv.notify_all();
    }
}

/// Serves `ip` on a free port, one thread per connection running `handle`, until stopped.
pub(crate) fn serve(ip: &str, handle: impl Fn(TcpStream) + Send + Sync + 'static) -> Origin {
    let listener = TcpListener::bind((ip, 0)).expect("origin");
    let addr = listener.local_addr().expect("addr");
    let origin = Origin {
        port: addr.port(),
        addr,
        power: Arc::new((Mutex::new(Power::On), Condvar::new())),
    };
    let power = Arc::clone(&origin.power);
    let handle = Arc::new(handle);
    std::thread::spawn(move || {
        let mut listener = Some(listener);
        loop {
            let l = match listener.take() {
                Some(l) => l,
                None => TcpListener::bind(addr).expect("rebind"),
            };
            for conn in l.incoming() {
                if *power.0.lock().unwrap() != Power::On {
                    break;
                }
                if let Ok(s) = conn {
                    let handle = Arc::clone(&handle);
                    std::thread::spawn(move || handle(s));
                }
            }
            drop(l); // closed: connections are refused
            let (lock, cv) = &*power;
            let mut p = lock.lock().unwrap();
            *p = Power::Closed;
            cv.notify_all();
            while *p != Power::On {
                p = cv.wait(p).unwrap();
            }
        }
    });
    origin
}

/// A minimal HTTP origin on `ip` that answers 200 `ok`.
pub fn origin_on(ip: &str) -> Origin {
    serve(ip, |mut s| {
        let mut buf = [0u8; 1024];
        let _ = s.read(&mut buf);
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
    })
}

/// A minimal HTTP origin on `ip` that answers 200 with `body`, to tell which origin served.
pub fn origin_saying(ip: &str, body: &'static str) -> Origin {
    serve(ip, move |mut s| {
        let mut buf = [0u8; 1024];
        let _ = s.read(&mut buf);
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        let _ = s.write_all(head.as_bytes());
        let _ = s.write_all(body.as_bytes());
    })
}

/// An HTTP origin on `ip` that answers 404 for `missing` and 200 `ok` for any other path: a
/// monitor of `missing` fails on it.
pub fn origin_missing(ip: &str, missing: &'static str) -> Origin {
    serve(ip, move |mut s| {
        let mut buf = [0u8; 1024];
        let n = s.read(&mut buf).unwrap_or(0);
        let head = String::from_utf8_lossy(&buf[..n]);
        let path = head.split_whitespace().nth(1).unwrap_or("");
        let answer: &[u8] = if path == missing {
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 7\r\nConnection: close\r\n\r\nmissing"
        } else {
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
        };
        let _ = s.write_all(answer);
    })
}

/// An origin on 127.0.0.1.
pub fn origin() -> Origin {
    origin_on("127.0.0.1")
}

/// Stops origins for the length of a check and starts them again when dropped, even when the
/// check fails, so the next trial finds them serving.
pub struct Stopped<'a>(pub Vec<&'a Origin>);

impl<'a> Stopped<'a> {
    pub fn new(origins: impl IntoIterator<Item = &'a Origin>) -> Self {
        let origins: Vec<_> = origins.into_iter().collect();
        for o in &origins {
            o.stop();
        }
        Stopped(origins)
    }
}

impl Drop for Stopped<'_> {
    fn drop(&mut self) {
        for o in &self.0 {
            o.start();
        }
    }
}
