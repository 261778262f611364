//! `/audit`: every close, rate, team and mapping change, newest first (finance, admin, viewer).

use axum::Json;
use axum::extract::{OriginalUri, State};
use axum::http::HeaderMap;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::doc::{Paged, ReaderErrors};
use super::error::ApiError;
use super::page::{self, PageRequest};
use super::views::AuditEntry;
use super::{ApiQuery, AppState};
use crate::api::bearer::GlobalReader;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_audit))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AuditQuery {
    /// At most this many entries (1–1000, default 100).
    pub limit: Option<i64>,
    /// The page after this cursor (from `Link`).
    pub after: Option<String>,
    /// Entries older than this id (the paging before `after`; still read).
    pub before: Option<i64>,
}

#[utoipa::path(get, path = "/audit", tag = "audit", security(("bearer" = [])), params(AuditQuery),
    responses(Paged<AuditEntry>, ReaderErrors))]
async fn list_audit(
    State(s): State<AppState>,
    GlobalReader(reader): GlobalReader,
    OriginalUri(uri): OriginalUri,
    ApiQuery(q): ApiQuery<AuditQuery>,
) -> Result<(HeaderMap, Json<Vec<AuditEntry>>), ApiError> {
    let req = PageRequest::<i64>::parse(q.limit, q.after.as_deref())?;
    // newest first by id: the cursor is the last id shown, the next page the ids below it
    let before = match (req.after, q.before) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let limit = req.limit as i64;
    let mut rows = crate::usecase::audit::entries(&s.cases, &reader.scope(), limit + 1, before).await?;
    let more = rows.len() > req.limit;
    rows.truncate(req.limit);
    let next = if more { rows.last().map(|e| page::cursor(&e.id)) } else { None };
    Ok((page::link(&uri, next.as_deref(), &[]), Json(rows.into_iter().map(Into::into).collect())))
}
