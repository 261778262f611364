//! The portal: server-rendered pages (askama templates in `templates/`) for finance, team leads and the platform
//! team, over the same use cases as the JSON API.

mod login;

use axum::Router;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};

use crate::state::AppState;

/// The pages' routes.
pub fn router(_state: AppState) -> Router<AppState> {
    Router::new().merge(login::routes())
}

/// The answer to an unknown page.
pub async fn not_found(_req: Request) -> Response {
    (StatusCode::NOT_FOUND, Html("<!doctype html><title>404</title><h1>404 — not found</h1>")).into_response()
}
