//! The client side: accepting connections (plain or TLS), the proxy's own HTTP/1 server for
//! plain keep-alive requests, and hyper's servers for the rest.

pub mod http1;
mod in_flight;
pub mod listener;
pub mod prefixed;
pub mod request_head;
pub mod response;
pub mod tls;
