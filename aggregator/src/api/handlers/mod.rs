//! What serves each route of `super::routes::ROUTES`: one small async function per method
//! and path, grouped by what they serve.

pub mod config;
pub mod previews;
pub mod resources;
pub mod teamnet;
pub mod views;

use std::future::Future;
use std::pin::Pin;

use super::call::Call;
use super::envelope::Reply;
use meshlb_node::control::writes::Refusal;

/// What a handler's future yields.
pub type Served = Result<Reply, Refusal>;

/// A handler's future.
pub type Answer<'a> = Pin<Box<dyn Future<Output = Served> + Send + 'a>>;

/// A handler, as the route table holds it.
pub type Handler = for<'a> fn(Call<'a>) -> Answer<'a>;
