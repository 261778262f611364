//! Webhook receivers on a loopback port, for the budget alert and close event tests.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;

/// The bodies of the POSTs the receiver answered with 200, in order.
pub type Posts = Arc<Mutex<Vec<Value>>>;

/// Starts a receiver of `POST /hook` answering with the status in the returned cell (200 at first; store 503 to
/// take it "down"); successful POSTs are kept.
pub async fn receiver() -> (Arc<AtomicU16>, Posts, SocketAddr) {
    let status = Arc::new(AtomicU16::new(200));
    let posts: Posts = Default::default();
    let (st, ps) = (status.clone(), posts.clone());
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |axum::Json(body): axum::Json<Value>| {
            let (st, ps) = (st.clone(), ps.clone());
            async move {
                let code = st.load(Ordering::SeqCst);
                if code == 200 {
                    ps.lock().unwrap().push(body);
                }
                axum::http::StatusCode::from_u16(code).unwrap()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (status, posts, addr)
}

/// One POST as a recorder received it: the status it answered, the headers and the body's raw bytes.
#[derive(Debug, Clone)]
pub struct Received {
    pub answered: u16,
    pub headers: axum::http::HeaderMap,
    pub body: Vec<u8>,
}

pub type Recorded = Arc<Mutex<Vec<Received>>>;

/// Starts a receiver of `POST /hook` that records every POST (headers and raw body, whatever it answers) and
/// answers, after `delay`, with the status in the returned cell (`status` at first).
pub async fn recorder(status: u16, delay: std::time::Duration) -> (Arc<AtomicU16>, Recorded, SocketAddr) {
    let cell = Arc::new(AtomicU16::new(status));
    let got: Recorded = Default::default();
    let (st, g) = (cell.clone(), got.clone());
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
            let (st, g) = (st.clone(), g.clone());
            async move {
                let code = st.load(Ordering::SeqCst);
                g.lock().unwrap().push(Received { answered: code, headers, body: body.to_vec() });
                tokio::time::sleep(delay).await;
                axum::http::StatusCode::from_u16(code).unwrap()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (cell, got, addr)
}
