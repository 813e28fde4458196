//! The origin side: pooled connections to endpoints, the HTTP/1 exchange on them, and the pure
//! parts that interpret what an origin sends (its head in `head.rs`, its body in `decode.rs`).

pub mod body;
pub mod decode;
pub mod fields;
pub mod head;
pub mod http1;
pub mod pool;
