//! How the API changes the config: a write edits the document in force, is checked as
//! `meshlb check` checks a file (every error with its field path), and is handed to the
//! config primary's task, which makes it the next generation (`meshlb_node::control`).

use http::StatusCode;
use lb_core::config::document::{Document, DocumentError, Kind};

use super::envelope::code;
use crate::shared::Shared;
use meshlb_node::control::writes::{self, FieldError, Refusal, Written};
use meshlb_node::control::ControlPlane;

/// The name validation errors of an API write give the document.
const DOCUMENT_NAME: &str = "the written config";

pub(super) fn refusal(status: StatusCode, code: u32, message: impl Into<String>) -> Refusal {
    Refusal::new(status, code, message)
}

pub(super) fn document_refusal(e: &DocumentError) -> Refusal {
    let (status, c) = match e {
        DocumentError::NotFound { .. } => (StatusCode::NOT_FOUND, code::NOT_FOUND),
        DocumentError::Exists { .. } => (StatusCode::CONFLICT, code::EXISTS),
        _ => (StatusCode::BAD_REQUEST, code::INVALID),
    };
    refusal(status, c, e.to_string())
}

/// Why this aggregator takes no writes, naming the primary when one is live.
fn not_primary(plane: &ControlPlane) -> Refusal {
    match &**plane.primary.load() {
        Some(p) => refusal(
            StatusCode::MISDIRECTED_REQUEST,
            code::NOT_PRIMARY,
            format!(
                "this aggregator is not the config primary: write to {} ({}), which holds generation {}",
                p.node_id, p.announcement.url, p.announcement.generation
            ),
        ),
        None => refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            code::NOT_PRIMARY,
            "this aggregator is not the config primary, and no live node of the mesh is (writes wait until the one started with --config-primary is back)",
        ),
    }
}

/// A document's validation errors, with paths within the written resource when they are in
/// it (`origins[0].weight`), else within the document (`load_balancers[2].default_pools[0]`).
fn field_errors(errors: &lb_core::ConfigErrors, within: Option<(Kind, usize)>) -> Vec<FieldError> {
    let prefix = within.map(|(k, i)| format!("{}[{i}]", k.key()));
    errors
        .0
        .iter()
        .map(|e| {
            let path = match &prefix {
                Some(p) if e.path == *p => String::new(),
                Some(p) => e
                    .path
                    .strip_prefix(p.as_str())
                    .and_then(|rest| rest.strip_prefix('.'))
                    .map_or_else(|| e.path.clone(), str::to_string),
                None => e.path.clone(),
            };
            FieldError {
                path,
                reason: e.reason.clone(),
            }
        })
        .collect()
}

/// Checks a document's text as `meshlb check` checks a file.
pub fn check(shared: &Shared, text: &str, within: Option<(Kind, usize)>) -> Result<(), Refusal> {
    shared
        .setup
        .parser
        .parse(DOCUMENT_NAME, text, &shared.setup.regions)
        .map(|_| ())
        .map_err(|errors| Refusal {
            errors: field_errors(&errors, within),
            ..refusal(
                StatusCode::BAD_REQUEST,
                code::INVALID,
                "the config would not be valid: nothing was changed",
            )
        })
}

/// A write: `edit` applied to the document in force, checked, and handed to the primary's
/// config task; retried on a newer generation when the client named none (`If-Match`).
pub(super) async fn write<T>(
    shared: &Shared,
    plane: &ControlPlane,
    why: String,
    based_on: Option<u64>,
    edit: impl Fn(&mut Document) -> Result<(T, Option<(Kind, String)>), Refusal>,
) -> Result<(T, Written, Document), Refusal> {
    if !plane.role.takes_writes() {
        return Err(not_primary(plane));
    }
    let Some(writes) = plane.writes.as_ref() else {
        return Err(refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            code::UNAVAILABLE,
            "the primary's config task is not running",
        ));
    };
    // An If-Match may carry another store-connected aggregator's ETag, written a moment ago
    // and not yet brought here by the watch: wait for it (a bounded while) rather than call
    // the client stale.
    if let Some(g) = based_on {
        plane.caught_up(g).await;
    }
    for _ in 0..3 {
        let current = plane.document.load_full();
        if let Some(g) = based_on.filter(|&g| g != current.generation) {
            return Err(Refusal::stale(g, current.generation));
        }
        let mut doc = Document::parse(&current.text).map_err(|e| document_refusal(&e))?;
        let (value, target) = edit(&mut doc)?;
        let text = doc.to_text();
        let within = target.and_then(|(k, id)| doc.position(k, &id).map(|i| (k, i)));
        check(shared, &text, within)?;
        match writes::submit(writes, why.clone(), current.generation, text).await {
            Err(r) if r.status == StatusCode::CONFLICT && based_on.is_none() => continue,
            Err(r) => return Err(r),
            Ok(written) => return Ok((value, written, doc)),
        }
    }
    Err(refusal(
        StatusCode::CONFLICT,
        code::CONFLICT,
        "the config kept changing under this write: try again",
    ))
}
