//! Session affinity as pure functions: the signed affinity cookie, the header session key and
//! the Set-Cookie attributes.
//!
//! Cloudflare's `__cflb` cookie can be edited by a client to pick its endpoint; ours carries an
//! HMAC-SHA256 tag (truncated to 128 bits) over the load balancer name and the binding, keyed
//! from the cluster secret, so a forged or altered cookie is ignored, never followed.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use xxhash_rust::xxh3::Xxh3;

use crate::config::{SameSite, Secure, SessionAffinity};
use crate::request::HttpFields;

type HmacSha256 = Hmac<Sha256>;

/// The affinity cookie's name.
pub const COOKIE_NAME: &str = "__meshlb";

/// Version 2 carries the session's TTL; version 1 (without it) is still read.
const COOKIE_VERSION: u8 = 2;
const COOKIE_VERSION_WITHOUT_TTL: u8 = 1;
const TAG_LEN: usize = 16;
/// Cookies longer than this are not ours; refuse before decoding.
const MAX_COOKIE_LEN: usize = 1024;

/// The key that signs affinity cookies, derived from the cluster secret so every node of the
/// mesh accepts every other node's cookies.
#[derive(Clone)]
pub struct AffinityKey([u8; 32]);

impl std::fmt::Debug for AffinityKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AffinityKey(..)")
    }
}

impl AffinityKey {
    /// HMAC-SHA256(secret, label) as a key-derivation step, so the cookie key is never the
    /// gossip key itself.
    pub fn derive(cluster_secret: &[u8]) -> Self {
        let mut mac = <HmacSha256 as Mac>::new_from_slice(cluster_secret)
            .unwrap_or_else(|_| unreachable!("HMAC accepts keys of any length"));
        mac.update(b"meshlb session affinity cookie v1");
        AffinityKey(mac.finalize().into_bytes().into())
    }

    fn mac(&self, lb: &str, payload: &[u8]) -> HmacSha256 {
        let mut mac = <HmacSha256 as Mac>::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC accepts keys of any length"));
        mac.update(lb.as_bytes());
        mac.update(&[0]);
        mac.update(payload);
        mac
    }
}

/// What a verified cookie says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CookieClaim {
    pub pool: String,
    pub endpoint: String,
    /// Unix seconds; the cookie expires `ttl` after this and is never extended.
    pub issued_at: u64,
    /// The session's TTL in seconds when it was issued (a rule may have set it); `None` in a
    /// cookie of the first version, whose TTL is the load balancer's.
    pub ttl: Option<u32>,
}

/// Encodes and signs a binding for load balancer `lb`.
pub fn encode_cookie(key: &AffinityKey, lb: &str, claim: &CookieClaim) -> String {
    let mut payload = Vec::with_capacity(16 + claim.pool.len() + claim.endpoint.len());
    payload.push(COOKIE_VERSION);
    payload.extend_from_slice(&claim.issued_at.to_be_bytes());
    payload.extend_from_slice(&claim.ttl.unwrap_or(0).to_be_bytes());
    for part in [&claim.pool, &claim.endpoint] {
        let len = u16::try_from(part.len()).unwrap_or(u16::MAX);
        payload.extend_from_slice(&len.to_be_bytes());
        payload.extend_from_slice(&part.as_bytes()[..usize::from(len)]);
    }
    let tag = key.mac(lb, &payload).finalize().into_bytes();
    payload.extend_from_slice(&tag[..TAG_LEN]);
    URL_SAFE_NO_PAD.encode(payload)
}

/// Verifies and decodes a cookie value; `None` for anything forged, altered, truncated,
/// issued for another load balancer, or not ours at all.
pub fn decode_cookie(key: &AffinityKey, lb: &str, value: &str) -> Option<CookieClaim> {
    if value.len() > MAX_COOKIE_LEN {
        return None;
    }
    let bytes = URL_SAFE_NO_PAD.decode(value.trim()).ok()?;
    let split = bytes.len().checked_sub(TAG_LEN)?;
    let (payload, tag) = bytes.split_at(split);
    // Constant-time comparison of the truncated tag.
    key.mac(lb, payload).verify_truncated_left(tag).ok()?;
    let (&version, rest) = payload.split_first()?;
    let issued_at = u64::from_be_bytes(rest.get(..8)?.try_into().ok()?);
    let mut rest = &rest[8..];
    let ttl = match version {
        COOKIE_VERSION => {
            let ttl = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?);
            rest = &rest[4..];
            Some(ttl).filter(|&t| t > 0)
        }
        COOKIE_VERSION_WITHOUT_TTL => None,
        _ => return None,
    };
    let mut parts = Vec::with_capacity(2);
    for _ in 0..2 {
        let len = usize::from(u16::from_be_bytes(rest.get(..2)?.try_into().ok()?));
        let text = std::str::from_utf8(rest.get(2..2 + len)?).ok()?;
        parts.push(text.to_string());
        rest = &rest[2 + len..];
    }
    if !rest.is_empty() {
        return None;
    }
    let endpoint = parts.pop()?;
    let pool = parts.pop()?;
    Some(CookieClaim {
        pool,
        endpoint,
        issued_at,
        ttl,
    })
}

/// The session key of header affinity: a hash of the configured headers' values (a
/// `cookie:<name>` entry reads that cookie). `None` when the request lacks them: any one
/// missing with `require_all_headers`, all of them otherwise.
pub fn header_session_key(
    affinity: &SessionAffinity,
    lb: &str,
    http: &HttpFields<'_>,
) -> Option<u64> {
    let mut hasher = Xxh3::new();
    hasher.update(lb.as_bytes());
    let mut found = 0;
    for name in &affinity.headers {
        let value = match name.strip_prefix("cookie:") {
            Some(cookie) => http.cookie(cookie),
            None => http.header(name),
        };
        hasher.update(&[0xff]);
        match value {
            Some(v) => {
                found += 1;
                hasher.update(&[1]);
                hasher.update(v.as_bytes());
            }
            None if affinity.require_all_headers => return None,
            None => hasher.update(&[0]),
        }
    }
    (found > 0).then(|| hasher.digest())
}

/// A Set-Cookie the proxy must send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetCookie {
    pub value: String,
    pub max_age: u32,
    pub secure: bool,
    pub same_site: &'static str,
}

impl SetCookie {
    /// Resolves `Auto`: Secure when the request came over TLS; SameSite Lax unless set.
    pub fn new(value: String, affinity: &SessionAffinity, tls: bool) -> Self {
        let secure = match affinity.secure {
            Secure::Always => true,
            Secure::Never => false,
            Secure::Auto => tls,
        };
        let same_site = match affinity.samesite {
            SameSite::Auto | SameSite::Lax => "Lax",
            SameSite::Strict => "Strict",
            SameSite::None => "None",
        };
        SetCookie {
            value,
            max_age: affinity.ttl,
            secure,
            same_site,
        }
    }

    /// The `Set-Cookie` header value. HttpOnly always: scripts have no business with it.
    pub fn header_value(&self) -> String {
        let mut v = format!(
            "{COOKIE_NAME}={}; Max-Age={}; Path=/; HttpOnly; SameSite={}",
            self.value, self.max_age, self.same_site
        );
        if self.secure || self.same_site == "None" {
            v.push_str("; Secure");
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn claim() -> CookieClaim {
        CookieClaim {
            pool: "eu-west".into(),
            endpoint: "web-1".into(),
            issued_at: 1_700_000_000,
            ttl: Some(7_200),
        }
    }

    #[test]
    fn a_cookie_of_the_first_version_is_still_read() {
        // Version 1: no TTL field, so the load balancer's TTL applies to it.
        let key = AffinityKey::derive(b"cluster secret");
        let mut payload = vec![COOKIE_VERSION_WITHOUT_TTL];
        payload.extend_from_slice(&1_700_000_000u64.to_be_bytes());
        for part in ["eu-west", "web-1"] {
            payload.extend_from_slice(&u16::try_from(part.len()).expect("short").to_be_bytes());
            payload.extend_from_slice(part.as_bytes());
        }
        let tag = key.mac("www.example.com", &payload).finalize().into_bytes();
        payload.extend_from_slice(&tag[..TAG_LEN]);
        let v = URL_SAFE_NO_PAD.encode(payload);
        assert_eq!(
            decode_cookie(&key, "www.example.com", &v),
            Some(CookieClaim {
                ttl: None,
                ..claim()
            })
        );
    }

    #[test]
    fn cookie_round_trips() {
        let key = AffinityKey::derive(b"cluster secret");
        let v = encode_cookie(&key, "www.example.com", &claim());
        assert_eq!(decode_cookie(&key, "www.example.com", &v), Some(claim()));
    }

    #[test]
    fn cookie_is_bound_to_key_and_load_balancer() {
        let key = AffinityKey::derive(b"cluster secret");
        let v = encode_cookie(&key, "www.example.com", &claim());
        assert_eq!(decode_cookie(&key, "api.example.com", &v), None);
        assert_eq!(
            decode_cookie(&AffinityKey::derive(b"other"), "www.example.com", &v),
            None
        );
        assert_eq!(decode_cookie(&key, "www.example.com", "garbage!"), None);
        assert_eq!(decode_cookie(&key, "www.example.com", ""), None);
    }

    proptest! {
        /// Any single-character change of a valid cookie is rejected (tampering never steers).
        #[test]
        fn tampered_cookies_are_rejected(pos in 0usize..64, c in "[A-Za-z0-9_-]") {
            let key = AffinityKey::derive(b"k");
            let v = encode_cookie(&key, "lb.example", &claim());
            let pos = pos % v.len();
            let mut chars: Vec<char> = v.chars().collect();
            let new = c.chars().next().unwrap();
            prop_assume!(chars[pos] != new);
            chars[pos] = new;
            let tampered: String = chars.into_iter().collect();
            // The last character may carry unused base64 bits; decoding must still not yield
            // a different claim.
            let decoded = decode_cookie(&key, "lb.example", &tampered);
            prop_assert!(decoded.is_none() || decoded == Some(claim()));
        }

        #[test]
        fn decoding_never_panics(s in ".{0,200}") {
            let key = AffinityKey::derive(b"k");
            let _ = decode_cookie(&key, "lb", &s);
        }
    }

    #[test]
    fn set_cookie_attributes() {
        let mut a = SessionAffinity {
            kind: crate::config::AffinityKind::Cookie,
            ttl: 82_800,
            samesite: SameSite::Auto,
            secure: Secure::Auto,
            drain_duration: 0,
            zero_downtime_failover: crate::config::ZeroDowntimeFailover::None,
            headers: vec![],
            require_all_headers: false,
        };
        let c = SetCookie::new("v".into(), &a, false);
        assert_eq!(
            c.header_value(),
            "__meshlb=v; Max-Age=82800; Path=/; HttpOnly; SameSite=Lax"
        );
        assert!(SetCookie::new("v".into(), &a, true)
            .header_value()
            .ends_with("; Secure"));
        a.samesite = SameSite::None;
        a.secure = Secure::Always;
        assert!(SetCookie::new("v".into(), &a, false)
            .header_value()
            .contains("SameSite=None; Secure"));
    }
}
