//! `/reports`: the weekly low-utilization top N (ranked by wasted GPU-hours), the monthly utilization report and
//! the team ranking.

use axum::Json;
use axum::extract::State;
use chrono::Utc;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::doc::ReaderErrors;
use super::error::ApiError;
use super::{ApiPath, ApiQuery, AppState};
use crate::api::bearer::{GlobalReader, ScopedReader};
use crate::billing::Month;
use crate::usecase::reports::{self, TeamRank};
use crate::validate::{self, ClusterName};
use crate::waste::{UtilizationReport, WastefulPod};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(low_utilization))
        .routes(routes!(monthly_utilization))
        .routes(routes!(team_ranking))
        .routes(routes!(cluster_fragmentation))
        .routes(routes!(oversubscription))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct OversubscriptionQuery {
    /// Range start (default: 7 days before `to`): a date (its midnight in the billing time zone) or a time with or without seconds and offset; without an offset, billing time zone.
    #[param(value_type = Option<String>)]
    pub from: Option<validate::TimeInput>,
    /// Range end (default: the current hour): a date (its midnight in the billing time zone) or a time with or without seconds and offset; without an offset, billing time zone.
    #[param(value_type = Option<String>)]
    pub to: Option<validate::TimeInput>,
    /// Only this cluster (default: all).
    #[param(value_type = Option<String>)]
    pub cluster: Option<ClusterName>,
}

/// Oversubscription (超卖) per node, GPU model and cluster per day: cards' worth promised (a time-slicing replica a
/// whole card, MPS 1/replicas, HAMi gpucores/100, MIG g/slices) and card memory promised (a time-slicing replica a
/// card's, MPS 1/replicas, HAMi gpumem over the card's or gpumem_percentage, MIG its profile's memory over the
/// card's) over the physical cards, with the same cards' utilization beside it (global readers).
#[utoipa::path(get, path = "/reports/oversubscription", tag = "reports", security(("bearer" = [])), params(OversubscriptionQuery),
    responses((status = 200, description = "Promised over physical cards per node, model and cluster per day", body = crate::waste::OversubscriptionReport), ReaderErrors))]
async fn oversubscription(
    State(s): State<AppState>,
    GlobalReader(reader): GlobalReader,
    ApiQuery(q): ApiQuery<OversubscriptionQuery>,
) -> Result<Json<crate::waste::OversubscriptionReport>, ApiError> {
    let (from, to) = reports::oversubscription_range(q.from, q.to, s.billing_tz, Utc::now())?;
    let report = reports::oversubscription(&s.cases, &reader.scope(), from, to, q.cluster.as_ref()).await?;
    Ok(Json(report))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct HourQuery {
    /// The hour to judge (default: the newest stored hour): a date (its midnight in the billing time zone) or a time with or without seconds and offset; without an offset, billing time zone.
    #[param(value_type = Option<String>)]
    pub hour: Option<validate::TimeInput>,
}

/// Free cards per node in one hour, the largest free whole-card block and how fragmented free capacity is
/// (global readers).
#[utoipa::path(get, path = "/reports/fragmentation", tag = "reports", security(("bearer" = [])), params(HourQuery),
    responses((status = 200, description = "Free cards per node in the hour", body = crate::waste::Fragmentation), ReaderErrors))]
async fn cluster_fragmentation(
    State(s): State<AppState>,
    GlobalReader(reader): GlobalReader,
    ApiQuery(q): ApiQuery<HourQuery>,
) -> Result<Json<crate::waste::Fragmentation>, ApiError> {
    let hour = reports::fragmentation_hour(q.hour, s.billing_tz)?;
    Ok(Json(reports::fragmentation(&s.cases, &reader.scope(), hour).await?))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct TopQuery {
    /// Range start (default: 7 days before `to`): a date (its midnight in the billing time zone) or a time with or without seconds and offset; without an offset, billing time zone.
    #[param(value_type = Option<String>)]
    pub from: Option<validate::TimeInput>,
    /// Range end (default: the current hour): a date (its midnight in the billing time zone) or a time with or without seconds and offset; without an offset, billing time zone.
    #[param(value_type = Option<String>)]
    pub to: Option<validate::TimeInput>,
    /// How many pods (1–500, default 10).
    pub top: Option<i64>,
}

/// The pods with the most wasted GPU-hours in a range (default: the last 7 days) — by hours, not by percent —
/// with owner, GPU model and the money of the wasted hours at the model's rate at the range's end.
#[utoipa::path(get, path = "/reports/low-utilization", tag = "reports", security(("bearer" = [])), params(TopQuery),
    responses((status = 200, description = "The pods that wasted the most GPU-hours, most first", body = Vec<WastefulPod>), ReaderErrors))]
async fn low_utilization(
    State(s): State<AppState>,
    ScopedReader(scope): ScopedReader,
    ApiQuery(q): ApiQuery<TopQuery>,
) -> Result<Json<Vec<WastefulPod>>, ApiError> {
    let (from, to, top) = reports::low_utilization_range(q.from, q.to, q.top, s.billing_tz, Utc::now())?;
    Ok(Json(reports::low_utilization(&s.cases, &scope, from, to, top).await?))
}

/// The month's allocation rate, utilization and effective rate, per billing day (with GPU-hours per team, for a
/// stacked trend) and per team (global readers).
#[utoipa::path(get, path = "/reports/utilization/{month}", tag = "reports", security(("bearer" = [])),
    params(("month" = String, Path, description = "YYYY-MM")),
    responses((status = 200, description = "The month's utilization per team and model", body = UtilizationReport), ReaderErrors))]
async fn monthly_utilization(
    State(s): State<AppState>,
    GlobalReader(reader): GlobalReader,
    ApiPath(month): ApiPath<Month>,
) -> Result<Json<UtilizationReport>, ApiError> {
    Ok(Json(reports::month_utilization(&s.cases, &reader.scope(), month).await?))
}

/// Teams ranked by efficiency (utilization), with GPU-hours, effective GPU-hours and cost (global readers).
#[utoipa::path(get, path = "/reports/teams/{month}", tag = "reports", security(("bearer" = [])),
    params(("month" = String, Path, description = "YYYY-MM")),
    responses((status = 200, description = "Teams ranked by utilization, with their cost", body = Vec<TeamRank>), ReaderErrors))]
async fn team_ranking(
    State(s): State<AppState>,
    GlobalReader(reader): GlobalReader,
    ApiPath(month): ApiPath<Month>,
) -> Result<Json<Vec<TeamRank>>, ApiError> {
    Ok(Json(reports::team_ranking(&s.cases, &reader.scope(), month).await?))
}
