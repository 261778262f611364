//! HTTP request durations by route template, method and status: a middleware over the whole application (the
//! API and the pages) and the worker's monitoring port. Labels stay bounded whatever clients send: the route is
//! the router's template (or `unmatched`), an unknown method is `other`.

use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;

use super::HTTP_DURATION;

/// The route label of a request: its matched template, or `unmatched` (a 404 of the router, whatever the path).
pub fn route_label(req: &Request) -> String {
    req.extensions().get::<MatchedPath>().map_or_else(|| "unmatched".to_string(), |m| m.as_str().to_string())
}

fn method_label(m: &Method) -> &'static str {
    match *m {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// Records one request once its answer's head is ready (a layer added with `Router::layer`, so that routing has
/// named the template already).
pub async fn record(req: Request, next: Next) -> Response {
    let route = route_label(&req);
    let method = method_label(req.method());
    let started = Instant::now();
    let res = next.run(req).await;
    let status = res.status().as_u16().to_string();
    metrics::histogram!(HTTP_DURATION, "route" => route, "method" => method, "status" => status)
        .record(started.elapsed().as_secs_f64());
    res
}
