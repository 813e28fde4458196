//! Read-only views: a pool's health, what names a resource, search, regions, events.

use http::StatusCode;
use lb_core::config::document::Kind;
use serde_json::Value;

use super::Served;
use crate::api::call::Call;
use crate::api::convert::reference;
use crate::api::envelope::{self, code};
use crate::api::write::refusal;
use crate::api::{health, regions as region_list, search as finder};

/// `GET .../pools/{id}/health`: the votes behind the pool's health, per region.
pub async fn pool_health(call: Call<'_>) -> Served {
    let result = health::pool_health(call.shared, call.id()).ok_or_else(|| call.not_found())?;
    Ok(envelope::ok(StatusCode::OK, result, call.generation))
}

/// `GET .../{kind}/{id}/references`: what names the resource, and what it names.
pub async fn references(call: Call<'_>) -> Served {
    let doc = call.document()?;
    let kind: Kind = call.kind();
    if doc.get(kind, call.id()).is_none() {
        return Err(call.not_found());
    }
    let items = lb_core::config::references::references(&doc, kind, call.id())
        .into_iter()
        .map(|r| reference(&r))
        .collect();
    Ok(envelope::ok(
        StatusCode::OK,
        Value::Array(items),
        call.generation,
    ))
}

/// `GET .../search`: resources by a query term, with their references.
pub async fn search(call: Call<'_>) -> Served {
    let args = finder::Search::parse(&call.query)
        .map_err(|e| refusal(StatusCode::BAD_REQUEST, code::INVALID, e.to_string()))?;
    let found = finder::search(&call.document()?, &args);
    let (page, per_page) = call.page()?;
    Ok(envelope::search(found, page, per_page, call.generation))
}

/// `GET .../regions` and `GET .../regions/{region}`: the regions and their countries.
pub async fn regions(call: Call<'_>) -> Served {
    let only = match call.params.id.as_deref().map(str::parse::<lb_core::Region>) {
        None => None,
        Some(Ok(r)) => Some(r),
        Some(Err(e)) => {
            return Err(refusal(
                StatusCode::NOT_FOUND,
                code::NOT_FOUND,
                e.to_string(),
            ))
        }
    };
    let country = region_list::country_arg(&call.query);
    let result = region_list::regions(&call.shared.setup.regions, only, country.as_deref());
    Ok(envelope::ok(StatusCode::OK, result, call.generation))
}

/// `GET /user/load_balancing_analytics/events`: health changes in Cloudflare's shape.
pub async fn events(call: Call<'_>) -> Served {
    let items = health::events(call.shared, &call.query).map_err(|e| match e {
        health::EventsError::Query(q) => {
            refusal(StatusCode::BAD_REQUEST, code::INVALID, q.to_string())
        }
        health::EventsError::LogUnavailable => refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            code::UNAVAILABLE,
            e.to_string(),
        ),
    })?;
    Ok(envelope::list(items, 1, usize::MAX, call.generation))
}
