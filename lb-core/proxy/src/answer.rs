//! What the proxy answers a request with: a response it made, or an origin's answer with its
//! fields left where they lie in the origin's head (`OriginFields`), which the proxy's own
//! HTTP/1 server writes out without building a header map.

use http::{Response, StatusCode};

use crate::body::ProxyBody;
use crate::origin::head::OriginHead;

pub enum Answer {
    /// Made here (a 404, a fixed response, an error), or an origin's switch of protocols.
    Made(Response<ProxyBody>),
    /// An origin's answer.
    Origin(OriginHead, ProxyBody),
}

impl Answer {
    pub fn status(&self) -> StatusCode {
        match self {
            Answer::Made(r) => r.status(),
            Answer::Origin(head, _) => head.status,
        }
    }

    /// As an `http` response, for hyper's servers.
    pub fn into_response(self) -> Response<ProxyBody> {
        match self {
            Answer::Made(r) => r,
            Answer::Origin(head, body) => {
                let mut r = Response::new(body);
                *r.status_mut() = head.status;
                *r.headers_mut() = head.fields.to_map();
                r
            }
        }
    }
}

impl From<Response<ProxyBody>> for Answer {
    fn from(r: Response<ProxyBody>) -> Self {
        Answer::Made(r)
    }
}
