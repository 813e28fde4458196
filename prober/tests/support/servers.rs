//! Real Debian servers started by the tests on loopback: OpenLDAP `slapd` (with an ldaps
//! listener) and OpenSMTPD. A missing server is a test failure that says what to install,
//! never a silent skip.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{free_port, temp_dir};

fn binary(path: &str, package: &str) -> PathBuf {
    let p = PathBuf::from(path);
    assert!(
        p.exists(),
        "{path} is missing: install the Debian package `{package}` (scripts/test.sh does it)"
    );
    p
}

/// Waits (bounded) until something accepts connections on the port.
fn wait_listening(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{what} did not start listening on 127.0.0.1:{port} within 10 s");
}

pub struct Slapd {
    pub port: u16,
    pub ldaps_port: u16,
    dir: tempfile::TempDir,
}

pub const SUFFIX: &str = "dc=example,dc=test";
pub const USER_DN: &str = "cn=prober,dc=example,dc=test";
pub const USER_PASSWORD: &str = "proberpw";

impl Slapd {
    /// A throw-away directory with the suffix and one inetOrgPerson, served over ldap:// and
    /// ldaps:// (with the given certificate).
    pub fn start(cert_pem: &str, key_pem: &str) -> Slapd {
        let slapd = binary("/usr/sbin/slapd", "slapd");
        let slapadd = binary("/usr/sbin/slapadd", "slapd");
        let scratch = temp_dir("slapd");
        let dir = scratch.path();
        std::fs::create_dir_all(dir.join("db")).expect("db dir");
        std::fs::write(dir.join("cert.pem"), cert_pem).expect("cert");
        std::fs::write(dir.join("key.pem"), key_pem).expect("key");
        let d = dir.display();
        let conf = format!(
            "include /etc/ldap/schema/core.schema\ninclude /etc/ldap/schema/cosine.schema\ninclude /etc/ldap/schema/inetorgperson.schema\nmodulepath /usr/lib/ldap\nmoduleload back_mdb\npidfile {d}/slapd.pid\nTLSCertificateFile {d}/cert.pem\nTLSCertificateKeyFile {d}/key.pem\ndatabase mdb\nsuffix \"{SUFFIX}\"\nrootdn \"cn=admin,{SUFFIX}\"\nrootpw secret\ndirectory {d}/db\n"
        );
        std::fs::write(dir.join("slapd.conf"), conf).expect("conf");
        let ldif = format!(
            "dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n\ndn: {USER_DN}\nobjectClass: inetOrgPerson\ncn: prober\nsn: prober\nuserPassword: {USER_PASSWORD}\n"
        );
        std::fs::write(dir.join("init.ldif"), ldif).expect("ldif");
        let out = Command::new(slapadd)
            .args([
                "-f",
                &format!("{d}/slapd.conf"),
                "-l",
                &format!("{d}/init.ldif"),
            ])
            .output()
            .expect("run slapadd");
        assert!(
            out.status.success(),
            "slapadd failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (port, ldaps_port) = (free_port(), free_port());
        let out = Command::new(slapd)
            .args([
                "-f",
                &format!("{d}/slapd.conf"),
                "-h",
                &format!("ldap://127.0.0.1:{port}/ ldaps://127.0.0.1:{ldaps_port}/"),
            ])
            .output()
            .expect("run slapd");
        assert!(
            out.status.success(),
            "slapd failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        wait_listening(port, "slapd");
        wait_listening(ldaps_port, "slapd (ldaps)");
        Slapd {
            port,
            ldaps_port,
            dir: scratch,
        }
    }
}

impl Drop for Slapd {
    fn drop(&mut self) {
        kill_pidfile(&self.dir.path().join("slapd.pid"));
    }
}

fn kill_pidfile(path: &Path) {
    if let Ok(pid) = std::fs::read_to_string(path) {
        let _ = Command::new("kill").arg(pid.trim()).status();
    }
}

/// OpenSMTPD in the foreground on a loopback port.
pub struct Smtpd {
    pub port: u16,
    child: Child,
    dir: tempfile::TempDir,
}

impl Smtpd {
    pub fn start() -> Smtpd {
        let smtpd = binary("/usr/sbin/smtpd", "opensmtpd");
        let dir = temp_dir("smtpd");
        let port = free_port();
        let conf = dir.path().join("smtpd.conf");
        std::fs::write(&conf, format!("listen on 127.0.0.1 port {port}\naction \"local\" mbox\nmatch from any for any action \"local\"\n")).expect("conf");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&conf, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let child = Command::new(smtpd)
            .args(["-d", "-f"])
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start smtpd");
        wait_listening(port, "OpenSMTPD");
        Smtpd { port, child, dir }
    }
}

impl Drop for Smtpd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
