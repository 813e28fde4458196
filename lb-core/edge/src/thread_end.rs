//! Knowing when a frontend's OS thread ends. The DNS server's UDP threads and the proxy's
//! workers run outside the async runtime, so a panic in one would end it silently; each holds
//! a `ThreadEnd` guard whose drop (the thread returning, or unwinding from a panic) says so,
//! and the node's supervision (`node/src/supervise.rs`) waits on `Ended` and exits.

use std::sync::mpsc;

/// Hands out guards, one per thread.
#[derive(Debug, Clone)]
pub struct EndSignal(mpsc::Sender<String>);

/// Where the first thread's end is told.
#[derive(Debug)]
pub struct Ended(mpsc::Receiver<String>);

/// Dropped when its thread ends.
#[derive(Debug)]
pub struct ThreadEnd {
    name: String,
    tx: mpsc::Sender<String>,
}

/// A signal and the place it is heard.
pub fn end_signal() -> (EndSignal, Ended) {
    let (tx, rx) = mpsc::channel();
    (EndSignal(tx), Ended(rx))
}

impl EndSignal {
    /// The guard for a thread named `name`; keep it for the thread's whole life.
    pub fn guard(&self, name: impl Into<String>) -> ThreadEnd {
        ThreadEnd {
            name: name.into(),
            tx: self.0.clone(),
        }
    }
}

impl Drop for ThreadEnd {
    fn drop(&mut self) {
        let how = if std::thread::panicking() {
            "panicked"
        } else {
            "returned"
        };
        let _ = self.tx.send(format!("thread {} {how}", self.name));
    }
}

impl Ended {
    /// Blocks until a thread ends: which, and how. (Every guard gone without a word is also
    /// an end.)
    pub fn wait(self) -> String {
        self.0
            .recv()
            .unwrap_or_else(|_| "threads all ended".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_thread_is_named_as_such() {
        let (signal, ended) = end_signal();
        let guard = signal.guard("dns-udp-1");
        let quiet = signal.guard("dns-udp-2");
        let t = std::thread::spawn(move || {
            let _guard = guard;
            panic!("boom");
        });
        assert!(t.join().is_err());
        assert_eq!(ended.wait(), "thread dns-udp-1 panicked");
        drop(quiet);
    }
}
