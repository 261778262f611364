//! The whole HTTP application: the JSON API ([`crate::api`]) and the portal's pages ([`crate::web`]) side by side
//! under one set of layers (request timeout, body limit, tracing); an unknown path is answered in the face's own
//! language (JSON under `/api/`, a page elsewhere).

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
    crate::api::routes(state.clone())
        .merge(crate::web::router(state.clone()))
        .fallback(not_found)
        .layer(axum::middleware::from_fn(move |req: Request, next: Next| crate::api::timeout(timeout, req, next)))
        .layer(axum::extract::DefaultBodyLimit::max(BODY_LIMIT))
        .layer(tower_http::limit::RequestBodyLimitLayer::new(BODY_LIMIT))
        .layer(axum::middleware::from_fn(errors_per_face))
        .layer(tower_http::trace::TraceLayer::new_for_http())
        .with_state(state)
}

fn is_api_path(path: &str) -> bool {
    ["/api/", "/swagger-ui", "/healthz", "/readyz"].iter().any(|p| path.starts_with(p)) || path == "/api"
}

/// Every error under the API's paths is JSON, whichever layer answered it (the body limit, the router, a handler).
async fn errors_per_face(req: Request, next: Next) -> Response {
    if is_api_path(req.uri().path()) { crate::api::json_errors(req, next).await } else { next.run(req).await }
}

async fn not_found(req: Request) -> Response {
    if is_api_path(req.uri().path()) { crate::api::not_found(req).await } else { crate::web::not_found(req).await }
}
