//! LDAP monitors against a real OpenLDAP slapd (ldap:// and ldaps://).

mod support;

use support::pki::Pki;
use support::servers::{Slapd, SUFFIX, USER_DN, USER_PASSWORD};
use support::{assert_fail, assert_pass, probe_once, temp_dir};

#[tokio::test]
async fn ldap_binds_and_searches() {
    let pki_dir = temp_dir("ldap-pki");
    let pki = Pki::new(pki_dir.path());
    let slapd = Slapd::start(&pki.valid.cert_pem, &pki.valid.key_pem);
    let ep = format!(
        "{{ name = \"e\", address = \"127.0.0.1\", port = {} }}",
        slapd.port
    );
    // Anonymous bind.
    let r = probe_once("type = \"ldap\"\nretries = 0", &ep).await;
    assert_pass(&r);
    assert_eq!(r.attempt.code, Some(0));
    // DN bind with the password from a file, and from the environment.
    let pw_dir = temp_dir("ldap-pw");
    let pw = pw_dir.path().join("pw");
    std::fs::write(&pw, format!("{USER_PASSWORD}\n")).expect("pw");
    let m = format!("type = \"ldap\"\nretries = 0\nldap = {{ bind_dn = \"{USER_DN}\", password_file = \"{}\" }}", pw.display());
    assert_pass(&probe_once(&m, &ep).await);
    std::env::set_var("MESHLB_TEST_LDAP_PW", USER_PASSWORD);
    std::env::set_var("MESHLB_TEST_LDAP_BAD", "wrong");
    let m = format!("type = \"ldap\"\nretries = 0\nldap = {{ bind_dn = \"{USER_DN}\", password_env = \"MESHLB_TEST_LDAP_PW\" }}");
    assert_pass(&probe_once(&m, &ep).await);
    // Wrong password: invalid credentials (49).
    let m = format!("type = \"ldap\"\nretries = 0\nldap = {{ bind_dn = \"{USER_DN}\", password_env = \"MESHLB_TEST_LDAP_BAD\" }}");
    let r = probe_once(&m, &ep).await;
    assert_fail(&r, "invalid credentials");
    assert_eq!(r.attempt.code, Some(49));
    // Base search of an existing and a missing DN.
    let m = format!("type = \"ldap\"\nretries = 0\nldap = {{ search_dn = \"{SUFFIX}\" }}");
    assert_pass(&probe_once(&m, &ep).await);
    let m =
        format!("type = \"ldap\"\nretries = 0\nldap = {{ search_dn = \"cn=nobody,{SUFFIX}\" }}");
    let r = probe_once(&m, &ep).await;
    assert_fail(&r, "no such object");
    assert_eq!(r.attempt.code, Some(32));
    // ldaps:// with the test CA; and without it the certificate is refused.
    let eps = format!("{{ name = \"e\", address = \"127.0.0.1\", port = {}, header = {{ Host = [\"localhost\"] }} }}", slapd.ldaps_port);
    let m = format!("type = \"ldap\"\nretries = 0\nca_file = \"{}\"\nldap = {{ scheme = \"ldaps\", search_dn = \"{SUFFIX}\" }}", pki.ca_file.display());
    assert_pass(&probe_once(&m, &eps).await);
    let m = "type = \"ldap\"\nretries = 0\nldap = { scheme = \"ldaps\" }";
    assert!(
        !probe_once(m, &eps).await.attempt.passed,
        "untrusted certificate must fail"
    );
    let m = "type = \"ldap\"\nretries = 0\nallow_insecure = true\nldap = { scheme = \"ldaps\" }";
    assert_pass(&probe_once(m, &eps).await);
    // Nothing listening.
    let closed = format!(
        "{{ name = \"e\", address = \"127.0.0.1\", port = {} }}",
        support::free_port()
    );
    assert_fail(
        &probe_once("type = \"ldap\"\nretries = 0", &closed).await,
        "ldap: connect",
    );
}
