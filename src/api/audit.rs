//! `/audit`: every close, rate, team and mapping change, newest first (finance, admin, viewer).

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{ApiQuery, AppState};
use crate::auth::GlobalReader;
use crate::db::{self, audit::AuditEntry};
use crate::error::{ApiError, ErrorBody};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_audit))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
pub struct AuditQuery {
    /// At most this many entries (1–1000, default 100).
    pub limit: Option<i64>,
    /// Entries older than this id (paging).
    pub before: Option<i64>,
}

#[utoipa::path(get, path = "/audit", tag = "audit", security(("bearer" = [])), params(AuditQuery),
    responses((status = 200, body = Vec<AuditEntry>), (status = 403, body = ErrorBody), (status = 422, body = ErrorBody)))]
async fn list_audit(
    State(s): State<AppState>,
    GlobalReader(_reader): GlobalReader,
    ApiQuery(q): ApiQuery<AuditQuery>,
) -> Result<Json<Vec<AuditEntry>>, ApiError> {
    let limit = crate::validate::bounded("limit", q.limit.unwrap_or(100), 1, 1000)?;
    Ok(Json(db::audit::list(&s.pool, limit, q.before).await?))
}
