//! Who may change the config: the read token cannot write, nor read what holds secrets (the
//! config file, a tunnel's token); a request without a token is refused 401, and a write from
//! another site 403.

use serde_json::json;

use super::world::Primary;
use crate::{call, POOLS, READ, WRITE};

pub fn the_read_token_cannot_write(w: &mut Primary) {
    let path = format!("{POOLS}/fallback");
    let (status, _, e) = call(w.admin, READ, "DELETE", &path, None, &[]);
    assert_eq!((status, e["errors"][0]["code"].clone()), (403, json!(1005)));
}

pub fn a_request_without_a_token_is_refused_401(w: &mut Primary) {
    assert_eq!(call(w.admin, None, "GET", POOLS, None, &[]).0, 401);
}

pub fn a_write_from_another_site_is_refused_403(w: &mut Primary) {
    let evil = [("Origin", "https://evil.example")];
    assert_eq!(
        call(w.admin, WRITE, "POST", POOLS, Some("{}"), &evil).0,
        403
    );
}

pub fn the_read_token_cannot_read_the_config_file_or_a_tunnel_token(w: &mut Primary) {
    for path in [
        "/config/document".to_string(),
        "/client/v4/accounts/a/cfd_tunnel/f70ff985-a4ef-4643-bbbc-4a0ed4fc8415/token".to_string(),
    ] {
        let (status, _, e) = call(w.admin, READ, "GET", &path, None, &[]);
        assert_eq!(
            (status, e["errors"][0]["code"].clone()),
            (403, json!(1005)),
            "{path}"
        );
    }
    // The admin token reads the file.
    assert_eq!(
        call(w.admin, WRITE, "GET", "/config/document", None, &[]).0,
        200
    );
}
