//! `/budgets`: a monthly budget per team (finance sets it), with the spend so far, the forecast at the current run
//! rate and the alerts raised.

use axum::Json;
use axum::extract::State;
use rust_decimal::Decimal;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::doc::{ReaderErrors, WriterErrors};
use super::error::ApiError;
use super::views::{Budget, BudgetStatus};
use super::{ApiJson, ApiPath, AppState};
use crate::api::bearer::{Finance, ScopedReader};
use crate::billing::Month;
use crate::usecase::budgets;
use crate::validate::{self, TeamId};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(put_budget)).routes(routes!(list_budgets))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetInput {
    /// Yuan for the month, to the fen: more than 0, at most 2 decimals (a third is refused, never rounded away).
    #[schema(value_type = String)]
    #[serde(deserialize_with = "validate::decimal::decimal")]
    pub amount: Decimal,
    /// Shares of the budget that raise an alert (default 0.8 and 1.0).
    #[schema(value_type = Option<Vec<String>>, min_items = 1)]
    #[serde(default, deserialize_with = "validate::decimal::optional_decimals")]
    pub thresholds: Option<Vec<Decimal>>,
}

/// Sets a team's budget for a month (finance, admin). Audited.
#[utoipa::path(put, path = "/budgets/{month}/{team}", tag = "budgets", security(("bearer" = [])),
    params(("month" = String, Path, description = "YYYY-MM"), ("team" = String, Path, description = "team id")),
    request_body = BudgetInput,
    responses((status = 200, description = "The budget as stored", body = Budget), ReaderErrors, WriterErrors))]
async fn put_budget(
    State(s): State<AppState>,
    Finance(writer): Finance,
    ApiPath((month, team)): ApiPath<(Month, TeamId)>,
    ApiJson(input): ApiJson<BudgetInput>,
) -> Result<Json<Budget>, ApiError> {
    Ok(Json(budgets::set_budget(&s.cases, &writer, month, &team, input.amount, input.thresholds).await?.into()))
}

/// The month's budgets with spend, forecast and alerts (a team lead: its own teams).
#[utoipa::path(get, path = "/budgets/{month}", tag = "budgets", security(("bearer" = [])),
    params(("month" = String, Path, description = "YYYY-MM")),
    responses((status = 200, description = "Every budget of the month (a team lead: its teams'), with spending, forecast and alerts", body = Vec<BudgetStatus>), ReaderErrors))]
async fn list_budgets(
    State(s): State<AppState>,
    ScopedReader(scope): ScopedReader,
    ApiPath(month): ApiPath<Month>,
) -> Result<Json<Vec<BudgetStatus>>, ApiError> {
    Ok(Json(budgets::budgets(&s.cases, &scope, month).await?.into_iter().map(Into::into).collect()))
}
