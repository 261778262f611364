//! The whole HTTP application: the JSON API ([`crate::api`]) and the portal's pages ([`crate::web`]) side by side
//! under one set of layers (request timeout, body limit, tracing, request durations); an unknown path is answered in
//! the face's own language (JSON under `/api/`, a page elsewhere). `/metrics` ([`crate::telemetry`]) sits beside
//! the probes, outside the API's authentication and its OpenAPI document.

use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;

use crate::state::AppState;

/// The one request-body limit: the layer and every extractor (`String`, `Bytes`, `Json`, forms) agree on it.
pub const BODY_LIMIT: usize = crate::api::BODY_LIMIT;

/// No request may hold a connection for longer (the pool's `statement_timeout` bounds each statement).
pub const REQUEST_TIMEOUT: Duration = crate::api::REQUEST_TIMEOUT;

/// The application as `cardhour serve` runs it.
pub fn app(state: AppState) -> Router {
    app_with_timeout(state, REQUEST_TIMEOUT)
}

/// [`app`] with another request timeout (tests).
pub fn app_with_timeout(state: AppState, timeout: Duration) -> Router {
    crate::telemetry::install("serve");
    // sessions only where pages are: the API keeps its bearer tokens and never sets or reads a cookie
    let pages = crate::web::router(state.clone())
        .layer(axum::middleware::map_response(page_headers))
        .layer(crate::auth::session::layer(state.pool.clone(), &state.portal.session));
    crate::api::routes(state.clone())
        .merge(pages)
        .route("/metrics", axum::routing::get(crate::telemetry::metrics_handler))
        .fallback(not_found)
        .layer(axum::middleware::from_fn(move |req: Request, next: Next| crate::api::timeout(timeout, req, next)))
        .layer(axum::extract::DefaultBodyLimit::max(BODY_LIMIT))
        .layer(tower_http::limit::RequestBodyLimitLayer::new(BODY_LIMIT))
        .layer(axum::middleware::from_fn(errors_per_face))
        .layer(tower_http::trace::TraceLayer::new_for_http())
        // outermost: the status recorded is the one sent, whichever layer answered
        .layer(axum::middleware::from_fn(crate::telemetry::http::record))
        .with_state(state)
}

/// What every page answer says to the browser: never framed by another site (clickjacking a form), forms post
/// only here, no content sniffing, no full URL in the Referer sent elsewhere.
async fn page_headers(mut r: Response) -> Response {
    use axum::http::HeaderValue;
    use axum::http::header::{CONTENT_SECURITY_POLICY, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS};
    let h = r.headers_mut();
    h.entry(CONTENT_SECURITY_POLICY).or_insert(HeaderValue::from_static(
        "frame-ancestors 'none'; form-action 'self'; base-uri 'self'; object-src 'none'",
    ));
    h.entry(X_FRAME_OPTIONS).or_insert(HeaderValue::from_static("DENY"));
    h.entry(X_CONTENT_TYPE_OPTIONS).or_insert(HeaderValue::from_static("nosniff"));
    h.entry(REFERRER_POLICY).or_insert(HeaderValue::from_static("same-origin"));
    r
}

fn is_api_path(path: &str) -> bool {
    ["/api/", "/swagger-ui", "/healthz", "/readyz", "/metrics"].iter().any(|p| path.starts_with(p)) || path == "/api"
}

/// Every error under the API's paths is JSON, whichever layer answered it (the body limit, the router, a handler).
async fn errors_per_face(req: Request, next: Next) -> Response {
    if is_api_path(req.uri().path()) { crate::api::json_errors(req, next).await } else { next.run(req).await }
}

async fn not_found(req: Request) -> Response {
    if is_api_path(req.uri().path()) { crate::api::not_found(req).await } else { crate::web::not_found(req).await }
}
