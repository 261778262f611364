//! The pages' capability extractors: a handler that writes takes a [`PageWriter`], one that shows cluster-wide
//! figures a [`PageGlobalReader`], one about users and tokens a [`PageAdmin`], as the API's handlers take
//! `Finance` and `GlobalReader`. A signed-in caller without the capability gets the not-found page before the
//! handler runs (and before its form is read): what it may not open does not exist for it.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};

use super::layout::PageError;
use crate::access::{Administrator, Writer};
use crate::usecase::state::AppState;
use crate::web::extract::{PageRejection, PageUser};

/// Why a page request was refused before its handler ran: not signed in (or a session that failed), or signed in
/// without the capability.
#[derive(Debug)]
pub enum PageRefusal {
    Rejected(PageRejection),
    NotFound,
}

impl IntoResponse for PageRefusal {
    fn into_response(self) -> Response {
        match self {
            Self::Rejected(r) => r.into_response(),
            Self::NotFound => PageError::NotFound.into_response(),
        }
    }
}

async fn signed_in(parts: &mut Parts, state: &AppState) -> Result<PageUser, PageRefusal> {
    PageUser::from_request_parts(parts, state).await.map_err(PageRefusal::Rejected)
}

/// A signed-in finance or admin user: its page and the [`Writer`] the write use cases take.
pub struct PageWriter {
    pub user: PageUser,
    pub writer: Writer,
}

impl FromRequestParts<AppState> for PageWriter {
    type Rejection = PageRefusal;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let user = signed_in(parts, state).await?;
        let writer = Writer::of(&user.principal).ok_or(PageRefusal::NotFound)?;
        Ok(PageWriter { user, writer })
    }
}

/// A signed-in admin: its page and the [`Administrator`] the users and tokens use cases take.
pub struct PageAdmin {
    pub user: PageUser,
    pub admin: Administrator,
}

impl FromRequestParts<AppState> for PageAdmin {
    type Rejection = PageRefusal;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let user = signed_in(parts, state).await?;
        let admin = Administrator::of(&user.principal).ok_or(PageRefusal::NotFound)?;
        Ok(PageAdmin { user, admin })
    }
}

/// A signed-in user who reads every team and the cluster-wide figures (viewer, finance, admin).
pub struct PageGlobalReader(pub PageUser);

impl FromRequestParts<AppState> for PageGlobalReader {
    type Rejection = PageRefusal;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let user = signed_in(parts, state).await?;
        if user.principal.scope().is_global() { Ok(PageGlobalReader(user)) } else { Err(PageRefusal::NotFound) }
    }
}

/// Whether `user` may write: what a page offers (a form, a button), never what it permits.
pub fn may_write(user: &PageUser) -> bool {
    Writer::of(&user.principal).is_some()
}
