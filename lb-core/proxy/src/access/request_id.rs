//! Request ids: the client's `X-Request-Id` kept when it is well-formed, else one made here —
//! sent to the origin, returned to the client, written in the access log, so that one id
//! finds a request in every log it passed through (as nginx's `$request_id`, Heroku's router
//! and Envoy do).

use http::header::{HeaderMap, HeaderName, HeaderValue};

pub(crate) static X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The longest client id kept (nginx's `$request_id` is 32 hex digits; a UUID is 36).
const MAX_LEN: usize = 128;

/// Whether a client's id is kept: 1 to 128 bytes of letters, digits and `-._:+=/`, so that
/// it cannot break a log line or carry anything but an id.
fn well_formed(v: &HeaderValue) -> bool {
    let b = v.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_LEN
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || b"-._:+=/".contains(c))
}

/// A new id: 128 random bits in 32 hex digits.
fn make() -> HeaderValue {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bits = lb_edge::with_thread_rng(|rng| {
        (u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64())
    });
    let mut text = [0u8; 32];
    for (i, c) in text.iter_mut().enumerate() {
        *c = HEX[((bits >> (124 - 4 * i)) & 0xf) as usize];
    }
    HeaderValue::from_bytes(&text).unwrap_or(HeaderValue::from_static("0"))
}

/// The request's id, set in `headers` (one value, the kept or made one).
pub(crate) fn keep_or_make(headers: &mut HeaderMap) -> HeaderValue {
    let mut values = headers.get_all(&X_REQUEST_ID).iter();
    let kept = match (values.next(), values.next()) {
        (Some(v), None) if well_formed(v) => Some(v.clone()),
        _ => None,
    };
    match kept {
        // A copy: the client's value shares the connection's read buffer, which the record
        // must not hold while it waits to be written.
        Some(v) => HeaderValue::from_bytes(v.as_bytes()).unwrap_or(v),
        None => {
            let id = make();
            headers.insert(X_REQUEST_ID.clone(), id.clone());
            id
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_well_formed_client_id_is_kept() {
        let mut h = HeaderMap::new();
        h.insert(&X_REQUEST_ID, HeaderValue::from_static("3f2a-77:b.c"));
        assert_eq!(keep_or_make(&mut h), "3f2a-77:b.c");
    }

    #[test]
    fn a_malformed_long_or_doubled_client_id_is_replaced() {
        for bad in [vec!["a b"], vec!["x\"y"], vec![""], vec!["one", "two"]]
            .into_iter()
            .chain(std::iter::once(vec![]))
        {
            let mut h = HeaderMap::new();
            for v in &bad {
                h.append(&X_REQUEST_ID, HeaderValue::from_str(v).expect("value"));
            }
            let id = keep_or_make(&mut h);
            assert_eq!(id.len(), 32, "{bad:?}");
            assert_eq!(h.get_all(&X_REQUEST_ID).iter().count(), 1);
            assert_eq!(h.get(&X_REQUEST_ID), Some(&id));
        }
        let mut h = HeaderMap::new();
        h.insert(
            &X_REQUEST_ID,
            HeaderValue::from_str(&"a".repeat(129)).expect("v"),
        );
        assert_eq!(keep_or_make(&mut h).len(), 32);
    }
}
