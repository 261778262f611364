//! The login and logout pages: a form of `username` and `password` (with its CSRF token) at `/login`, and
//! `POST /logout`.

use axum::Router;

use crate::state::AppState;

/// `/login` and `/logout`.
pub fn routes() -> Router<AppState> {
    Router::new()
}
