//! Generations as ETags: each write answers the next one, an `If-Match` on a stale one is a
//! conflict the client is told not to retry, and a resource written back unchanged makes none.

use serde_json::json;

use super::world::Primary;
use crate::{call, call_with_head, LBS, POOLS, READ, WRITE};

pub fn each_write_answers_the_next_generation_as_its_etag(w: &mut Primary) {
    let etags = [&w.monitor.1, &w.pool.1, &w.fallback.1, &w.lb.1];
    assert_eq!(
        etags,
        ["2", "3", "4", "5"],
        "the empty file was generation 1, then one per write"
    );
}

pub fn a_second_write_based_on_the_same_generation_is_a_conflict(w: &mut Primary) {
    let based_on = format!("\"{}\"", w.generation());
    let path = format!("{POOLS}/fallback");
    let if_match = [("If-Match", based_on.as_str())];
    let patch = r#"{"description": "edited"}"#;
    let (first, etag, e) = call(w.admin, WRITE, "PATCH", &path, Some(patch), &if_match);
    assert_eq!(first, 200, "the first lands: {e:#}");
    assert_eq!(etag, w.generation().to_string());
    let again = r#"{"description": "again"}"#;
    let (second, _, e) = call(w.admin, WRITE, "PATCH", &path, Some(again), &if_match);
    assert_eq!(second, 409, "{e:#}");
    assert_eq!(e["errors"][0]["code"], json!(1003));
}

pub fn a_conflict_tells_the_client_not_to_retry(w: &mut Primary) {
    let stale = [("If-Match", "\"0\"")];
    let patch = r#"{"description": "stale"}"#;
    let path = format!("{POOLS}/fallback");
    let (status, _, e, head) = call_with_head(w.admin, WRITE, "PATCH", &path, Some(patch), &stale);
    assert_eq!(status, 409, "{e:#}");
    assert!(head.contains("\r\nx-should-retry: false"), "{head}");
}

pub fn a_resource_read_can_be_written_back_unchanged_making_no_generation(w: &mut Primary) {
    let path = format!("{LBS}/www.example.com");
    let (status, _, got) = call(w.admin, READ, "GET", &path, None, &[]);
    assert_eq!(status, 200, "{got:#}");
    let before = w.generation();
    let body = got["result"].to_string();
    let (status, _, put) = call(w.admin, WRITE, "PUT", &path, Some(&body), &[]);
    assert_eq!(status, 200, "{put:#}");
    assert_eq!(
        w.generation(),
        before,
        "the unchanged PUT made no generation"
    );
}
