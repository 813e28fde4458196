//! Child processes that die with the test, with their standard error kept for a failure's
//! report; where the `meshlb` binary is; a lock for worlds too heavy to share the machine.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};

/// Kills its processes when dropped, so a failed test leaves nothing behind. When the test is
/// failing (the drop runs while it panics), each child spawned by `spawn_logged` has the end of
/// its standard error printed first, so the failure shows what the nodes said.
pub struct Procs(pub Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
            let Some(log) = take_log(c.id()) else {
                continue;
            };
            if std::thread::panicking() {
                print_tail(c.id(), &log);
            } else {
                let _ = std::fs::remove_file(&log);
            }
        }
    }
}

/// The last 40 lines of child `pid`'s standard error, on the test's.
fn print_tail(pid: u32, log: &std::path::Path) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let tail = &lines[lines.len().saturating_sub(40)..];
    eprintln!(
        "--- child {pid} ({}), last lines of its stderr:",
        log.display()
    );
    for line in tail {
        eprintln!("{line}");
    }
}

/// Where each child spawned by `spawn_logged` writes its standard error, by pid.
static CHILD_LOGS: Mutex<Vec<(u32, PathBuf)>> = Mutex::new(Vec::new());

fn take_log(pid: u32) -> Option<PathBuf> {
    let mut logs = CHILD_LOGS.lock().unwrap_or_else(|e| e.into_inner());
    let i = logs.iter().position(|(p, _)| *p == pid)?;
    Some(logs.swap_remove(i).1)
}

/// Spawns `command` with its standard output discarded and its standard error in a file under
/// the temporary directory, which `Procs` prints when the test fails and removes otherwise.
pub fn spawn_logged(command: &mut Command, what: &str) -> Child {
    let dir = std::env::temp_dir().join("meshlb-test-logs");
    let _ = std::fs::create_dir_all(&dir);
    let log = tempfile::Builder::new()
        .prefix(&format!("{what}-"))
        .suffix(".log")
        .tempfile_in(&dir)
        .and_then(|f| f.keep().map_err(|e| e.error));
    let (stderr, path) = match log {
        Ok((file, path)) => (Stdio::from(file), Some(path)),
        Err(_) => (Stdio::null(), None),
    };
    let child = command
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    if let Some(path) = path {
        CHILD_LOGS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((child.id(), path));
    }
    child
}

/// The `meshlb` binary the tests run: `MESHLB_BIN` when set, else `meshlb` in the target
/// directory of the running test binary (`target/<profile>/deps/<test>` ->
/// `target/<profile>/meshlb`). Cargo builds the binary before it runs the root package's
/// integration tests, which are the tests that use this crate.
pub fn meshlb_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("MESHLB_BIN") {
        return PathBuf::from(bin);
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the test binary sits in target/<profile>/deps");
    let bin = profile.join(format!("meshlb{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.exists(),
        "no meshlb binary at {} (set MESHLB_BIN, or run the tests with cargo test)",
        bin.display()
    );
    bin
}

/// Held while a test runs a world too heavy to share the two cores with another (a whole
/// mesh): the tests of one binary run in parallel threads, and each such test takes this
/// process-wide lock first. A test that failed while holding it does not block the others.
pub fn heavy() -> MutexGuard<'static, ()> {
    static HEAVY: Mutex<()> = Mutex::new(());
    HEAVY.lock().unwrap_or_else(|e| e.into_inner())
}
