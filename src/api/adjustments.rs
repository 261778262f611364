//! `/adjustments`: credits and debits with maker-checker (SPEC §11) — finance enters one with a reason, another
//! finance or admin user approves or rejects it; approved ones are statement lines (`adjustments` of the team
//! statement, `adjusted` of its summary), pending ones are shown on the draft only.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::doc::{ReaderErrors, WriterErrors};
use super::error::ApiError;
use super::extract::ApiJson;
use super::{ApiPath, ApiQuery, AppState};
use crate::api::bearer::{Finance, ScopedReader};
use crate::billing::Month;
use crate::ledger::{Adjustment, AdjustmentStatus};
use crate::usecase::adjustments::{self, AdjustmentInput, DecisionInput};
use crate::validate;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_adjustments, enter_adjustment))
        .routes(routes!(approve_adjustment))
        .routes(routes!(reject_adjustment))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct AdjustmentsQuery {
    /// Only those correcting or booked to this month, `YYYY-MM`.
    #[param(value_type = Option<String>, example = "2026-11")]
    pub month: Option<String>,
    /// Only those in this state.
    pub status: Option<AdjustmentStatus>,
    /// At most this many, the newest first (1–1000, default 100, as every `limit` of the API).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
}

/// The adjustments of the teams the caller sees (a team lead: its own teams'), the newest first.
#[utoipa::path(get, path = "/adjustments", tag = "bills", security(("bearer" = [])), params(AdjustmentsQuery),
    responses((status = 200, description = "The adjustments, the newest first", body = Vec<Adjustment>), ReaderErrors))]
async fn list_adjustments(
    State(s): State<AppState>,
    ScopedReader(scope): ScopedReader,
    ApiQuery(q): ApiQuery<AdjustmentsQuery>,
) -> Result<Json<Vec<Adjustment>>, ApiError> {
    let month = match q.month.as_deref() {
        Some(m) => Some(Month::parse(m).map_err(|e| ApiError::invalid("month", e.to_string()))?),
        None => None,
    };
    let limit = validate::bounded("limit", q.limit.unwrap_or(validate::PAGE_DEFAULT), 1, validate::PAGE_MAX)?;
    Ok(Json(adjustments::list(&s.cases, &scope, month, q.status, limit).await?))
}

/// Enters an adjustment (finance, admin): pending — shown on the draft, in no total — until another finance or
/// admin user approves or rejects it. Audited.
#[utoipa::path(post, path = "/adjustments", tag = "bills", security(("bearer" = [])),
    request_body = AdjustmentInput,
    responses((status = 201, description = "The adjustment as stored, pending", body = Adjustment), ReaderErrors, WriterErrors))]
async fn enter_adjustment(
    State(s): State<AppState>,
    Finance(writer): Finance,
    ApiJson(input): ApiJson<AdjustmentInput>,
) -> Result<(StatusCode, Json<Adjustment>), ApiError> {
    Ok((StatusCode::CREATED, Json(adjustments::enter(&s.cases, &writer, &input).await?)))
}

/// Approves a pending adjustment (finance, admin; never whoever entered it: 409): booked to the month it corrects
/// while that is open, else to the first open month after it as a restatement. Audited.
#[utoipa::path(post, path = "/adjustments/{id}/approve", tag = "bills", security(("bearer" = [])),
    params(("id" = i64, Path, description = "adjustment id")),
    request_body = DecisionInput,
    responses((status = 200, description = "The adjustment, approved and booked", body = Adjustment), ReaderErrors, WriterErrors))]
async fn approve_adjustment(
    State(s): State<AppState>,
    Finance(writer): Finance,
    ApiPath(id): ApiPath<i64>,
    ApiJson(input): ApiJson<DecisionInput>,
) -> Result<Json<Adjustment>, ApiError> {
    Ok(Json(adjustments::approve(&s.cases, &writer, id, &input).await?))
}

/// Rejects a pending adjustment (finance, admin; never whoever entered it: 409): kept as a record, never a line.
/// Audited.
#[utoipa::path(post, path = "/adjustments/{id}/reject", tag = "bills", security(("bearer" = [])),
    params(("id" = i64, Path, description = "adjustment id")),
    request_body = DecisionInput,
    responses((status = 200, description = "The adjustment, rejected", body = Adjustment), ReaderErrors, WriterErrors))]
async fn reject_adjustment(
    State(s): State<AppState>,
    Finance(writer): Finance,
    ApiPath(id): ApiPath<i64>,
    ApiJson(input): ApiJson<DecisionInput>,
) -> Result<Json<Adjustment>, ApiError> {
    Ok(Json(adjustments::reject(&s.cases, &writer, id, &input).await?))
}
