//! `/reservation-terms`: the GPU model and factor a quota scope's guarantee is billed at under reserved-quota
//! billing (SPEC §10), dated and audited.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use serde::Serialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::doc::{ReaderErrors, WriterErrors};
use super::error::ApiError;
use super::extract::ApiJson;
use crate::api::bearer::{Finance, GlobalReader};
use crate::db::reservations::StoredTerm;
use crate::usecase::reservation_terms::{self, ReservationTermInput};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_terms, create_term))
}

/// A scope's reservation terms from a date on.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ReservationTerm {
    pub id: i64,
    /// Absent: every cluster.
    pub cluster: Option<String>,
    /// `namespace`, `cluster_queue` or `volcano_queue`.
    pub scope_kind: String,
    pub scope: String,
    /// The pricing model the guaranteed cards are billed as.
    pub gpu_model: String,
    /// The factor on the model's rate.
    #[schema(value_type = String, example = "0.8")]
    pub factor: Decimal,
    pub valid_from: NaiveDate,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
}

impl From<StoredTerm> for ReservationTerm {
    fn from(t: StoredTerm) -> Self {
        ReservationTerm {
            id: t.id,
            cluster: t.cluster,
            scope_kind: t.scope_kind,
            scope: t.scope,
            gpu_model: t.gpu_model,
            factor: t.factor.normalize(),
            valid_from: t.valid_from,
            created_by: t.created_by,
            created_at: t.created_at,
        }
    }
}

/// Every scope's reservation terms, by scope and date (global readers).
#[utoipa::path(get, path = "/reservation-terms", tag = "bills", security(("bearer" = [])),
    responses((status = 200, description = "Reservation terms", body = Vec<ReservationTerm>), ReaderErrors))]
async fn list_terms(
    State(s): State<AppState>,
    GlobalReader(_reader): GlobalReader,
) -> Result<Json<Vec<ReservationTerm>>, ApiError> {
    Ok(Json(reservation_terms::list(&s.cases).await?.into_iter().map(Into::into).collect()))
}

/// States the GPU model a quota scope's guaranteed cards are billed as under reserved-quota billing, and the factor
/// on that model's rate, from a date (finance, admin): the scope's guarantee is billed at rate × factor from that
/// day. A second set of terms for the same scope, cluster and date is a 409. Audited.
#[utoipa::path(post, path = "/reservation-terms", tag = "bills", security(("bearer" = [])),
    request_body = ReservationTermInput,
    responses((status = 201, description = "The terms as stored", body = ReservationTerm), ReaderErrors, WriterErrors))]
async fn create_term(
    State(s): State<AppState>,
    Finance(writer): Finance,
    ApiJson(input): ApiJson<ReservationTermInput>,
) -> Result<(StatusCode, Json<ReservationTerm>), ApiError> {
    Ok((StatusCode::CREATED, Json(reservation_terms::create(&s.cases, &writer, &input).await?.into())))
}
