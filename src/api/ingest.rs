//! `/ingest/health`: per cluster whether the stored numbers are complete — watermark and lag, hours kept over
//! smaller reads, the anomalies of the last day (finance, admin, viewer).

use axum::Json;
use axum::extract::State;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::doc::ReaderErrors;
use crate::auth::GlobalReader;
use crate::error::ApiError;
use crate::ingest::health::IngestHealth;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_health))
}

/// Ingest health of every cluster.
#[utoipa::path(get, path = "/ingest/health", tag = "ingest", security(("bearer" = [])),
    responses((status = 200, description = "Every cluster's ingest health", body = IngestHealth), ReaderErrors))]
async fn get_health(
    State(s): State<AppState>,
    GlobalReader(reader): GlobalReader,
) -> Result<Json<IngestHealth>, ApiError> {
    Ok(Json(crate::usecase::health::health(&s.cases, &reader.scope()).await?))
}
