//! The portal: server-rendered pages (askama templates in `templates/`) for finance, team leads and the platform
//! team, over the same use cases as the JSON API. Every handler takes the signed-in [`PageUser`] and hands its
//! scope to the use cases, or the capability it needs ([`capability`]: a writer, a global reader, an admin); what
//! a caller may not see is the same not-found page as what does not exist.
//!
//! [`PageUser`]: extract::PageUser

mod adjustments;
mod admin;
mod bills;
mod budgets;
mod capability;
mod chart;
mod close;
pub mod extract;
mod field_errors;
mod fmt;
mod home;
mod i18n;
mod layout;
mod login;
mod nodes;
mod page_path;
mod policy;
mod rates;
mod reports;
mod waste;
mod words;

use axum::Router;
use axum::extract::Request;
use axum::response::Response;
use axum::routing::get;

use crate::usecase::state::AppState;

pub use layout::PageError;

/// The pages' routes.
pub fn router(state: AppState) -> Router<AppState> {
    Router::new()
        .route("/static/portal.css", get(layout::css))
        .merge(home::routes())
        .merge(bills::routes())
        .merge(close::routes())
        .merge(nodes::routes())
        .merge(budgets::routes())
        .merge(adjustments::routes())
        .merge(rates::routes())
        .merge(reports::routes())
        .merge(waste::routes())
        .merge(admin::routes())
        .merge(login::routes(state.sso.is_some()))
        .layer(axum::middleware::from_fn_with_state(state.clone(), layout::frame_conflicts))
        .layer(axum::middleware::from_fn(i18n::remember))
}

/// The answer to an unknown page: the same page a caller gets for what it may not see.
pub async fn not_found(_req: Request) -> Response {
    layout::not_found_page()
}
