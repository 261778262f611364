//! A webhook receiver on a loopback port, for the budget alert tests.

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
