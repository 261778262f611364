//! `/budgets`: a monthly budget per team (finance sets it), with the spend so far, the forecast at the current run
//! rate and the alerts raised.

use axum::Json;
use axum::extract::{Path, State};
use chrono::Utc;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::doc::{ReaderErrors, WriterErrors};
use super::{ApiJson, AppState};
use crate::auth::{Finance, ScopedReader};
use crate::billing::Month;
use crate::db::{self, audit, budgets::Alert, budgets::Budget};
use crate::error::{ApiError, FieldError};
use crate::money::Money;
use crate::validate::{self, TeamId};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(put_budget)).routes(routes!(list_budgets))
}

fn parse_month(s: &str) -> Result<Month, ApiError> {
    Ok(validate::month("month", s)?)
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetInput {
    /// Yuan for the month.
    #[schema(value_type = String)]
    pub amount: Decimal,
    /// Shares of the budget that raise an alert (default 0.8 and 1.0).
    #[schema(value_type = Option<Vec<String>>)]
    pub thresholds: Option<Vec<Decimal>>,
}

/// Sets a team's budget for a month (finance, admin). Audited.
#[utoipa::path(put, path = "/budgets/{month}/{team}", tag = "budgets", security(("bearer" = [])),
    params(("month" = String, Path, description = "YYYY-MM"), ("team" = String, Path, description = "team id")),
    request_body = BudgetInput,
    responses((status = 200, description = "The budget as stored", body = Budget), ReaderErrors, WriterErrors))]
async fn put_budget(
    State(s): State<AppState>,
    Finance(p): Finance,
    Path((month, team)): Path<(String, String)>,
    ApiJson(input): ApiJson<BudgetInput>,
) -> Result<Json<Budget>, ApiError> {
    let month = parse_month(&month)?;
    let team = TeamId::parse("team", &team)?.into_string();
    let mut errors = Vec::new();
    if input.amount <= Decimal::ZERO || input.amount > Decimal::from(10_000_000_000u64) {
        errors.push(FieldError {
            field: "amount".into(),
            message: "must be more than 0 and at most 10,000,000,000".into(),
        });
    }
    let mut thresholds = input.thresholds.unwrap_or_else(|| vec![Decimal::new(8, 1), Decimal::ONE]);
    thresholds.sort();
    thresholds.dedup();
    if thresholds.is_empty() || thresholds.iter().any(|t| *t <= Decimal::ZERO || *t > Decimal::from(10)) {
        errors.push(FieldError { field: "thresholds".into(), message: "each must be in (0, 10]".into() });
    }
    if !errors.is_empty() {
        return Err(ApiError::Invalid(errors));
    }
    let mut tx = s.pool.begin().await?;
    if db::teams::get(&mut tx, &team).await?.is_none() {
        return Err(ApiError::NotFound(format!("team {team}")));
    }
    let budget =
        Budget { team_id: team.clone(), month: month.to_string(), amount: input.amount.round_dp(2), thresholds };
    let before = db::budgets::upsert(&mut tx, &budget, &p.actor()).await?;
    audit::record(
        &mut tx,
        &p.actor(),
        "budget.put",
        &format!("budget:{team}:{month}"),
        before.and_then(|b| serde_json::to_value(b).ok()),
        serde_json::to_value(&budget).ok(),
    )
    .await?;
    tx.commit().await?;
    // a budget set below what is spent already alerts now, not at the next worker cycle
    crate::alerts::check_after_change(&s.pool, s.billing_tz, Some(month.first_day())).await;
    Ok(Json(budget))
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct BudgetStatus {
    #[serde(flatten)]
    pub budget: Budget,
    /// The team's statement total so far.
    pub spent: Money,
    /// At the current run rate, for the whole month.
    pub forecast: Money,
    pub alerts: Vec<Alert>,
}

/// The month's budgets with spend, forecast and alerts (a team lead: its own teams).
#[utoipa::path(get, path = "/budgets/{month}", tag = "budgets", security(("bearer" = [])),
    params(("month" = String, Path, description = "YYYY-MM")),
    responses((status = 200, description = "Every budget of the month (a team lead: its teams'), with spending, forecast and alerts", body = Vec<BudgetStatus>), ReaderErrors))]
async fn list_budgets(
    State(s): State<AppState>,
    ScopedReader(scope): ScopedReader,
    Path(month): Path<String>,
) -> Result<Json<Vec<BudgetStatus>>, ApiError> {
    let month = parse_month(&month)?;
    let budgets = db::budgets::for_month(&s.pool, &month.to_string(), &scope).await?;
    let st = s.statements.statement(&s.pool, month, crate::billing::PolicyChoice::NONE).await?;
    let part = crate::alerts::elapsed(month, s.billing_tz, Utc::now());
    let alerts = db::budgets::alerts(&s.pool, &month.to_string(), false).await?;
    Ok(Json(
        budgets
            .into_iter()
            .map(|b| {
                let spent = st.team_total(&b.team_id);
                BudgetStatus {
                    spent,
                    forecast: crate::waste::forecast(spent, part),
                    alerts: alerts.iter().filter(|a| a.team_id == b.team_id).cloned().collect(),
                    budget: b,
                }
            })
            .collect(),
    ))
}
