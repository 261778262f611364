//! Who is looking at a page: the signed-in user of the portal's session ([`PageUser`]), and the forms that carry
//! the session's CSRF token ([`CsrfForm`]). The pages take these as the API's handlers take the bearer
//! extractors; the roles and the scope are the same ([`Principal::scope`]).

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Redirect, Response};
use serde::de::DeserializeOwned;

use super::Principal;
use crate::state::AppState;

/// The signed-in user of a page request. A request without a valid session is sent to `/login`.
#[derive(Debug, Clone)]
pub struct PageUser {
    pub principal: Principal,
    /// The login name shown in the header.
    pub username: String,
    /// The session's CSRF token: every form a page renders carries it in a hidden field named `csrf`.
    pub csrf: String,
}

/// Why a page request was refused before its handler ran.
#[derive(Debug)]
pub enum PageRejection {
    /// Not signed in: to the login page, then back.
    Login { next: String },
    /// A form without the session's CSRF token.
    Csrf,
    /// A form that could not be read.
    BadForm(String),
}

impl IntoResponse for PageRejection {
    fn into_response(self) -> Response {
        match self {
            Self::Login { next } => Redirect::to(&format!(
                "/login?next={}",
                url::form_urlencoded::byte_serialize(next.as_bytes()).collect::<String>()
            ))
            .into_response(),
            Self::Csrf => {
                (axum::http::StatusCode::FORBIDDEN, "the form's CSRF token is missing or stale; reload the page")
                    .into_response()
            }
            Self::BadForm(m) => (axum::http::StatusCode::BAD_REQUEST, m).into_response(),
        }
    }
}

impl FromRequestParts<AppState> for PageUser {
    type Rejection = PageRejection;

    async fn from_request_parts(parts: &mut Parts, _state: &AppState) -> Result<Self, Self::Rejection> {
        // sessions arrive with the login (auth::session); until then nobody is signed in
        let next = parts.uri.path_and_query().map(|p| p.as_str().to_string()).unwrap_or_else(|| "/".into());
        Err(PageRejection::Login { next })
    }
}

/// An `application/x-www-form-urlencoded` form whose `csrf` field matches the session's token; the other fields
/// are read into `T` (which ignores `csrf`).
pub struct CsrfForm<T>(pub T);

impl<T: DeserializeOwned + Send> FromRequest<AppState> for CsrfForm<T> {
    type Rejection = PageRejection;

    async fn from_request(_req: Request, _state: &AppState) -> Result<Self, Self::Rejection> {
        Err(PageRejection::Csrf)
    }
}
