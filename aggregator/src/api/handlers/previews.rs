//! Previews run by the mesh (`crate::api::preview`): started with a monitor body, read back
//! by id.

use http::StatusCode;

use super::Served;
use crate::api::call::Call;
use crate::api::envelope::{self, code};
use crate::api::preview;
use crate::api::write::refusal;
use meshlb_node::control::writes::Refusal;

/// `POST .../monitors/{id}/preview` and `POST .../pools/{id}/preview`.
pub async fn start(mut call: Call<'_>) -> Served {
    let body = call.json().await?;
    let monitor = crate::api::convert::body(&body).map_err(|errors| Refusal {
        errors,
        ..refusal(
            StatusCode::BAD_REQUEST,
            code::INVALID,
            "the body is not a monitor",
        )
    })?;
    let result = preview::start(call.shared, call.kind(), call.id(), monitor).await?;
    Ok(envelope::ok(StatusCode::OK, result, call.generation))
}

/// `GET .../preview/{id}`: what the probers saw, and which regions never answered.
pub async fn result(call: Call<'_>) -> Served {
    let (result, messages) = preview::result(call.shared, call.id()).await?;
    Ok(envelope::ok_with_messages(
        StatusCode::OK,
        result,
        &messages,
        call.generation,
    ))
}
