//! DNS cookies (RFC 7873) with server cookies in the interoperable format of RFC 9018: a
//! client that returns the server cookie it was given has shown that it receives answers at
//! its address, which a spoofed source cannot. The response-rate limiter lets such queries
//! through (`batch.rs`), so a flood spoofing a victim's address cannot starve the victim's
//! real resolver.
//!
//! A server cookie is `version (1) | reserved (3 zero bytes) | timestamp (4, seconds) |
//! SipHash-2-4(client cookie | version | reserved | timestamp | client IP, secret) (8)`. Every
//! aggregator derives the secret from the cluster key (`CookieSecret::derive`), so any node of
//! an anycast PoP, whatever answered before, accepts a cookie another made; while the cluster
//! key rotates, cookies made with the previous key's secret still check out.
//!
//! What a query's COOKIE option gets (RFC 7873 section 5.2):
//! - none: an answer without one;
//! - malformed (not 8 bytes, nor 16 to 40): FORMERR;
//! - a client cookie alone, or with a server cookie that does not check out (another
//!   server's, too old, forged): the answer, with a fresh server cookie; over the rate limit,
//!   where the limiter would have sent a truncated answer, BADCOOKIE with a fresh cookie
//!   instead, as BIND does, so the client retries at once with it rather than over TCP;
//! - a valid server cookie: the answer with a fresh one, exempt from the rate limit.

use std::net::IpAddr;

use sha2::Digest;
use siphasher::sip::SipHasher24;

/// The COOKIE option's code (RFC 7873 section 4).
pub const COOKIE_OPTION: u16 = 10;
/// RFC 9018's server cookie version.
const VERSION: u8 = 1;
/// A server cookie older than this does not check out (RFC 9018 section 4.3: one hour).
const MAX_AGE_SECS: u32 = 3600;
/// Nor one from further in the future than this: clocks of the PoP's nodes may differ
/// (RFC 9018 section 4.3: five minutes).
const MAX_AHEAD_SECS: u32 = 300;

/// The 128-bit key of server cookies.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct CookieSecret([u8; 16]);

impl std::fmt::Debug for CookieSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CookieSecret(..)")
    }
}

impl CookieSecret {
    /// The secret every node holding `cluster_key` derives alike.
    pub fn derive(cluster_key: &[u8]) -> CookieSecret {
        let mut h = sha2::Sha256::new();
        h.update(b"meshlb dns server cookie secret v1\0");
        h.update(cluster_key);
        let digest = h.finalize();
        let mut secret = [0u8; 16];
        secret.copy_from_slice(&digest[..16]);
        CookieSecret(secret)
    }

    pub fn from_bytes(bytes: [u8; 16]) -> CookieSecret {
        CookieSecret(bytes)
    }
}

/// The server's secrets: cookies are made with the current one and checked against both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cookies {
    pub current: CookieSecret,
    pub previous: Option<CookieSecret>,
}

/// What a query's COOKIE option showed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Presented {
    /// Not 8 bytes, nor 16 to 40: FORMERR.
    Malformed,
    /// A client cookie; `proven` when the server cookie with it checks out.
    Client { client: [u8; 8], proven: bool },
}

impl Cookies {
    /// What the COOKIE option `data` from `ip` shows at `now` (unix seconds).
    pub(crate) fn check(&self, data: &[u8], ip: IpAddr, now: u32) -> Presented {
        let len = data.len();
        if len != 8 && !(16..=40).contains(&len) {
            return Presented::Malformed;
        }
        let mut client = [0u8; 8];
        client.copy_from_slice(&data[..8]);
        let proven = len == 24
            && data[8] == VERSION
            && data[9..12] == [0, 0, 0]
            && fresh(
                u32::from_be_bytes([data[12], data[13], data[14], data[15]]),
                now,
            )
            && [Some(self.current), self.previous]
                .into_iter()
                .flatten()
                .any(|secret| hash(secret, &data[..16], ip) == data[16..24]);
        Presented::Client { client, proven }
    }

    /// The COOKIE option to answer with: the client's cookie and a fresh server cookie.
    pub(crate) fn make(&self, client: [u8; 8], ip: IpAddr, now: u32) -> [u8; 24] {
        let mut cookie = [0u8; 24];
        cookie[..8].copy_from_slice(&client);
        cookie[8] = VERSION;
        cookie[12..16].copy_from_slice(&now.to_be_bytes());
        let h = hash(self.current, &cookie[..16], ip);
        cookie[16..].copy_from_slice(&h);
        cookie
    }
}

/// Whether a cookie made at `stamp` is still good at `now` (serial number arithmetic, RFC
/// 1982, as RFC 9018 section 4.3 asks: the timestamp wraps in 2106).
fn fresh(stamp: u32, now: u32) -> bool {
    let age = now.wrapping_sub(stamp);
    let ahead = stamp.wrapping_sub(now);
    age <= MAX_AGE_SECS || ahead <= MAX_AHEAD_SECS
}

/// SipHash-2-4 over the first 16 bytes of the cookie (client cookie, version, reserved,
/// timestamp) and the client's address, as the reference implementation writes it: little
/// endian.
fn hash(secret: CookieSecret, head: &[u8], ip: IpAddr) -> [u8; 8] {
    let mut input = [0u8; 32];
    input[..16].copy_from_slice(head);
    let len = match ip {
        IpAddr::V4(v4) => {
            input[16..20].copy_from_slice(&v4.octets());
            20
        }
        IpAddr::V6(v6) => {
            input[16..32].copy_from_slice(&v6.octets());
            32
        }
    };
    SipHasher24::new_with_key(&secret.0)
        .hash(&input[..len])
        .to_le_bytes()
}

/// Unix seconds now, as a cookie's timestamp.
pub(crate) fn now() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
            .collect()
    }

    fn secret(s: &str) -> CookieSecret {
        CookieSecret::from_bytes(hex(s).try_into().expect("16 bytes"))
    }

    /// RFC 9018 appendix A.1: a resolver learning a new server cookie.
    #[test]
    fn the_rfc_9018_example_cookie_is_made_and_checks_out() {
        let cookies = Cookies {
            current: secret("e5e973e5a6b2a43f48e7dc849e37bfcf"),
            previous: None,
        };
        let ip: IpAddr = "198.51.100.100".parse().expect("ip");
        let client: [u8; 8] = hex("2464c4abcf10c957").try_into().expect("8 bytes");
        let made = cookies.make(client, ip, 1559731985);
        assert_eq!(
            made.to_vec(),
            hex("2464c4abcf10c957010000005cf79f111f8130c3eee29480")
        );
        assert_eq!(
            cookies.check(&made, ip, 1559731985 + 10),
            Presented::Client {
                client,
                proven: true
            }
        );
    }

    #[test]
    fn a_cookie_for_another_address_secret_or_age_does_not_check_out() {
        let cookies = Cookies {
            current: secret("e5e973e5a6b2a43f48e7dc849e37bfcf"),
            previous: None,
        };
        let ip: IpAddr = "2001:db8::53".parse().expect("ip");
        let made = cookies.make([7; 8], ip, 1_000_000);
        let proven = |c: &Cookies, data: &[u8], ip: IpAddr, now: u32| {
            matches!(
                c.check(data, ip, now),
                Presented::Client { proven: true, .. }
            )
        };
        assert!(proven(&cookies, &made, ip, 1_000_000));
        assert!(!proven(
            &cookies,
            &made,
            "2001:db8::54".parse().expect("ip"),
            1_000_000
        ));
        assert!(
            !proven(&cookies, &made, ip, 1_000_000 + MAX_AGE_SECS + 1),
            "too old"
        );
        assert!(
            !proven(&cookies, &made, ip, 1_000_000 - MAX_AHEAD_SECS - 1),
            "from ahead"
        );
        let other = Cookies {
            current: CookieSecret::derive(b"another key"),
            previous: None,
        };
        assert!(!proven(&other, &made, ip, 1_000_000));
        let mut forged = made;
        forged[23] ^= 1;
        assert!(!proven(&cookies, &forged, ip, 1_000_000));
    }

    #[test]
    fn during_a_key_rotation_the_previous_secrets_cookies_check_out() {
        let old = CookieSecret::derive(b"old key");
        let ip: IpAddr = "192.0.2.1".parse().expect("ip");
        let before = Cookies {
            current: old,
            previous: None,
        };
        let made = before.make([1; 8], ip, 5_000);
        let rotating = Cookies {
            current: CookieSecret::derive(b"new key"),
            previous: Some(old),
        };
        assert!(matches!(
            rotating.check(&made, ip, 5_000),
            Presented::Client { proven: true, .. }
        ));
    }

    #[test]
    fn option_lengths_outside_the_rfcs_are_malformed() {
        let cookies = Cookies {
            current: CookieSecret::derive(b"k"),
            previous: None,
        };
        let ip: IpAddr = "192.0.2.1".parse().expect("ip");
        for len in [0, 1, 7, 9, 15, 41, 64] {
            assert_eq!(
                cookies.check(&vec![0; len], ip, 0),
                Presented::Malformed,
                "{len}"
            );
        }
        for len in [8, 16, 24, 40] {
            assert!(
                matches!(
                    cookies.check(&vec![0; len], ip, 0),
                    Presented::Client { proven: false, .. }
                ),
                "{len}"
            );
        }
    }
}
