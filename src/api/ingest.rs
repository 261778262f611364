//! `/ingest/health`: per cluster whether the stored numbers are complete — watermark and lag, hours kept over
//! smaller reads, the anomalies of the last day (finance, admin, viewer).

use axum::Json;
use axum::extract::State;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::doc::ReaderErrors;
use super::error::ApiError;
use crate::api::bearer::GlobalReader;
use crate::usecase::health::Health;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_health))
}

/// Ingest health of every cluster, and `pdf`: whether PDF statements can be made on this server (the fonts in use,
/// or why not: no CJK font found, where it was looked for and what to install). A font installed while the server
/// runs counts from the next request.
#[utoipa::path(get, path = "/ingest/health", tag = "ingest", security(("bearer" = [])),
    responses((status = 200, description = "Every cluster's ingest health, and whether PDFs can be made", body = Health), ReaderErrors))]
async fn get_health(State(s): State<AppState>, GlobalReader(reader): GlobalReader) -> Result<Json<Health>, ApiError> {
    Ok(Json(crate::usecase::health::full(&s.cases, &reader.scope()).await?))
}
