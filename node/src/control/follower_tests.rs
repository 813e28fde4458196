//! A relay that alters what it passes on: the follower's fetch refuses the document whether the
//! relay keeps the writer's hash (the body does not match it) or puts its own (the writer's
//! signature does not cover it).

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;

use super::follower::{fetch, FetchError};
use super::serve::{SIZE_HEADER, WRITER_SIGNATURE_HEADER};
use super::signing::{sha256_hex, GENERATION_HEADER, SHA256_HEADER, SIGNATURE_HEADER};
use super::writer_key::{generate, SigningKey, VerifyKeys};
use super::{ConfigRole, ControlKey, ControlPlane, DocumentSettings, Versioned};

const GENUINE: &str = "[[pools]]\nname = \"genuine\"\n";
const ALTERED: &str = "[[pools]]\nname = \"altered\"\n";

/// A follower's control plane holding only the writer's public key; and the writer's key.
fn follower() -> (ControlPlane, SigningKey) {
    let dir = tempfile::tempdir().expect("dir");
    let (private, _) = generate().expect("keys");
    let file = dir.path().join("k.pem");
    std::fs::write(&file, private).expect("write");
    let writer = SigningKey::load(&file).expect("key");
    let documents = DocumentSettings {
        signing: None,
        verify: VerifyKeys::default().with(writer.public()),
        serve_max: 1,
    };
    let key = ControlKey::new("a cluster key, long enough", None);
    let (plane, _) = ControlPlane::new(
        ConfigRole::Follower,
        Versioned::new(0, ""),
        key,
        1 << 20,
        documents,
    );
    (plane, writer)
}

/// A relay answering every request with `body` and `headers`.
async fn relay(body: &'static str, headers: Vec<(&'static str, String)>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let headers = Arc::new(headers);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let headers = Arc::clone(&headers);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |_req| {
                    let headers = Arc::clone(&headers);
                    async move {
                        let mut r = hyper::Response::new(Full::new(Bytes::from(body)));
                        for (k, v) in headers.iter() {
                            r.headers_mut().insert(*k, v.parse().expect("header value"));
                        }
                        Ok::<_, std::convert::Infallible>(r)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tcp), service)
                    .await;
            });
        }
    });
    addr
}

fn headers(
    plane: &ControlPlane,
    sha: &str,
    size: usize,
    writer_sig: &str,
) -> Vec<(&'static str, String)> {
    vec![
        (GENERATION_HEADER, "5".into()),
        (SHA256_HEADER, sha.into()),
        // The HMAC a relay holding the cluster key can always make.
        (SIGNATURE_HEADER, plane.key.sign_document(5, sha)),
        (SIZE_HEADER, size.to_string()),
        (WRITER_SIGNATURE_HEADER, writer_sig.into()),
    ]
}

#[tokio::test]
async fn a_document_altered_by_a_relay_is_refused() {
    let (plane, writer) = follower();
    let tls = lb_tls::client_config(false, None).expect("tls");
    let client = reqwest::Client::builder()
        .use_preconfigured_tls((*tls).clone())
        .build()
        .expect("client");
    let genuine_sha = sha256_hex(GENUINE.as_bytes());
    let signature = writer.sign(5, &genuine_sha, GENUINE.len() as u64);
    // The genuine document passes.
    let honest = relay(
        GENUINE,
        headers(&plane, &genuine_sha, GENUINE.len(), &signature),
    )
    .await;
    let doc = fetch(&client, &plane, "f", &format!("http://{honest}"))
        .await
        .expect("the genuine document");
    assert_eq!(&*doc.text, GENUINE);
    assert_eq!(doc.signature.as_deref(), Some(signature.as_str()));
    // Altered, with the writer's hash and signature kept.
    let kept = relay(
        ALTERED,
        headers(&plane, &genuine_sha, GENUINE.len(), &signature),
    )
    .await;
    let refused = fetch(&client, &plane, "f", &format!("http://{kept}")).await;
    assert!(matches!(refused, Err(FetchError::Forged)), "{refused:?}");
    // Altered, with its own hash and the writer's signature of the genuine one.
    let altered_sha = sha256_hex(ALTERED.as_bytes());
    let own = relay(
        ALTERED,
        headers(&plane, &altered_sha, ALTERED.len(), &signature),
    )
    .await;
    let refused = fetch(&client, &plane, "f", &format!("http://{own}")).await;
    assert!(matches!(refused, Err(FetchError::Forged)), "{refused:?}");
}
